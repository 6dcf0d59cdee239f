// Launches of DFT and STFT: one thread per output bin j in a grid-stride loop; it reads
// only its own line or frame of x (and the window) and writes y[2j] and y[2j + 1] (the
// real and imaginary parts). Twiddles and sums in double. Math in math/spectral.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/spectral.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void DftKernel(math::DftLayout l, const typename FloatIO<K>::Storage* x,
                          typename FloatIO<K>::Storage* y, int64_t bins) {
  using IO = FloatIO<K>;
  for (int64_t j = First(); j < bins; j += Step()) {
    const math::ComplexD v =
        math::DftOutputBin(l, j, [&](int64_t t) { return static_cast<double>(IO::Load(x[t])); });
    y[2 * j] = IO::Store(static_cast<float>(v.re));
    y[2 * j + 1] = IO::Store(static_cast<float>(v.im));
  }
}

template <FloatKind K>
__global__ void StftKernel(math::StftLayout l, const typename FloatIO<K>::Storage* x,
                           const typename FloatIO<K>::Storage* window,
                           typename FloatIO<K>::Storage* y, int64_t bins) {
  using IO = FloatIO<K>;
  for (int64_t j = First(); j < bins; j += Step()) {
    const math::ComplexD v = math::StftOutputBin(
        l, j, [&](int64_t t) { return static_cast<double>(IO::Load(x[t])); },
        [&](int64_t t) {
          return window != nullptr ? static_cast<double>(IO::Load(window[t])) : 1.0;
        });
    y[2 * j] = IO::Store(static_cast<float>(v.re));
    y[2 * j + 1] = IO::Store(static_cast<float>(v.im));
  }
}

}  // namespace

cudaError_t LaunchDft(FloatKind k, const math::DftLayout& l, const void* x, void* y, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (l.n < 1 || l.bins < 1 || l.inner < 1 || (l.comps != 1 && l.comps != 2)) {
    return cudaErrorInvalidValue;
  }
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    // n elements are n / 2 complex bins, a thread each.
    DftKernel<K><<<Blocks(n / 2), kThreads, 0, stream>>>(l, static_cast<const S*>(x),
                                                         static_cast<S*>(y), n / 2);
    return cudaGetLastError();
  });
}

cudaError_t LaunchStft(FloatKind k, const math::StftLayout& l, const void* x, const void* window,
                       void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (l.frame < 1 || l.bins < 1 || l.frames < 1 || (l.comps != 1 && l.comps != 2)) {
    return cudaErrorInvalidValue;
  }
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    StftKernel<K><<<Blocks(n / 2), kThreads, 0, stream>>>(
        l, static_cast<const S*>(x), static_cast<const S*>(window), static_cast<S*>(y), n / 2);
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
