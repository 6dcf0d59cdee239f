// The Gloo communicator against the in-process one: ranks are threads of this test, each
// with its own Gloo TCP device on 127.0.0.1, meeting through an in-memory store. Every
// collective, dtype and reduction must give the in-process communicator's bytes exactly
// (a run with processes equals a run with threads); a rank that never comes, a rank that
// never joins a collective and Abort must end in errors naming the ranks, never a hang.
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "comm_test_util.h"
#include "tpc/runtime/gloo_communicator.h"
#include "tpc/runtime/inprocess_communicator.h"

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

GlooOptions Options(const std::string& prefix, milliseconds timeout = milliseconds(20000)) {
  GlooOptions options;
  options.address = "127.0.0.1";
  options.timeout = timeout;
  options.key_prefix = prefix;
  return options;
}

// ConnectGloo for the given ranks of a group of n, each on its own thread.
std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> Connect(KeyValueStore& store, int n,
                                                                   const std::vector<int>& ranks,
                                                                   const GlooOptions& options) {
  return comm_test::ConnectRanks(n, ranks,
                                 [&](int r) { return ConnectGloo(store, r, n, options); });
}

Group ConnectAll(KeyValueStore& store, int n, const GlooOptions& options) {
  return comm_test::ConnectGroup(n, [&](int r) { return ConnectGloo(store, r, n, options); });
}

TEST_CASE("Gloo collectives equal the in-process communicator's bit for bit", "[gloo]") {
  MemoryStore store;  // one store, one prefix per group
  std::mt19937 rng(20240518);
  for (int n : {2, 3, 4}) {
    Group gloo = ConnectAll(store, n, Options(absl::StrCat("group", n)));
    Group threads = MakeInProcessGroup(n, std::chrono::seconds(20));
    for (DType dtype : kDTypes) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{1000}}) {
        for (ReduceOp op : kOps) {
          CheckSame(gloo, threads, Kind::kAllReduce, dtype, op, count, rng);
          CheckSame(gloo, threads, Kind::kReduceScatter, dtype, op, count, rng);
        }
        CheckSame(gloo, threads, Kind::kAllGather, dtype, ReduceOp::kSum, count, rng);
        CheckSame(gloo, threads, Kind::kAllToAll, dtype, ReduceOp::kSum, count, rng);
      }
      for (const auto& s : OnRanks(gloo, [](Communicator& c) { return c.Barrier(); })) {
        REQUIRE(s.ok());
      }
    }
    // Large buffers (an odd count, so the AllReduce chunks differ by one element): one
    // reduction per dtype family and the two plain movers.
    const int64_t big = (int64_t{1} << 20) + 3;
    CheckSame(gloo, threads, Kind::kAllReduce, DType::kF32, ReduceOp::kSum, big, rng);
    CheckSame(gloo, threads, Kind::kAllReduce, DType::kBF16, ReduceOp::kAvg, big, rng);
    CheckSame(gloo, threads, Kind::kReduceScatter, DType::kF16, ReduceOp::kSum, big, rng);
    CheckSame(gloo, threads, Kind::kAllReduce, DType::kI32, ReduceOp::kMin, big, rng);
    CheckSame(gloo, threads, Kind::kAllGather, DType::kF64, ReduceOp::kSum, big, rng);
    CheckSame(gloo, threads, Kind::kAllToAll, DType::kI64, ReduceOp::kSum, big, rng);
    // In place, count above, below and at n.
    for (int64_t count : {int64_t{1}, int64_t{n}, int64_t{1001}, big}) {
      CheckSame(gloo, threads, Kind::kAllReduce, DType::kF32, ReduceOp::kSum, count, rng, true);
    }
    CheckSame(gloo, threads, Kind::kAllReduce, DType::kF16, ReduceOp::kAvg, 77, rng, true);
  }
}

