// The Gloo communicator against the in-process one: ranks are threads of this test, each
// with its own Gloo TCP device on 127.0.0.1, meeting through an in-memory store. Every
// collective, dtype and reduction must give the in-process communicator's bytes exactly
// (a run with processes equals a run with threads); a rank that never comes, a rank that
// never joins a collective and Abort must end in errors naming the ranks, never a hang.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "catch2/catch.hpp"
#include "tpc/runtime/gloo_communicator.h"
#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/util/half.h"

namespace tpc::runtime {
namespace {

using ir::DType;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The KeyValueStore of these tests: a map under a mutex, waiters on a condition variable.
class MemoryStore final : public KeyValueStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
    cv_.notify_all();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(const std::string& key, milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; })) {
      return absl::DeadlineExceededError(absl::StrCat("key '", key, "' not set"));
    }
    return values_[key];
  }

  absl::Status Wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto missing = [&] {
      std::vector<std::string> m;
      for (const std::string& k : keys) {
        if (values_.count(k) == 0) m.push_back(k);
      }
      return m;
    };
    if (!cv_.wait_for(lock, timeout, [&] { return missing().empty(); })) {
      return absl::DeadlineExceededError(
          absl::StrCat("keys not set: ", absl::StrJoin(missing(), ", ")));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    const int64_t value = (it == values_.end() ? 0 : std::stoll(it->second)) + delta;
    values_[key] = std::to_string(value);
    cv_.notify_all();
    return value;
  }

  absl::StatusOr<bool> Check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.count(key) > 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

using Group = std::vector<std::unique_ptr<Communicator>>;

GlooOptions Options(const std::string& prefix, milliseconds timeout = milliseconds(20000)) {
  GlooOptions options;
  options.address = "127.0.0.1";
  options.timeout = timeout;
  options.key_prefix = prefix;
  return options;
}

// ConnectGloo for the given ranks of a group of n, each on its own thread; rank r's
// result is element r (ranks not listed stay an error).
std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> Connect(KeyValueStore& store, int n,
                                                                   const std::vector<int>& ranks,
                                                                   const GlooOptions& options) {
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> out;
  for (int r = 0; r < n; ++r) out.push_back(absl::UnknownError("rank did not connect"));
  std::vector<std::thread> threads;
  for (int r : ranks) {
    threads.emplace_back(
        [&, r] { out[static_cast<size_t>(r)] = ConnectGloo(store, r, n, options); });
  }
  for (auto& t : threads) t.join();
  return out;
}

Group ConnectAll(KeyValueStore& store, int n, const GlooOptions& options) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  auto connected = Connect(store, n, ranks, options);
  Group group;
  for (auto& c : connected) {
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    group.push_back(std::move(*c));
  }
  return group;
}

// fn(comm) on every rank of `group`, each on its own thread.
template <typename F>
std::vector<absl::Status> OnRanks(Group& group, F fn) {
  std::vector<absl::Status> status(group.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] { status[r] = fn(*group[r]); });
  }
  for (auto& t : threads) t.join();
  return status;
}

