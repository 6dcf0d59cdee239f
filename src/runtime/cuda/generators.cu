// Launches of EyeLike and OneHot: one thread per output element in a grid-stride loop,
// writing y[i] only (EyeLike: the one's bits or zero; OneHot: values[hit], reading its
// index at (outer, inner) and the two values). Elements are moved as words of their size.
// Math in math/generators.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/generators.h"

namespace tpc::runtime::cuda {
namespace {

template <typename W>
__global__ void EyeLikeKernel(W one, int64_t cols, int64_t k, W* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) y[i] = math::EyeLikeOne(i, cols, k) ? one : W{0};
}

template <typename W, typename Index>
__global__ void OneHotKernel(const Index* indices, const W* values, int64_t depth, int64_t inner,
                             W* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    y[i] = values[math::OneHotHit(indices, depth, inner, i) ? 1 : 0];
  }
}

}  // namespace

cudaError_t LaunchEyeLike(int bytes, uint64_t one_bits, int64_t cols, int64_t k, void* y, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (cols < 1) return cudaErrorInvalidValue;
  return ByWord(bytes, [&](auto word) {
    using W = decltype(word);
    EyeLikeKernel<W><<<Blocks(n), kThreads, 0, stream>>>(static_cast<W>(one_bits), cols, k,
                                                         static_cast<W*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchOneHot(int bytes, const void* indices, bool indices_i64, const void* values,
                         int64_t depth, int64_t inner, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (depth < 1 || inner < 1) return cudaErrorInvalidValue;
  return ByWord(bytes, [&](auto word) {
    using W = decltype(word);
    if (indices_i64) {
      OneHotKernel<W, int64_t><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const int64_t*>(indices), static_cast<const W*>(values), depth, inner,
          static_cast<W*>(y), n);
    } else {
      OneHotKernel<W, int32_t><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const int32_t*>(indices), static_cast<const W*>(values), depth, inner,
          static_cast<W*>(y), n);
    }
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
