// Helpers of the device-math tests: random inputs, a relative comparison, and the folds
// of a thread block and of a warp.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime::testing {

// f32 values uniform in [-2, 2), reproducible by seed.
inline Tensor Random(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Tensor t = Tensor::Allocate(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(g);
  return t;
}

// |got - want| <= tol · (1 + |want|) element by element (equal infinities and NaN against
// NaN pass).
inline void RequireClose(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1.0f + std::abs(want[i])));
  }
}

// A row kernel's statistics as a block of `threads` threads gathers them: each thread
// folds every threads-th element, then the partial results combine pairwise.
template <typename T, typename Fold, typename Combine>
T BlockFold(int64_t len, int threads, T init, Fold fold, Combine combine) {
  std::vector<T> part(static_cast<size_t>(threads), init);
  for (int t = 0; t < threads; ++t) {
    for (int64_t j = t; j < len; j += threads)
      part[static_cast<size_t>(t)] = fold(part[static_cast<size_t>(t)], j);
  }
  for (int s = threads / 2; s > 0; s >>= 1) {
    for (int t = 0; t < s; ++t) {
      part[static_cast<size_t>(t)] =
          combine(part[static_cast<size_t>(t)], part[static_cast<size_t>(t + s)]);
    }
  }
  return part[0];
}

// The same fold as one warp's lanes do it: lane l folds elements l, l + 32, ..., then
// xor shuffles combine lanes (each lane combining its value with lane l ^ off's).
template <typename T, typename Fold, typename Combine>
T WarpFold(int64_t len, T init, Fold fold, Combine combine) {
  std::vector<T> lane(32, init);
  for (int l = 0; l < 32; ++l) {
    for (int64_t j = l; j < len; j += 32)
      lane[static_cast<size_t>(l)] = fold(lane[static_cast<size_t>(l)], j);
  }
  for (int off = 16; off > 0; off >>= 1) {
    std::vector<T> next(lane);
    for (int l = 0; l < 32; ++l) {
      next[static_cast<size_t>(l)] =
          combine(lane[static_cast<size_t>(l)], lane[static_cast<size_t>(l ^ off)]);
    }
    lane = next;
  }
  return lane[0];
}

}  // namespace tpc::runtime::testing
