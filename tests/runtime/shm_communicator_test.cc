// The shared-memory communicator against the in-process one: ranks are threads of this
// test, each mapping the segment through its own file descriptor, meeting through an
// in-memory store. Every collective, dtype and reduction must give the in-process
// communicator's bytes exactly, with steps of a few bytes (many chunks) and of the
// default size; mismatched collectives, a rank that never comes or never joins, a rank
// that is gone and Abort must end in errors naming the ranks, never a hang.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "comm_test_util.h"
#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/runtime/shm_communicator.h"

namespace tpc::runtime {
namespace {

using comm_test::CheckSame;
using comm_test::Group;
using comm_test::kDTypes;
using comm_test::Kind;
using comm_test::kOps;
using comm_test::MemoryStore;
using comm_test::OnRanks;
using ir::DType;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ShmOptions Options(const std::string& prefix, milliseconds timeout = milliseconds(20000),
                   int64_t chunk_bytes = int64_t{1} << 20) {
  ShmOptions options;
  options.timeout = timeout;
  options.key_prefix = prefix;
  options.chunk_bytes = chunk_bytes;
  return options;
}

// ConnectShm for the given ranks of a group of n, each on its own thread.
std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> Connect(KeyValueStore& store, int n,
                                                                   const std::vector<int>& ranks,
                                                                   const ShmOptions& options) {
  return comm_test::ConnectRanks(n, ranks, [&](int r) { return ConnectShm(store, r, n, options); });
}

Group ConnectAll(KeyValueStore& store, int n, const ShmOptions& options) {
  return comm_test::ConnectGroup(n, [&](int r) { return ConnectShm(store, r, n, options); });
}

// The names this process left in /dev/shm.
std::vector<std::string> OwnSegments() {
  std::vector<std::string> names;
  const std::string mine = absl::StrCat("tpc-", getpid(), "-");
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (absl::StartsWith(e->d_name, mine)) names.push_back(e->d_name);
    }
    closedir(dir);
  }
  return names;
}

TEST_CASE("Shared-memory collectives equal the in-process communicator's bit for bit", "[shm]") {
  MemoryStore store;
  std::mt19937 rng(20261124);
  for (int n : {2, 3, 4}) {
    // 256-byte steps: every collective of more than a few elements takes several, and
    // the part of a ReduceScatter step per rank is not a multiple of its count.
    for (int64_t chunk : {int64_t{256}, int64_t{1} << 20}) {
      Group shm = ConnectAll(
          store, n, Options(absl::StrCat("group", n, "/", chunk), milliseconds(20000), chunk));
      Group threads = MakeInProcessGroup(n, std::chrono::seconds(20));
      for (DType dtype : kDTypes) {
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{1000}}) {
          for (ReduceOp op : kOps) {
            CheckSame(shm, threads, Kind::kAllReduce, dtype, op, count, rng);
            CheckSame(shm, threads, Kind::kReduceScatter, dtype, op, count, rng);
          }
          CheckSame(shm, threads, Kind::kAllGather, dtype, ReduceOp::kSum, count, rng);
          CheckSame(shm, threads, Kind::kAllToAll, dtype, ReduceOp::kSum, count, rng);
        }
        for (const auto& s : OnRanks(shm, [](Communicator& c) { return c.Barrier(); })) {
          REQUIRE(s.ok());
        }
      }
      const int64_t big = (chunk < 1024 ? int64_t{5000} : int64_t{1} << 20) + 3;
      CheckSame(shm, threads, Kind::kAllReduce, DType::kF32, ReduceOp::kSum, big, rng);
      CheckSame(shm, threads, Kind::kAllReduce, DType::kBF16, ReduceOp::kAvg, big, rng);
      CheckSame(shm, threads, Kind::kReduceScatter, DType::kF16, ReduceOp::kSum, big, rng);
      CheckSame(shm, threads, Kind::kAllGather, DType::kF64, ReduceOp::kSum, big, rng);
      CheckSame(shm, threads, Kind::kAllToAll, DType::kI64, ReduceOp::kSum, big, rng);
      for (int64_t count : {int64_t{1}, int64_t{n}, int64_t{1001}, big}) {
        CheckSame(shm, threads, Kind::kAllReduce, DType::kF32, ReduceOp::kSum, count, rng, true);
      }
    }
  }
  // Every segment was unlinked once its ranks had mapped it.
  REQUIRE(OwnSegments().empty());
}

