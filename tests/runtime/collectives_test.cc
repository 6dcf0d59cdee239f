#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/inprocess_communicator.h"

namespace tpc::runtime {
namespace {

using ir::DType;

// Runs fn(comm) on every rank of a group of n, each on its own thread.
template <typename F>
std::vector<absl::Status> OnRanks(int n, F fn,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto group = MakeInProcessGroup(n, timeout);
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back(
        [&, r] { status[static_cast<size_t>(r)] = fn(*group[static_cast<size_t>(r)]); });
  }
  for (auto& t : threads) t.join();
  return status;
}

// Rank r's value i: distinct per rank and element, not exactly representable sums.
float Value(int r, int64_t i) {
  return 0.1f * static_cast<float>(r + 1) + 0.37f * static_cast<float>(i % 7) - 1.3f;
}

TEST_CASE("AllReduce sum/max/min/avg match a rank-ordered reduction", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    const int64_t count = 37;
    std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(count));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
      auto status = OnRanks(n, [&](Communicator& c) {
        std::vector<float> in(count);
        for (int64_t i = 0; i < count; ++i) in[static_cast<size_t>(i)] = Value(c.rank(), i);
        return c.AllReduce(in.data(), out[static_cast<size_t>(c.rank())].data(), count, DType::kF32,
                           op);
      });
      for (const auto& s : status) REQUIRE(s.ok());
      for (int64_t i = 0; i < count; ++i) {
        float want = Value(0, i);
        for (int r = 1; r < n; ++r) {
          const float v = Value(r, i);
          want = op == ReduceOp::kMax   ? std::max(want, v)
                 : op == ReduceOp::kMin ? std::min(want, v)
                                        : want + v;
        }
        if (op == ReduceOp::kAvg) want /= static_cast<float>(n);
        for (int r = 0; r < n; ++r) {
          INFO("n=" << n << " op=" << ReduceOpName(op) << " rank " << r << " element " << i);
          // Bit-identical: the same order on every rank.
          REQUIRE(out[static_cast<size_t>(r)][static_cast<size_t>(i)] == want);
        }
      }
    }
  }
}

TEST_CASE("AllReduce works in place and on integers", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    std::vector<std::vector<int64_t>> buf(static_cast<size_t>(n), std::vector<int64_t>(10));
    auto status = OnRanks(n, [&](Communicator& c) {
      auto& b = buf[static_cast<size_t>(c.rank())];
      for (int64_t i = 0; i < 10; ++i) b[static_cast<size_t>(i)] = c.rank() * 100 + i;
      return c.AllReduce(b.data(), b.data(), 10, DType::kI64, ReduceOp::kSum);
    });
    for (const auto& s : status) REQUIRE(s.ok());
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < 10; ++i)
        REQUIRE(buf[static_cast<size_t>(r)][static_cast<size_t>(i)] ==
                100 * n * (n - 1) / 2 + n * i);
    }
  }
}

TEST_CASE("AllGather concatenates in rank order", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    const int64_t count = 5;
    std::vector<std::vector<float>> out(static_cast<size_t>(n),
                                        std::vector<float>(static_cast<size_t>(n * count)));
    auto status = OnRanks(n, [&](Communicator& c) {
      std::vector<float> in(count);
      for (int64_t i = 0; i < count; ++i) in[static_cast<size_t>(i)] = Value(c.rank(), i);
      return c.AllGather(in.data(), out[static_cast<size_t>(c.rank())].data(), count, DType::kF32);
    });
    for (const auto& s : status) REQUIRE(s.ok());
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < n; ++k) {
        for (int64_t i = 0; i < count; ++i)
          REQUIRE(out[static_cast<size_t>(r)][static_cast<size_t>(k * count + i)] == Value(k, i));
      }
    }
  }
}

TEST_CASE("ReduceScatter gives rank r the r-th block of the sum", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    const int64_t count = 6;
    std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(count));
    auto status = OnRanks(n, [&](Communicator& c) {
      std::vector<float> in(static_cast<size_t>(n * count));
      for (int64_t i = 0; i < n * count; ++i) in[static_cast<size_t>(i)] = Value(c.rank(), i);
      return c.ReduceScatter(in.data(), out[static_cast<size_t>(c.rank())].data(), count,
                             DType::kF32, ReduceOp::kSum);
    });
    for (const auto& s : status) REQUIRE(s.ok());
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < count; ++i) {
        float want = Value(0, r * count + i);
        for (int k = 1; k < n; ++k) want += Value(k, r * count + i);
        REQUIRE(out[static_cast<size_t>(r)][static_cast<size_t>(i)] == want);
      }
    }
  }
}

