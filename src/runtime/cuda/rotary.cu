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

// M-RoPE's token-by-token caches: one thread per element e of [tokens, half], writing
// only cos_out[e] and sin_out[e] from the cache row its stream's position names
// (math::MRopeCacheRow), checked against the caches' rows (a bad one sets the flag).
template <FloatKind K, typename P>
__global__ void MRopeCachesKernel(math::MRopeSections s, const P* positions,
                                  const typename FloatIO<K>::Storage* cos,
                                  const typename FloatIO<K>::Storage* sin, int64_t cache_rows,
                                  float scale, typename FloatIO<K>::Storage* cos_out,
                                  typename FloatIO<K>::Storage* sin_out, int64_t tokens,
                                  int64_t half, int* flag, int code) {
  using IO = FloatIO<K>;
  const int64_t n = tokens * half;
  for (int64_t e = First(); e < n; e += Step()) {
    const int64_t row = math::MRopeCacheRow(s, positions, tokens, half, e);
    if (row < 0 || row >= cache_rows) {
      atomicCAS(flag, 0, code);
      cos_out[e] = sin_out[e] = IO::Store(0.0f);
      continue;
    }
    const int64_t at = row * half + e % half;
    cos_out[e] = IO::Store(scale * IO::Load(cos[at]));
    sin_out[e] = IO::Store(scale * IO::Load(sin[at]));
  }
}

}  // namespace

cudaError_t LaunchMRopeCaches(FloatKind k, const math::MRopeSections& s, const void* positions,
                              bool positions_i64, const void* cos, const void* sin,
                              int64_t cache_rows, float scale, void* cos_out, void* sin_out,
                              int64_t tokens, int64_t half, int* flag, int code,
                              cudaStream_t stream) {
  const int64_t n = tokens * half;
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    auto launch = [&](auto* p) {
      using P = std::remove_const_t<std::remove_pointer_t<decltype(p)>>;
      MRopeCachesKernel<K, P><<<Blocks(n), kThreads, 0, stream>>>(
          s, p, static_cast<const S*>(cos), static_cast<const S*>(sin), cache_rows, scale,
          static_cast<S*>(cos_out), static_cast<S*>(sin_out), tokens, half, flag, code);
      return cudaGetLastError();
    };
    return positions_i64 ? launch(static_cast<const int64_t*>(positions))
                         : launch(static_cast<const int32_t*>(positions));
  });
}

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
