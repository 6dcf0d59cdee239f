// Launches of the convolution's im2col (one thread per element of the column matrix,
// elements moved by size: a float's zero is all zero bits in f32, f16 and bf16) and of the
// transposed convolution's col2im as a gather (one thread per output element, which reads
// only its own channel's column rows and writes only y[i]), and DeformConv's sampled columns
// (one thread per column element: its four bilinear neighbours in its own channel plane,
// each checked inside it), in grid-stride loops. The math is math/conv.h and
// math/deform_conv.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/deform_conv.h"

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

template <FloatKind K>
__global__ void Col2ImKernel(math::ConvGeometry g, const typename math::FloatIO<K>::Storage* col,
                             typename math::FloatIO<K>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::Col2ImElement<K>(g, col, y, i);
}

template <FloatKind K>
cudaError_t Col2Im(const math::ConvGeometry& g, int64_t channels, const void* col, void* y,
                   cudaStream_t stream) {
  using S = typename math::FloatIO<K>::Storage;
  const int64_t n = channels * g.in_size;
  Col2ImKernel<K>
      <<<Blocks(n), kThreads, 0, stream>>>(g, static_cast<const S*>(col), static_cast<S*>(y), n);
  return cudaGetLastError();
}

template <FloatKind K>
__global__ void DeformColKernel(math::DeformGeometry g, const typename math::FloatIO<K>::Storage* x,
                                const typename math::FloatIO<K>::Storage* offset,
                                const typename math::FloatIO<K>::Storage* mask,
                                typename math::FloatIO<K>::Storage* col, int64_t n) {
  using IO = math::FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    col[i] = IO::Store(static_cast<float>(math::DeformColElement(
        g, i, mask != nullptr, [&](int64_t j) { return static_cast<double>(IO::Load(x[j])); },
        [&](int64_t j) { return static_cast<double>(IO::Load(offset[j])); },
        [&](int64_t j) { return static_cast<double>(IO::Load(mask[j])); })));
  }
}

}  // namespace

cudaError_t LaunchDeformCol(FloatKind k, const math::DeformGeometry& g, const void* x,
                            const void* offset, const void* mask, void* col, cudaStream_t stream) {
  const int64_t n = g.c * g.taps() * g.plane();
  if (n == 0) return cudaSuccess;
  if (g.offset_group < 1 || g.c % g.offset_group != 0 || g.kw < 1 || g.ow < 1) {
    return cudaErrorInvalidValue;
  }
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename math::FloatIO<K>::Storage;
    DeformColKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
        g, static_cast<const S*>(x), static_cast<const S*>(offset), static_cast<const S*>(mask),
        static_cast<S*>(col), n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCol2Im(FloatKind k, const math::ConvGeometry& g, int64_t channels,
                         const void* col, void* y, cudaStream_t stream) {
  if (channels * g.in_size == 0) return cudaSuccess;
  for (int d = 0; d < g.spatial; ++d) {
    if (g.strides[d] < 1 || g.in[d] < 1 || g.kernel[d] < 1) return cudaErrorInvalidValue;
  }
  return ByKind(
      k, [&](auto kind) { return Col2Im<decltype(kind)::value>(g, channels, col, y, stream); });
}

cudaError_t LaunchIm2Col(int elem_bytes, const math::ConvGeometry& g, int64_t channels,
                         const void* x, void* col, cudaStream_t stream) {
  switch (elem_bytes) {
    case 2:
      return Im2Col<uint16_t>(g, channels, x, col, stream);
    case 4:
      return Im2Col<uint32_t>(g, channels, x, col, stream);
    case 8:  // the integer convolutions' f64 operands
      return Im2Col<uint64_t>(g, channels, x, col, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
