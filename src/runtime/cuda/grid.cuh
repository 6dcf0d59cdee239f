// The grid of the element-wise CUDA launches: kThreads threads a block, enough blocks to
// cover n elements (at most 65536: the kernels' grid-stride loops cover the rest), 64-bit
// indices; the dispatch over float kinds and element sizes. Internal to the .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "tpc/runtime/math/floats.h"

namespace tpc::runtime::cuda {

constexpr int kThreads = 256;

inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

// A thread's first element, and the stride of its loop.
__device__ inline int64_t First() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t Step() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The one switch over the float kinds of a launch: calls f(kind) with kind a
// std::integral_constant naming k, so that `decltype(kind)::value` instantiates the kernel.
template <typename F>
cudaError_t ByKind(math::FloatKind k, F&& f) {
  switch (k) {
    case math::FloatKind::kF32:
      return f(std::integral_constant<math::FloatKind, math::FloatKind::kF32>{});
    case math::FloatKind::kF16:
      return f(std::integral_constant<math::FloatKind, math::FloatKind::kF16>{});
    case math::FloatKind::kBF16:
      return f(std::integral_constant<math::FloatKind, math::FloatKind::kBF16>{});
  }
  return cudaErrorInvalidValue;
}

// The one switch over element sizes of the launches that move elements as words: calls
// f(W{}) with W the unsigned word of `bytes` bytes (1, 2, 4 or 8).
template <typename F>
cudaError_t ByWord(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
