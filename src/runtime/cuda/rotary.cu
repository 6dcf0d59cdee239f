// Launch of RotaryEmbedding (ONNX opset 23 and onnxruntime's): one thread per element of
// the output in a grid-stride loop, writing only y[i] and reading its head row of x (the
// partner element d ± half or d ± 1 stays inside the row: 2 · half ≤ hd is checked by the
// caller) and its cache row, checked against the caches' rows (a bad position sets the
// backend's check flag). y is not x. The math is math/rotary.h.
#include <cuda_runtime.h>

#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

constexpr int kThreads = 256;

template <FloatKind K, typename P>
__global__ void RotaryEmbeddingKernel(math::RotaryLayout l, const typename FloatIO<K>::Storage* x,
                                      const P* positions, const typename FloatIO<K>::Storage* cos,
                                      const typename FloatIO<K>::Storage* sin,
                                      typename FloatIO<K>::Storage* y, int64_t n, int* flag,
                                      int code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
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
  const int64_t b = (n + kThreads - 1) / kThreads;
  RotaryEmbeddingKernel<K, P>
      <<<static_cast<unsigned>(b > 65536 ? 65536 : b), kThreads, 0, stream>>>(
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
  switch (k) {
    case FloatKind::kF32:
      return RotaryOfKind<FloatKind::kF32>(l, x, positions, positions_i64, cos, sin, y, n, flag,
                                           code, stream);
    case FloatKind::kF16:
      return RotaryOfKind<FloatKind::kF16>(l, x, positions, positions_i64, cos, sin, y, n, flag,
                                           code, stream);
    case FloatKind::kBF16:
      return RotaryOfKind<FloatKind::kBF16>(l, x, positions, positions_i64, cos, sin, y, n, flag,
                                            code, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