TEST_CASE("Shared-memory AllGather takes its input in place, a group of one copies", "[shm]") {
  MemoryStore store;
  Group shm = ConnectAll(store, 3, Options("inplace", milliseconds(20000), 64));
  auto status = OnRanks(shm, [](Communicator& c) {
    std::vector<int32_t> buf(3 * 50, -1);
    for (int i = 0; i < 50; ++i) buf[static_cast<size_t>(c.rank() * 50 + i)] = c.rank() * 100 + i;
    absl::Status s = c.AllGather(buf.data() + c.rank() * 50, buf.data(), 50, DType::kI32);
    if (!s.ok()) return s;
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < 50; ++i) {
        if (buf[static_cast<size_t>(r * 50 + i)] != r * 100 + i) {
          return absl::InternalError(absl::StrCat("element ", r * 50 + i, " wrong"));
        }
      }
    }
    return absl::OkStatus();
  });
  for (const auto& s : status) REQUIRE(s.ok());

  Group one = ConnectAll(store, 1, Options("single"));
  Communicator& c = *one[0];
  std::vector<float> in = {1.5f, -2.0f, 3.25f}, out(3);
  REQUIRE(c.AllReduce(in.data(), out.data(), 3, DType::kF32, ReduceOp::kSum).ok());
  REQUIRE(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  REQUIRE(c.ReduceScatter(in.data(), out.data(), 3, DType::kF32, ReduceOp::kAvg).ok());
  REQUIRE(out == in);
  REQUIRE(c.Barrier().ok());
}

