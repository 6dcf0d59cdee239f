// Launch of the convolution's im2col: one thread per element of the column matrix in a
// grid-stride loop, elements moved by size (a float's zero is all zero bits in f32, f16
// and bf16). The math is math/conv.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/conv.h"

namespace tpc::runtime::cuda {
namespace {

template <typename Word>
__global__ void Im2ColKernel(math::ConvGeometry g, const Word* x, Word* col, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    math::Im2ColElement(g, x, col, i);
  }
}

template <typename Word>
cudaError_t Im2Col(const math::ConvGeometry& g, int64_t channels, const void* x, void* col,
                   cudaStream_t stream) {
  const int64_t n = channels * g.taps * g.outs;
  if (n == 0) return cudaSuccess;
  Im2ColKernel<Word><<<Blocks(n), kThreads, 0, stream>>>(g, static_cast<const Word*>(x),
                                                         static_cast<Word*>(col), n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchIm2Col(int elem_bytes, const math::ConvGeometry& g, int64_t channels,
                         const void* x, void* col, cudaStream_t stream) {
  switch (elem_bytes) {
    case 2:
      return Im2Col<uint16_t>(g, channels, x, col, stream);
    case 4:
      return Im2Col<uint32_t>(g, channels, x, col, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
