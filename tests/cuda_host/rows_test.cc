// The row kernels (rows.cu: a block or a warp per row, statistics combined through shared
// memory or shuffles) run as written, against double references, in both thread orders.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "check.h"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = u(rng);
  return v;
}

using cuda_host::InBothOrders;

// Element j of row r of [outer, len, inner].
int64_t At(const RowLayout& rl, int64_t r, int64_t j) { return rl.Start(r) + j * rl.stride(); }

TEST_CASE("Softmax and LogSoftmax of strided rows, a block a row", "[cuda_host][rows]") {
  for (const RowLayout rl : {RowLayout{3, 700, 1}, RowLayout{2, 37, 3}}) {
    for (const bool log : {false, true}) {
      CAPTURE(rl.outer, rl.len, rl.inner, log);
      const std::vector<float> x = Random(rl.outer * rl.len * rl.inner, 1);
      const auto y = InBothOrders([&] {
        std::vector<float> out(x.size(), NAN);
        REQUIRE_LAUNCH(LaunchSoftmax(FloatKind::kF32, x.data(), out.data(), rl, log, nullptr));
        return out;
      });
      for (int64_t r = 0; r < rl.rows(); ++r) {
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < rl.len; ++j) max = std::max<double>(max, x[At(rl, r, j)]);
        for (int64_t j = 0; j < rl.len; ++j) sum += std::exp(x[At(rl, r, j)] - max);
        for (int64_t j = 0; j < rl.len; ++j) {
          const double want =
              log ? x[At(rl, r, j)] - max - std::log(sum) : std::exp(x[At(rl, r, j)] - max) / sum;
          CHECK(std::abs(y[At(rl, r, j)] - want) <= 1e-5 + 1e-5 * std::abs(want));
        }
      }
    }
  }
}

TEST_CASE("The attention softmax: a warp a row up to 1024 keys, a block a row past them",
          "[cuda_host][rows]") {
  // 7 rows: the second block's last warp has no row and returns as a whole.
  for (const int64_t len : {int64_t{20}, int64_t{100}, int64_t{1500}}) {
    CAPTURE(len);
    const int64_t rows = 7;
    const std::vector<float> scores = Random(rows * len, 2);
    const std::vector<float> mask = Random(len, 3, -2.0f, 0.0f);  // one row for all
    StridedView mask_rows;
    mask_rows.rank = 1, mask_rows.dims[0] = rows, mask_rows.strides[0] = 0;
    const float divisor = 1.7f;
    const auto p = InBothOrders([&] {
      std::vector<float> out(scores.size(), NAN);
      REQUIRE_LAUNCH(LaunchAttentionSoftmax(FloatKind::kF32, scores.data(), out.data(), rows, len,
                                            divisor, mask.data(), mask_rows, 0, 1, nullptr));
      return out;
    });
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> s(static_cast<size_t>(len));
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        s[j] = scores[r * len + j] / double{divisor} + mask[j];
        max = std::max(max, s[j]);
      }
      for (double& v : s) sum += (v = std::exp(v - max));
      for (int64_t j = 0; j < len; ++j) CHECK(std::abs(p[r * len + j] - s[j] / sum) <= 1e-6);
    }
  }
}

TEST_CASE("LayerNormalization and RMS norm rows, with their statistics", "[cuda_host][rows]") {
  const int64_t rows = 3, len = 300;
  const std::vector<float> x = Random(rows * len, 4, 1.0f, 5.0f);  // a mean far from 0
  const std::vector<float> scale = Random(len, 5), bias = Random(len, 6);
  for (const bool rms : {false, true}) {
    CAPTURE(rms);
    const auto got = InBothOrders([&] {
      std::vector<float> y(x.size(), NAN), mean(rows, NAN), inv(rows, NAN);
      REQUIRE_LAUNCH(LaunchNorm(FloatKind::kF32, x.data(), scale.data(),
                                rms ? nullptr : bias.data(), y.data(), mean.data(), inv.data(),
                                rows, len, 1e-5f, rms, nullptr));
      y.insert(y.end(), mean.begin(), mean.end());
      y.insert(y.end(), inv.begin(), inv.end());
      return y;
    });
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, sq = 0;
      for (int64_t j = 0; j < len; ++j) mean += x[r * len + j];
      mean = rms ? 0.0 : mean / len;
      for (int64_t j = 0; j < len; ++j) sq += (x[r * len + j] - mean) * (x[r * len + j] - mean);
      const double inv = 1.0 / std::sqrt(sq / len + 1e-5);
      CHECK(std::abs(got[x.size() + r] - mean) <= 1e-5 * (1 + std::abs(mean)));
      CHECK(std::abs(got[x.size() + rows + r] - inv) <= 1e-5 * inv);
      for (int64_t j = 0; j < len; ++j) {
        const double want = (x[r * len + j] - mean) * inv * scale[j] + (rms ? 0.0 : bias[j]);
        CHECK(std::abs(got[r * len + j] - want) <= 1e-4 * (1 + std::abs(want)));
      }
    }
  }
}

