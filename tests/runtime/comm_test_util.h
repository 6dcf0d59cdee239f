// What the communicator tests share: an in-memory KeyValueStore, random buffers of every
// reducible dtype, and the check that a communicator's collectives give the in-process
// communicator's bytes exactly (a run with processes equals a run with threads).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "catch2/catch.hpp"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/kv_store.h"
#include "tpc/util/half.h"

namespace tpc::runtime::comm_test {

using ir::DType;
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

// connect(r) for the given ranks of a group of n, each on its own thread; rank r's result
// is element r (ranks not listed stay an error).
template <typename Connect>
std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> ConnectRanks(
    int n, const std::vector<int>& ranks, Connect connect) {
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> out;
  for (int r = 0; r < n; ++r) out.push_back(absl::UnknownError("rank did not connect"));
  std::vector<std::thread> threads;
  for (int r : ranks) threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = connect(r); });
  for (auto& t : threads) t.join();
  return out;
}

// Every rank of a group of n through connect(r), which must succeed.
template <typename Connect>
Group ConnectGroup(int n, Connect connect) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  Group group;
  for (auto& c : ConnectRanks(n, ranks, connect)) {
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
// integers small enough that no sum of 4 overflows. `exact`: floats that are multiples of
// 1/4, so that sums and averages of up to 4 are exact in every float type, whatever the
// order of the additions and however often they round (NCCL's rings and trees add in
// orders of their own).
inline std::vector<uint8_t> Random(DType dtype, int64_t count, std::mt19937& rng,
                                   bool exact = false) {
  // One spare byte: never an empty vector, whose data() may be null for in and out alike.
  std::vector<uint8_t> bytes(static_cast<size_t>(count * ir::DTypeSize(dtype)) + 1);
  std::uniform_real_distribution<float> real(-8.0f, 8.0f);
  std::uniform_int_distribution<int64_t> integer(-1000000000, 1000000000);
  std::uniform_int_distribution<int> quarters(-32, 31);
  auto draw = [&] { return exact ? static_cast<float>(quarters(rng)) / 4.0f : real(rng); };
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* p = bytes.data() + i * ir::DTypeSize(dtype);
    switch (dtype) {
      case DType::kF32: {
        const float v = draw();
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::kF64: {
        const double v = exact ? static_cast<double>(draw()) : static_cast<double>(real(rng)) / 3.0;
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::kF16:
      case DType::kBF16: {
        const uint16_t v = dtype == DType::kF16 ? FloatToHalf(draw()) : FloatToBFloat16(draw());
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

inline const char* KindName(Kind k) {
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
inline int64_t InCount(Kind k, int n, int64_t count) {
  return k == Kind::kReduceScatter || k == Kind::kAllToAll ? n * count : count;
}
inline int64_t OutCount(Kind k, int n, int64_t count) {
  return k == Kind::kAllGather || k == Kind::kAllToAll ? n * count : count;
}

inline absl::Status Call(Communicator& c, Kind k, const void* in, void* out, int64_t count,
                         DType dtype, ReduceOp op) {
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
// bit-identical outputs on every rank. `in_place`: AllReduce with in == out on `tested`.
// `exact`: inputs whose float sums do not depend on the order of the additions (Random).
inline void CheckSame(Group& tested, Group& threads, Kind kind, DType dtype, ReduceOp op,
                      int64_t count, std::mt19937& rng, bool in_place = false, bool exact = false) {
  const int n = static_cast<int>(tested.size());
  const size_t es = static_cast<size_t>(ir::DTypeSize(dtype));
  std::vector<std::vector<uint8_t>> in, want, got;
  for (int r = 0; r < n; ++r) {
    in.push_back(Random(dtype, InCount(kind, n, count), rng, exact));
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
  auto res = OnRanks(tested, [&](Communicator& c) {
    const size_t r = static_cast<size_t>(c.rank());
    const void* src = in_place ? got[r].data() : in[r].data();
    return Call(c, kind, src, got[r].data(), count, dtype, op);
  });
  for (int r = 0; r < n; ++r) {
    INFO(KindName(kind) << " of " << count << " " << ir::DTypeName(dtype) << " op "
                        << ReduceOpName(op) << " n=" << n << " rank " << r
                        << (in_place ? " in place" : ""));
    INFO("reference: " << ref[static_cast<size_t>(r)].ToString());
    INFO("tested: " << res[static_cast<size_t>(r)].ToString());
    REQUIRE(ref[static_cast<size_t>(r)].ok());
    REQUIRE(res[static_cast<size_t>(r)].ok());
    // Bytes, not values: f16 sums must round alike, NaN-free data aside. The first
    // differing byte, not the buffers (megabytes would swamp the report).
    const std::vector<uint8_t>& g = got[static_cast<size_t>(r)];
    const std::vector<uint8_t>& w = want[static_cast<size_t>(r)];
    REQUIRE(g.size() == w.size());
    const size_t first =
        static_cast<size_t>(std::mismatch(g.begin(), g.end(), w.begin()).first - g.begin());
    INFO("first differing byte " << first << " of " << g.size() << " (element " << first / es
                                 << ")");
    REQUIRE(first == g.size());
  }
}

inline const DType kDTypes[] = {DType::kF32,  DType::kF64, DType::kF16,
                                DType::kBF16, DType::kI32, DType::kI64};
inline const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};

}  // namespace tpc::runtime::comm_test
