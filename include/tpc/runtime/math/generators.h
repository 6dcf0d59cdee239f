// Element math of the operators that make a tensor from a pattern: EyeLike's diagonal and
// OneHot's hits, shared by the CPU kernels (cpu/generators.cc) and the CUDA ones
// (cuda/generators.cu).
#pragma once

#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// Whether element i of a [rows, cols] EyeLike output lies on diagonal k (a one).
TPC_HOST_DEVICE inline bool EyeLikeOne(int64_t i, int64_t cols, int64_t k) {
  const int64_t row = i / cols;
  return i - row * cols - row == k;
}

// Whether element i of a OneHot output [outer, depth, inner] is a hit: the index at
// (outer, inner) (negative: from the end of depth) names its position along depth.
template <typename Index>
TPC_HOST_DEVICE inline bool OneHotHit(const Index* indices, int64_t depth, int64_t inner,
                                      int64_t i) {
  const int64_t in = i % inner, d = (i / inner) % depth, o = i / (inner * depth);
  auto v = static_cast<int64_t>(indices[o * inner + in]);
  if (v < 0) v += depth;
  return v == d;
}

}  // namespace tpc::runtime::math