// `count` random elements of `dtype`: floats in [-8, 8) (half types rounded from them),
// integers small enough that no sum of 4 overflows.
std::vector<uint8_t> Random(DType dtype, int64_t count, std::mt19937& rng) {
  // One spare byte: never an empty vector, whose data() may be null for in and out alike.
  std::vector<uint8_t> bytes(static_cast<size_t>(count * ir::DTypeSize(dtype)) + 1);
  std::uniform_real_distribution<float> real(-8.0f, 8.0f);
  std::uniform_int_distribution<int64_t> integer(-1000000000, 1000000000);
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* p = bytes.data() + i * ir::DTypeSize(dtype);
    switch (dtype) {
      case DType::kF32: {
        const float v = real(rng);
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::kF64: {
        const double v = static_cast<double>(real(rng)) / 3.0;
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::kF16:
      case DType::kBF16: {
        const uint16_t v =
            dtype == DType::kF16 ? FloatToHalf(real(rng)) : FloatToBFloat16(real(rng));
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::kI32: {
        const int32_t v = static_cast<int32_t>(integer(rng) / 4);
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::kI64: {
        const int64_t v = integer(rng) * 1000;
        std::memcpy(p, &v, sizeof v);
        break;
      }
      default:
        FAIL("no random data for " << ir::DTypeName(dtype));
    }
  }
  return bytes;
}

enum class Kind { kAllReduce, kReduceScatter, kAllGather, kAllToAll };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return "AllReduce";
    case Kind::kReduceScatter:
      return "ReduceScatter";
    case Kind::kAllGather:
      return "AllGather";
    default:
      return "AllToAll";
  }
}

// Elements per rank in and out of a collective of `count` over n ranks.
int64_t InCount(Kind k, int n, int64_t count) {
  return k == Kind::kReduceScatter || k == Kind::kAllToAll ? n * count : count;
}
int64_t OutCount(Kind k, int n, int64_t count) {
  return k == Kind::kAllGather || k == Kind::kAllToAll ? n * count : count;
}

absl::Status Call(Communicator& c, Kind k, const void* in, void* out, int64_t count, DType dtype,
                  ReduceOp op) {
  switch (k) {
    case Kind::kAllReduce:
      return c.AllReduce(in, out, count, dtype, op);
    case Kind::kReduceScatter:
      return c.ReduceScatter(in, out, count, dtype, op);
    case Kind::kAllGather:
      return c.AllGather(in, out, count, dtype);
    default:
      return c.AllToAll(in, out, count, dtype);
  }
}

// Runs one collective on both groups with the same random inputs and requires
// bit-identical outputs on every rank. `in_place`: AllReduce with in == out on Gloo.
void CheckSame(Group& gloo, Group& threads, Kind kind, DType dtype, ReduceOp op, int64_t count,
               std::mt19937& rng, bool in_place = false) {
  const int n = static_cast<int>(gloo.size());
  const size_t es = static_cast<size_t>(ir::DTypeSize(dtype));
  std::vector<std::vector<uint8_t>> in, want, got;
  for (int r = 0; r < n; ++r) {
    in.push_back(Random(dtype, InCount(kind, n, count), rng));
    // The same filler in both, so that an element neither writes compares equal but
    // one only the reference writes does not.
    want.emplace_back(static_cast<size_t>(OutCount(kind, n, count)) * es + 1, uint8_t{0xA5});
    got.push_back(in_place ? in.back() : want.back());
    got.back().back() = want.back().back();
  }
  auto ref = OnRanks(threads, [&](Communicator& c) {
    const size_t r = static_cast<size_t>(c.rank());
    return Call(c, kind, in[r].data(), want[r].data(), count, dtype, op);
  });
  auto res = OnRanks(gloo, [&](Communicator& c) {
    const size_t r = static_cast<size_t>(c.rank());
    const void* src = in_place ? got[r].data() : in[r].data();
    return Call(c, kind, src, got[r].data(), count, dtype, op);
  });
  for (int r = 0; r < n; ++r) {
    INFO(KindName(kind) << " of " << count << " " << ir::DTypeName(dtype) << " op "
                        << ReduceOpName(op) << " n=" << n << " rank " << r
                        << (in_place ? " in place" : ""));
    INFO("reference: " << ref[static_cast<size_t>(r)].ToString());
    INFO("gloo: " << res[static_cast<size_t>(r)].ToString());
    REQUIRE(ref[static_cast<size_t>(r)].ok());
    REQUIRE(res[static_cast<size_t>(r)].ok());
    // Bytes, not values: f16 sums must round alike, NaN-free data aside.
    REQUIRE(got[static_cast<size_t>(r)] == want[static_cast<size_t>(r)]);
  }
}

const DType kDTypes[] = {DType::kF32,  DType::kF64, DType::kF16,
                         DType::kBF16, DType::kI32, DType::kI64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};

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
