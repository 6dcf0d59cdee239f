// Launch of MatMulNBits' dequantization: one thread per weight element (n, k) in a
// grid-stride loop, writing w[n · K + k]; the arithmetic is math/nbits.h's. The GEMM that
// follows is cuBLAS's (matmul_ops.cc).
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

constexpr int kThreads = 256;

template <FloatKind K>
__global__ void DequantKernel(math::NBitsLayout l, const uint8_t* b,
                              const typename FloatIO<K>::Storage* scales, const uint8_t* zp_packed,
                              const typename FloatIO<K>::Storage* zp_float,
                              typename FloatIO<K>::Storage* w) {
  using IO = FloatIO<K>;
  const int64_t total = l.n * l.k;
  const int64_t blocks = l.blocks();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / l.k, k = i - n * l.k;
    const int64_t at = n * blocks + k / l.block_size;
    const float zp = zp_float != nullptr ? IO::Load(zp_float[at]) : 0.0f;
    w[i] = IO::Store(
        math::NBitsWeight(l, b, n, k, IO::Load(scales[at]), zp_packed, zp_float != nullptr, zp));
  }
}

template <FloatKind K>
cudaError_t Dequant(const math::NBitsLayout& l, const uint8_t* b, const void* scales,
                    const uint8_t* zp_packed, const void* zp_float, void* w, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t total = l.n * l.k;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  DequantKernel<K><<<static_cast<unsigned>(blocks > 65536 ? 65536 : blocks), kThreads, 0, stream>>>(
      l, b, static_cast<const S*>(scales), zp_packed, static_cast<const S*>(zp_float),
      static_cast<S*>(w));
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchDequantNBits(FloatKind k, const math::NBitsLayout& l, const uint8_t* b,
                               const void* scales, const uint8_t* zp_packed, const void* zp_float,
                               void* w, cudaStream_t stream) {
  if (l.n * l.k == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return Dequant<decltype(kind)::value>(l, b, scales, zp_packed, zp_float, w, stream);
  });
}

}  // namespace tpc::runtime::cuda
