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
  return ByKind(out, [&](auto kind) {
    return ResizeAxis<In, decltype(kind)::value>(opt, a, inner, x, y, n, stream);
  });
}

}  // namespace

cudaError_t LaunchResizeAxis(FloatKind in, FloatKind out, const math::ResizeOptions& opt,
                             const math::ResizeAxisGeometry& a, int64_t outer, int64_t inner,
                             const void* x, void* y, cudaStream_t stream) {
  const int64_t n = outer * a.out * inner;
  if (n == 0) return cudaSuccess;
  if (a.in < 1 || inner < 1) return cudaErrorInvalidValue;
  return ByKind(in, [&](auto kind) {
    return ResizeAxisTo<decltype(kind)::value>(out, opt, a, inner, x, y, n, stream);
  });
}

}  // namespace tpc::runtime::cuda
