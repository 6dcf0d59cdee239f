// Launch of RotaryEmbedding (ONNX opset 23 and onnxruntime's): one thread per element of
// the output in a grid-stride loop, writing only y[i] and reading its head row of x (the
// partner element d ± half or d ± 1 stays inside the row: 2 · half ≤ hd is checked by the
// caller) and its cache row, checked against the caches' rows (a bad position sets the
// backend's check flag). y is not x. The math is math/rotary.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K, typename P>
__global__ void RotaryEmbeddingKernel(math::RotaryLayout l, const typename FloatIO<K>::Storage* x,
                                      const P* positions, const typename FloatIO<K>::Storage* cos,
                                      const typename FloatIO<K>::Storage* sin,
                                      typename FloatIO<K>::Storage* y, int64_t n, int* flag,
                                      int code) {
  for (int64_t i = First(); i < n; i += Step()) {
    if (!math::RotaryEmbeddingElement<K>(l, x, positions, cos, sin, y, i)) {
      atomicCAS(flag, 0, code);
    }
  }
}

template <FloatKind K, typename P>
cudaError_t Rotary(const math::RotaryLayout& l, const void* x, const void* positions,
                   const void* cos, const void* sin, void* y, int64_t n, int* flag, int code,
                   cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  RotaryEmbeddingKernel<K, P><<<Blocks(n), kThreads, 0, stream>>>(
      l, static_cast<const S*>(x), static_cast<const P*>(positions), static_cast<const S*>(cos),
      static_cast<const S*>(sin), static_cast<S*>(y), n, flag, code);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t RotaryOfKind(const math::RotaryLayout& l, const void* x, const void* positions,
                         bool positions_i64, const void* cos, const void* sin, void* y, int64_t n,
                         int* flag, int code, cudaStream_t stream) {
  return positions_i64 ? Rotary<K, int64_t>(l, x, positions, cos, sin, y, n, flag, code, stream)
                       : Rotary<K, int32_t>(l, x, positions, cos, sin, y, n, flag, code, stream);
}

}  // namespace

cudaError_t LaunchRotaryEmbedding(FloatKind k, const math::RotaryLayout& l, const void* x,
                                  const void* positions, bool positions_i64, const void* cos,
                                  const void* sin, void* y, int64_t n, int* flag, int code,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return RotaryOfKind<decltype(kind)::value>(l, x, positions, positions_i64, cos, sin, y, n, flag,
                                               code, stream);
  });
}

}  // namespace tpc::runtime::cuda
