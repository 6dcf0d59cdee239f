// Launch of one axis pass of Resize: one thread per output element in a grid-stride loop;
// each computes its coordinate's taps (math::ResizeAxisElement, in double as the CPU) and
// reads only its own line [outer, ·, inner] of x, writing only y[i]. Passes read and write
// the input's kind or f32 (between passes).
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/resize.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind In, FloatKind Out>
__global__ void ResizeAxisKernel(math::ResizeOptions opt, math::ResizeAxisGeometry a, int64_t inner,
                                 const typename FloatIO<In>::Storage* x,
                                 typename FloatIO<Out>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    const double v = math::ResizeAxisElement(opt, a, inner, i, [&](int64_t at) {
      return static_cast<double>(FloatIO<In>::Load(x[at]));
    });
    y[i] = FloatIO<Out>::Store(static_cast<float>(v));
  }
}

template <FloatKind In, FloatKind Out>
cudaError_t ResizeAxis(const math::ResizeOptions& opt, const math::ResizeAxisGeometry& a,
                       int64_t inner, const void* x, void* y, int64_t n, cudaStream_t stream) {
  ResizeAxisKernel<In, Out><<<Blocks(n), kThreads, 0, stream>>>(
      opt, a, inner, static_cast<const typename FloatIO<In>::Storage*>(x),
      static_cast<typename FloatIO<Out>::Storage*>(y), n);
  return cudaGetLastError();
}

template <FloatKind In>
cudaError_t ResizeAxisTo(FloatKind out, const math::ResizeOptions& opt,
                         const math::ResizeAxisGeometry& a, int64_t inner, const void* x, void* y,
                         int64_t n, cudaStream_t stream) {
  switch (out) {
    case FloatKind::kF32:
      return ResizeAxis<In, FloatKind::kF32>(opt, a, inner, x, y, n, stream);
    case FloatKind::kF16:
      return ResizeAxis<In, FloatKind::kF16>(opt, a, inner, x, y, n, stream);
    case FloatKind::kBF16:
      return ResizeAxis<In, FloatKind::kBF16>(opt, a, inner, x, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchResizeAxis(FloatKind in, FloatKind out, const math::ResizeOptions& opt,
                             const math::ResizeAxisGeometry& a, int64_t outer, int64_t inner,
                             const void* x, void* y, cudaStream_t stream) {
  const int64_t n = outer * a.out * inner;
  if (n == 0) return cudaSuccess;
  if (a.in < 1 || inner < 1) return cudaErrorInvalidValue;
  switch (in) {
    case FloatKind::kF32:
      return ResizeAxisTo<FloatKind::kF32>(out, opt, a, inner, x, y, n, stream);
    case FloatKind::kF16:
      return ResizeAxisTo<FloatKind::kF16>(out, opt, a, inner, x, y, n, stream);
    case FloatKind::kBF16:
      return ResizeAxisTo<FloatKind::kBF16>(out, opt, a, inner, x, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