TEST_CASE("AllToAll sends block j to rank j", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    const int64_t count = 3;
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(n),
                                          std::vector<int32_t>(static_cast<size_t>(n * count)));
    auto status = OnRanks(n, [&](Communicator& c) {
      std::vector<int32_t> in(static_cast<size_t>(n * count));
      // Element i of block j on rank r: r*1000 + j*10 + i.
      for (int j = 0; j < n; ++j) {
        for (int64_t i = 0; i < count; ++i)
          in[static_cast<size_t>(j * count + i)] =
              static_cast<int32_t>(c.rank() * 1000 + j * 10 + i);
      }
      return c.AllToAll(in.data(), out[static_cast<size_t>(c.rank())].data(), count, DType::kI32);
    });
    for (const auto& s : status) REQUIRE(s.ok());
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < n; ++k) {
        for (int64_t i = 0; i < count; ++i) {
          REQUIRE(out[static_cast<size_t>(r)][static_cast<size_t>(k * count + i)] ==
                  k * 1000 + r * 10 + i);
        }
      }
    }
  }
}

TEST_CASE("Barrier and repeated collectives keep ranks in step", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    auto status = OnRanks(n, [&](Communicator& c) -> absl::Status {
      for (int iter = 0; iter < 50; ++iter) {
        float v = static_cast<float>(c.rank() + iter), s = 0;
        if (auto st = c.AllReduce(&v, &s, 1, DType::kF32, ReduceOp::kSum); !st.ok()) return st;
        if (s != static_cast<float>(n * iter + n * (n - 1) / 2))
          return absl::InternalError("wrong sum");
        if (auto st = c.Barrier(); !st.ok()) return st;
      }
      return absl::OkStatus();
    });
    for (const auto& s : status) REQUIRE(s.ok());
  }
}

TEST_CASE("A failing rank stops the others with an error naming it", "[runtime][collectives]") {
  const auto start = std::chrono::steady_clock::now();
  auto status = OnRanks(4, [&](Communicator& c) -> absl::Status {
    if (c.rank() == 2) {
      c.Abort(absl::InvalidArgumentError("kernel exploded"));
      return absl::InvalidArgumentError("kernel exploded");
    }
    float v = 1, s = 0;
    return c.AllReduce(&v, &s, 1, DType::kF32, ReduceOp::kSum);
  });
  for (int r : {0, 1, 3}) {
    REQUIRE(status[static_cast<size_t>(r)].code() == absl::StatusCode::kAborted);
    REQUIRE_THAT(std::string(status[static_cast<size_t>(r)].message()),
                 Catch::Contains("rank 2 failed: kernel exploded"));
  }
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("A rank that never arrives times out the others", "[runtime][collectives]") {
  auto status = OnRanks(
      3,
      [&](Communicator& c) -> absl::Status {
        if (c.rank() == 1) return absl::OkStatus();  // skips the collective
        float v = 1, s = 0;
        return c.AllReduce(&v, &s, 1, DType::kF32, ReduceOp::kSum);
      },
      std::chrono::milliseconds(200));
  REQUIRE(status[0].code() == absl::StatusCode::kAborted);
  REQUIRE_THAT(std::string(status[0].message()), Catch::Contains("waiting for rank(s) 1"));
  REQUIRE(status[2].code() == absl::StatusCode::kAborted);
}

TEST_CASE("Mismatched collectives are an error, not a hang", "[runtime][collectives]") {
  auto status = OnRanks(2, [&](Communicator& c) -> absl::Status {
    std::vector<float> v(4), out(8);
    if (c.rank() == 0) return c.AllGather(v.data(), out.data(), 4, DType::kF32);
    return c.AllReduce(v.data(), out.data(), 4, DType::kF32, ReduceOp::kSum);
  });
  REQUIRE_FALSE(status[0].ok());
  REQUIRE_FALSE(status[1].ok());
  REQUIRE_THAT(std::string(status[0].message()) + std::string(status[1].message()),
               Catch::Contains("mismatch"));
}

}  // namespace
}  // namespace tpc::runtime