TEST_CASE("Gloo AllGather takes its input in place", "[gloo]") {
  MemoryStore store;
  Group gloo = ConnectAll(store, 3, Options("g"));
  auto status = OnRanks(gloo, [](Communicator& c) {
    std::vector<int32_t> buf(3 * 5, -1);
    for (int i = 0; i < 5; ++i) buf[static_cast<size_t>(c.rank() * 5 + i)] = c.rank() * 10 + i;
    absl::Status s = c.AllGather(buf.data() + c.rank() * 5, buf.data(), 5, DType::kI32);
    if (!s.ok()) return s;
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < 5; ++i) {
        if (buf[static_cast<size_t>(r * 5 + i)] != r * 10 + i) {
          return absl::InternalError(absl::StrCat("element ", r * 5 + i, " wrong"));
        }
      }
    }
    return absl::OkStatus();
  });
  for (const auto& s : status) REQUIRE(s.ok());
}

TEST_CASE("A Gloo group of one copies", "[gloo]") {
  MemoryStore store;
  Group gloo = ConnectAll(store, 1, Options("single"));
  Communicator& c = *gloo[0];
  std::vector<float> in = {1.5f, -2.0f, 3.25f}, out(3);
  REQUIRE(c.AllReduce(in.data(), out.data(), 3, DType::kF32, ReduceOp::kSum).ok());
  REQUIRE(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  REQUIRE(c.AllGather(in.data(), out.data(), 3, DType::kF32).ok());
  REQUIRE(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  REQUIRE(c.ReduceScatter(in.data(), out.data(), 3, DType::kF32, ReduceOp::kAvg).ok());
  REQUIRE(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  REQUIRE(c.AllToAll(in.data(), out.data(), 3, DType::kF32).ok());
  REQUIRE(out == in);
  REQUIRE(c.Barrier().ok());
}

TEST_CASE("Gloo refuses bad arguments on every rank and keeps working", "[gloo]") {
  MemoryStore store;
  REQUIRE(ConnectGloo(store, 2, 2, Options("x")).status().code() ==
          absl::StatusCode::kInvalidArgument);
  GlooOptions no_address = Options("x");
  no_address.address.clear();
  REQUIRE(ConnectGloo(store, 0, 2, no_address).status().code() ==
          absl::StatusCode::kInvalidArgument);

  Group gloo = ConnectAll(store, 2, Options("args"));
  auto status = OnRanks(gloo, [](Communicator& c) {
    std::vector<uint8_t> in(8, 1), out(8);
    absl::Status s = c.AllReduce(in.data(), out.data(), 8, DType::kBool, ReduceOp::kSum);
    if (s.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError(s.ToString());
    s = c.AllToAll(in.data(), in.data(), 4, DType::kU8);
    if (s.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError(s.ToString());
    // Nothing was sent: the group is in step.
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

TEST_CASE("A rank that never connects fails the others within the timeout, named", "[gloo]") {
  MemoryStore store;
  const auto start = Clock::now();
  auto connected = Connect(store, 3, {0, 1}, Options("late", milliseconds(1000)));
  const auto elapsed = Clock::now() - start;
  CHECK(elapsed < milliseconds(4000));
  for (int r : {0, 1}) {
    const absl::Status& s = connected[static_cast<size_t>(r)].status();
    INFO(s.ToString());
    REQUIRE(s.code() == absl::StatusCode::kDeadlineExceeded);
    REQUIRE_THAT(std::string(s.message()), Catch::Contains(absl::StrCat("rank ", r, ": ")) &&
                                               Catch::Contains("not reached: rank(s) 2"));
  }
}

TEST_CASE("A rank that skips a collective times the others out, they stay broken", "[gloo]") {
  MemoryStore store;
  Group gloo = ConnectAll(store, 3, Options("skip", milliseconds(1000)));
  const auto start = Clock::now();
  auto status = OnRanks(gloo, [](Communicator& c) {
    if (c.rank() == 2) return absl::OkStatus();
    std::vector<float> a(100, 1.0f), b(100);
    return c.AllReduce(a.data(), b.data(), 100, DType::kF32, ReduceOp::kSum);
  });
  CHECK(Clock::now() - start < milliseconds(4000));
  bool deadline = false;
  for (int r : {0, 1}) {
    const absl::Status& s = status[static_cast<size_t>(r)];
    INFO(s.ToString());
    REQUIRE(!s.ok());
    REQUIRE_THAT(std::string(s.message()),
                 Catch::Contains(absl::StrCat("rank ", r, ": AllReduce of 100 f32 failed")));
    deadline = deadline || s.code() == absl::StatusCode::kDeadlineExceeded;
  }
  REQUIRE(deadline);
  // Broken: the same error, at once.
  for (int r : {0, 1}) {
    const auto again_start = Clock::now();
    absl::Status again = gloo[static_cast<size_t>(r)]->Barrier();
    CHECK(Clock::now() - again_start < milliseconds(500));
    REQUIRE(again == status[static_cast<size_t>(r)]);
  }
  // The rank that stayed out fails too. Promptly when its device thread has seen the
  // peers close first; when it has not, Gloo leaves a send it queued to a closed peer
  // unfailed (tcp::Pair::signalException skips unbound sends in its queue), and only
  // the timeout ends it.
  const auto late_start = Clock::now();
  std::vector<float> a(100, 1.0f), b(100);
  absl::Status late = gloo[2]->AllReduce(a.data(), b.data(), 100, DType::kF32, ReduceOp::kSum);
  INFO(late.ToString());
  REQUIRE(!late.ok());
  CHECK(Clock::now() - late_start < milliseconds(3000));
  REQUIRE_THAT(std::string(late.message()), Catch::Contains("rank 2: AllReduce"));
}

TEST_CASE("Abort writes the store's abort key and fails the peers promptly", "[gloo]") {
  MemoryStore store;
  Group gloo = ConnectAll(store, 3, Options("abort", milliseconds(10000)));
  const auto start = Clock::now();
  auto status = OnRanks(gloo, [](Communicator& c) {
    if (c.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(200));
      c.Abort(absl::InternalError("kernel exploded"));
      return absl::OkStatus();
    }
    std::vector<double> a(1000, 1.0), b(1000);
    return c.AllReduce(a.data(), b.data(), 1000, DType::kF64, ReduceOp::kSum);
  });
  CHECK(Clock::now() - start < milliseconds(5000));  // not the 10 s timeout
  auto key = store.Get(kAbortKey, milliseconds(0));
  REQUIRE(key.ok());
  REQUIRE(tpc::runtime::DescribeRankStatus(*key) == "rank 0 failed: kernel exploded");
  for (int r : {1, 2}) {
    const absl::Status& s = status[static_cast<size_t>(r)];
    INFO(s.ToString());
    REQUIRE(!s.ok());
    REQUIRE_THAT(std::string(s.message()),
                 Catch::Contains(absl::StrCat("rank ", r, ": AllReduce of 1000 f64 failed")) &&
                     Catch::Contains("rank 0 failed: kernel exploded"));
  }
  absl::Status after = gloo[0]->Barrier();
  REQUIRE(after.code() == absl::StatusCode::kAborted);
  REQUIRE(std::string(after.message()) == "rank 0 failed: kernel exploded");
  // A second Abort keeps the first reason, in the store too.
  gloo[1]->Abort(absl::InternalError("later"));
  REQUIRE(tpc::runtime::DescribeRankStatus(*store.Get(kAbortKey, milliseconds(0))) ==
          "rank 0 failed: kernel exploded");
}

TEST_CASE("Abort from another thread ends this rank's own collective", "[gloo]") {
  MemoryStore store;
  Group gloo = ConnectAll(store, 2, Options("self", milliseconds(10000)));
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    gloo[0]->Abort(absl::CancelledError("interrupted"));
  });
  const auto start = Clock::now();
  std::vector<float> a(64, 1.0f), b(64);
  // Rank 1 never joins: only Abort can end this before the timeout.
  absl::Status s = gloo[0]->AllReduce(a.data(), b.data(), 64, DType::kF32, ReduceOp::kSum);
  aborter.join();
  CHECK(Clock::now() - start < milliseconds(5000));
  INFO(s.ToString());
  REQUIRE(s.code() == absl::StatusCode::kAborted);
  REQUIRE(std::string(s.message()) == "rank 0 failed: interrupted");
  // The peer learns at its next collective, with the reason from the store.
  absl::Status peer = gloo[1]->Barrier();
  INFO(peer.ToString());
  REQUIRE(!peer.ok());
  REQUIRE_THAT(std::string(peer.message()), Catch::Contains("rank 1: Barrier failed") &&
                                                Catch::Contains("rank 0 failed: interrupted"));
}

}  // namespace
}  // namespace tpc::runtime