TEST_CASE("Shared memory refuses bad arguments on every rank and keeps working", "[shm]") {
  MemoryStore store;
  REQUIRE(ConnectShm(store, 2, 2, Options("x")).status().code() ==
          absl::StatusCode::kInvalidArgument);
  Group shm = ConnectAll(store, 2, Options("args"));
  auto status = OnRanks(shm, [](Communicator& c) {
    std::vector<uint8_t> in(8, 1), out(8);
    absl::Status s = c.AllReduce(in.data(), out.data(), 8, DType::kBool, ReduceOp::kSum);
    if (s.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError(s.ToString());
    s = c.AllToAll(in.data(), in.data(), 4, DType::kU8);
    if (s.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError(s.ToString());
    std::vector<float> a(10, static_cast<float>(c.rank() + 1)), b(10);
    s = c.AllReduce(a.data(), b.data(), 10, DType::kF32, ReduceOp::kSum);
    if (!s.ok()) return s;
    return b[9] == 3.0f ? absl::OkStatus() : absl::InternalError("wrong sum");
  });
  for (const auto& s : status) {
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
}

TEST_CASE("Ranks that call different collectives fail, naming both, never mix", "[shm]") {
  MemoryStore store;
  Group shm = ConnectAll(store, 2, Options("mismatch", milliseconds(10000)));
  const auto start = Clock::now();
  auto status = OnRanks(shm, [](Communicator& c) {
    std::vector<float> a(24, 1.0f), b(48);
    if (c.rank() == 0) return c.AllGather(a.data(), b.data(), 24, DType::kF32);
    return c.AllReduce(a.data(), b.data(), 24, DType::kF32, ReduceOp::kMax);
  });
  CHECK(Clock::now() - start < milliseconds(5000));
  INFO(status[0].ToString() << "\n" << status[1].ToString());
  REQUIRE(status[0].code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE_THAT(std::string(status[0].message()),
               Catch::Contains("rank 0: AllGather of 24 f32 failed: rank 1 is in AllReduce of "
                               "24 f32 (max) at the same step"));
  REQUIRE(status[1].code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE_THAT(std::string(status[1].message()),
               Catch::Contains("rank 1: AllReduce of 24 f32 failed: rank 0 is in AllGather"));
}

TEST_CASE("A rank that never connects to shared memory is named within the timeout", "[shm]") {
  MemoryStore store;
  const auto start = Clock::now();
  auto connected = Connect(store, 3, {0, 1}, Options("late", milliseconds(1000)));
  CHECK(Clock::now() - start < milliseconds(4000));
  for (int r : {0, 1}) {
    const absl::Status& s = connected[static_cast<size_t>(r)].status();
    INFO(s.ToString());
    REQUIRE(s.code() == absl::StatusCode::kDeadlineExceeded);
    REQUIRE_THAT(std::string(s.message()), Catch::Contains(absl::StrCat("rank ", r, ": ")) &&
                                               Catch::Contains("not reached: rank(s) 2"));
  }
  REQUIRE(OwnSegments().empty());
}

TEST_CASE("A rank that cannot map rank 0's segment fails every rank alike", "[shm]") {
  // Rank 0 on "another machine": its record names a segment that is not here.
  MemoryStore store;
  REQUIRE(store.Set("remote/segment", "/tpc-0-not-here\n12345").ok());
  REQUIRE(store.Set("remote/opened/0", "").ok());
  auto connected = Connect(store, 3, {1, 2}, Options("remote", milliseconds(5000)));
  for (int r : {1, 2}) {
    const absl::Status& s = connected[static_cast<size_t>(r)].status();
    INFO(s.ToString());
    REQUIRE(s.code() == absl::StatusCode::kFailedPrecondition);
    REQUIRE_THAT(std::string(s.message()),
                 Catch::Contains(absl::StrCat("rank ", r,
                                              ": the ranks cannot share memory: "
                                              "rank 1 cannot map")) &&
                     Catch::Contains("not on rank 0's machine"));
  }
}

TEST_CASE("A rank that skips a shared-memory collective times the others out", "[shm]") {
  MemoryStore store;
  Group shm = ConnectAll(store, 3, Options("skip", milliseconds(1000)));
  const auto start = Clock::now();
  auto status = OnRanks(shm, [](Communicator& c) {
    if (c.rank() == 2) return absl::OkStatus();
    std::vector<float> a(100, 1.0f), b(100);
    return c.AllReduce(a.data(), b.data(), 100, DType::kF32, ReduceOp::kSum);
  });
  CHECK(Clock::now() - start < milliseconds(4000));
  for (int r : {0, 1}) {
    const absl::Status& s = status[static_cast<size_t>(r)];
    INFO(s.ToString());
    REQUIRE(!s.ok());
    REQUIRE_THAT(std::string(s.message()),
                 Catch::Contains(absl::StrCat("rank ", r, ": AllReduce of 100 f32 failed")));
  }
  // At least one timed out waiting for rank 2; the other may have stopped on its abort.
  const bool named = absl::StrContains(status[0].message(), "waiting for rank(s) 2") ||
                     absl::StrContains(status[1].message(), "waiting for rank(s) 2");
  REQUIRE(named);
  for (int r : {0, 1}) {
    const auto again_start = Clock::now();
    absl::Status again = shm[static_cast<size_t>(r)]->Barrier();
    CHECK(Clock::now() - again_start < milliseconds(500));
    REQUIRE(again == status[static_cast<size_t>(r)]);
  }
  // The rank that stayed out fails at once: the group is aborted.
  const auto late_start = Clock::now();
  absl::Status late = shm[2]->Barrier();
  INFO(late.ToString());
  REQUIRE(late.code() == absl::StatusCode::kAborted);
  CHECK(Clock::now() - late_start < milliseconds(500));
  REQUIRE_THAT(std::string(late.message()), Catch::Contains("rank 2: Barrier failed: rank "));
}

TEST_CASE("A rank that is gone is named at once, not at the timeout", "[shm]") {
  MemoryStore store;
  Group shm = ConnectAll(store, 3, Options("gone", milliseconds(20000)));
  // Its file descriptor closed, as when its process dies: its liveness lock is dropped.
  shm[1].reset();
  const auto start = Clock::now();
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int r : {0, 2}) {
    threads.emplace_back([&, r] {
      std::vector<double> a(10, 1.0), b(10);
      status[static_cast<size_t>(r)] = shm[static_cast<size_t>(r)]->AllReduce(
          a.data(), b.data(), 10, DType::kF64, ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(Clock::now() - start < milliseconds(2000));
  for (int r : {0, 2}) {
    const absl::Status& s = status[static_cast<size_t>(r)];
    INFO(s.ToString());
    REQUIRE(!s.ok());
    REQUIRE_THAT(std::string(s.message()), Catch::Contains("rank 1 is gone"));
  }
}

TEST_CASE("Shared-memory Abort writes the abort key and fails the peers promptly", "[shm]") {
  MemoryStore store;
  Group shm = ConnectAll(store, 3, Options("abort", milliseconds(10000)));
  const auto start = Clock::now();
  auto status = OnRanks(shm, [](Communicator& c) {
    if (c.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(200));
      c.Abort(absl::InternalError("kernel exploded"));
      return absl::OkStatus();
    }
    std::vector<double> a(1000, 1.0), b(1000);
    return c.AllReduce(a.data(), b.data(), 1000, DType::kF64, ReduceOp::kSum);
  });
  CHECK(Clock::now() - start < milliseconds(3000));
  auto key = store.Get(kAbortKey, milliseconds(0));
  REQUIRE(key.ok());
  REQUIRE(DescribeRankStatus(*key) == "rank 0 failed: kernel exploded");
  for (int r : {1, 2}) {
    const absl::Status& s = status[static_cast<size_t>(r)];
    INFO(s.ToString());
    REQUIRE(s.code() == absl::StatusCode::kAborted);
    REQUIRE(std::string(s.message()) ==
            absl::StrCat("rank ", r,
                         ": AllReduce of 1000 f64 failed: rank 0 failed: kernel "
                         "exploded"));
  }
  absl::Status after = shm[0]->Barrier();
  REQUIRE(after.code() == absl::StatusCode::kAborted);
  REQUIRE(std::string(after.message()) == "rank 0 failed: kernel exploded");
  shm[1]->Abort(absl::InternalError("later"));
  REQUIRE(DescribeRankStatus(*store.Get(kAbortKey, milliseconds(0))) ==
          "rank 0 failed: kernel exploded");
}

TEST_CASE("Shared-memory Abort from another thread ends this rank's own collective", "[shm]") {
  MemoryStore store;
  Group shm = ConnectAll(store, 2, Options("self", milliseconds(10000)));
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    shm[0]->Abort(absl::CancelledError("interrupted"));
  });
  const auto start = Clock::now();
  std::vector<float> a(64, 1.0f), b(64);
  absl::Status s = shm[0]->AllReduce(a.data(), b.data(), 64, DType::kF32, ReduceOp::kSum);
  aborter.join();
  CHECK(Clock::now() - start < milliseconds(3000));
  INFO(s.ToString());
  REQUIRE(s.code() == absl::StatusCode::kAborted);
  REQUIRE(std::string(s.message()) == "rank 0 failed: interrupted");
  absl::Status peer = shm[1]->Barrier();
  INFO(peer.ToString());
  REQUIRE(std::string(peer.message()) == "rank 1: Barrier failed: rank 0 failed: interrupted");
}

}  // namespace
}  // namespace tpc::runtime