TEST_CASE("Reductions, ArgMax/ArgMin, Hardmax and TopK of strided rows", "[cuda_host][rows]") {
  const RowLayout rl{2, 301, 2};
  std::vector<float> x = Random(rl.outer * rl.len * rl.inner, 7);
  x[At(rl, 1, 5)] = x[At(rl, 1, 250)] = 9.0f;  // a tie for the maximum of row 1
  const auto sums = InBothOrders([&] {
    std::vector<float> y(rl.rows() * 3, NAN);
    REQUIRE_LAUNCH(
        LaunchReduce(FloatKind::kF32, math::ReduceKind::kSum, x.data(), y.data(), rl, nullptr));
    REQUIRE_LAUNCH(LaunchReduce(FloatKind::kF32, math::ReduceKind::kMax, x.data(),
                                y.data() + rl.rows(), rl, nullptr));
    REQUIRE_LAUNCH(LaunchReduce(FloatKind::kF32, math::ReduceKind::kL2, x.data(),
                                y.data() + 2 * rl.rows(), rl, nullptr));
    return y;
  });
  const auto args = InBothOrders([&] {
    std::vector<int64_t> y(rl.rows() * 3, -1);
    REQUIRE_LAUNCH(LaunchArgReduce(FloatKind::kF32, x.data(), y.data(), rl, true, false, nullptr));
    REQUIRE_LAUNCH(
        LaunchArgReduce(FloatKind::kF32, x.data(), y.data() + rl.rows(), rl, true, true, nullptr));
    REQUIRE_LAUNCH(LaunchArgReduce(FloatKind::kF32, x.data(), y.data() + 2 * rl.rows(), rl, false,
                                   false, nullptr));
    return y;
  });
  const auto hard = InBothOrders([&] {
    std::vector<float> y(x.size(), NAN);
    REQUIRE_LAUNCH(LaunchHardmax(FloatKind::kF32, x.data(), y.data(), rl, nullptr));
    return y;
  });
  const int64_t top = 4;
  const auto topk = InBothOrders([&] {
    std::vector<float> values(rl.outer * top * rl.inner, NAN);
    std::vector<int64_t> indices(values.size(), -1);
    REQUIRE_LAUNCH(LaunchTopK(FloatKind::kF32, x.data(), values.data(), indices.data(), rl, top,
                              true, nullptr));
    return std::make_pair(values, indices);
  });
  for (int64_t r = 0; r < rl.rows(); ++r) {
    CAPTURE(r);
    std::vector<int64_t> order(static_cast<size_t>(rl.len));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return x[At(rl, r, a)] > x[At(rl, r, b)]; });
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < rl.len; ++j) {
      sum += x[At(rl, r, j)];
      sq += double{x[At(rl, r, j)]} * x[At(rl, r, j)];
    }
    CHECK(std::abs(sums[r] - sum) <= 1e-3);
    CHECK(sums[rl.rows() + r] == x[At(rl, r, order[0])]);
    CHECK(std::abs(sums[2 * rl.rows() + r] - std::sqrt(sq)) <= 1e-4 * std::sqrt(sq));
    int64_t last_max = order[0];
    for (int64_t j = 0; j < rl.len; ++j)
      if (x[At(rl, r, j)] == x[At(rl, r, order[0])]) last_max = j;
    CHECK(args[r] == order[0]);  // the first of a tie
    CHECK(args[rl.rows() + r] == last_max);
    CHECK(args[2 * rl.rows() + r] == order.back());
    for (int64_t j = 0; j < rl.len; ++j) CHECK(hard[At(rl, r, j)] == (j == order[0] ? 1.0f : 0.0f));
    const int64_t out0 = (r / rl.inner) * top * rl.inner + r % rl.inner;
    for (int64_t i = 0; i < top; ++i) {
      CHECK(topk.second[out0 + i * rl.inner] == order[i]);
      CHECK(topk.first[out0 + i * rl.inner] == x[At(rl, r, order[i])]);
    }
  }
}

TEST_CASE("The negative log-likelihood: per target, summed and weighted mean, bad labels flagged",
          "[cuda_host][rows]") {
  math::NllLayout l;
  l.n = 3, l.c = 5, l.inner = 130;  // 390 targets: more than the block's 256 threads
  l.has_ignore = true, l.ignore = 2;
  const std::vector<float> logp = Random(l.n * l.c * l.inner, 8, -4.0f, 0.0f);
  const std::vector<float> weight = Random(l.c, 9, 0.5f, 2.0f);
  std::vector<int64_t> labels(static_cast<size_t>(l.targets()));
  for (size_t t = 0; t < labels.size(); ++t) labels[t] = static_cast<int64_t>((t * 7) % 5);
  double loss = 0, wsum = 0;
  std::vector<double> each(labels.size(), 0.0);
  for (int64_t t = 0; t < l.targets(); ++t) {
    if (labels[t] == l.ignore) continue;
    const int64_t b = t / l.inner, i = t % l.inner;
    each[t] = -double{weight[labels[t]]} * logp[(b * l.c + labels[t]) * l.inner + i];
    loss += each[t];
    wsum += weight[labels[t]];
  }
  for (const int reduction : {0, 1, 2}) {
    CAPTURE(reduction);
    const auto out = InBothOrders([&] {
      std::vector<float> y(reduction == 0 ? labels.size() : 1, NAN);
      int flag = 0;
      REQUIRE_LAUNCH(LaunchNllLoss(FloatKind::kF32, logp.data(), labels.data(), true, weight.data(),
                                   l, reduction, y.data(), &flag, 7, nullptr));
      CHECK(flag == 0);
      return y;
    });
    if (reduction == 0) {
      for (size_t t = 0; t < each.size(); ++t) CHECK(std::abs(out[t] - each[t]) <= 1e-6);
    } else {
      const double want = reduction == 1 ? loss : loss / wsum;
      CHECK(std::abs(out[0] - want) <= 1e-6 * std::abs(want));
    }
  }
  labels[200] = 5;  // out of range: flagged with the launch's code, by either kernel
  for (const int reduction : {0, 1}) {
    std::vector<float> y(labels.size(), NAN);
    int flag = 0;
    REQUIRE_LAUNCH(LaunchNllLoss(FloatKind::kF32, logp.data(), labels.data(), true, weight.data(),
                                 l, reduction, y.data(), &flag, 7, nullptr));
    CHECK(flag == 7);
  }
}

}  // namespace
}  // namespace tpc::runtime::cuda
