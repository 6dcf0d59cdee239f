// Launches of GatedRMSNorm and LpNormalization (math/vector_norms.h): one thread per group
// (GatedRMSNorm: C consecutive elements of x and gate, C of scale) or per line
// (LpNormalization: count elements `inner` apart from o · count · inner + i), in a
// grid-stride loop; each thread reads and writes only its own group's or line's elements.
// Groups and lines are short (a head: 64 to 256 elements), so a thread each is enough.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/vector_norms.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void GatedRmsNormKernel(const typename FloatIO<K>::Storage* x,
                                   const typename FloatIO<K>::Storage* scale,
                                   const typename FloatIO<K>::Storage* gate,
                                   typename FloatIO<K>::Storage* y, int64_t groups, int64_t c,
                                   float epsilon, bool silu) {
  using IO = FloatIO<K>;
  auto load = [](const typename IO::Storage* p) {
    return [p](int64_t i) { return IO::Load(p[i]); };
  };
  auto store = [y](int64_t i, float f) { y[i] = IO::Store(f); };
  for (int64_t g = First(); g < groups; g += Step()) {
    math::GatedRmsNormGroup(load(x), load(scale), load(gate), c, epsilon, silu, store, g);
  }
}

template <FloatKind K>
__global__ void LpNormalizeKernel(const typename FloatIO<K>::Storage* x,
                                  typename FloatIO<K>::Storage* y, int64_t lines, int64_t count,
                                  int64_t inner, int p) {
  using IO = FloatIO<K>;
  auto load = [x](int64_t i) { return IO::Load(x[i]); };
  auto store = [y](int64_t i, float f) { y[i] = IO::Store(f); };
  for (int64_t line = First(); line < lines; line += Step()) {
    const int64_t start = (line / inner) * count * inner + line % inner;
    math::LpNormalizeLine(load, start, count, inner, p, store);
  }
}

}  // namespace

cudaError_t LaunchGatedRmsNorm(FloatKind k, const void* x, const void* scale, const void* gate,
                               void* y, int64_t groups, int64_t c, float epsilon, bool silu,
                               cudaStream_t stream) {
  if (groups == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    GatedRmsNormKernel<K><<<Blocks(groups), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const S*>(scale), static_cast<const S*>(gate),
        static_cast<S*>(y), groups, c, epsilon, silu);
    return cudaGetLastError();
  });
}

cudaError_t LaunchLpNormalize(FloatKind k, const void* x, void* y, int64_t lines, int64_t count,
                              int64_t inner, int p, cudaStream_t stream) {
  if (lines == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    LpNormalizeKernel<K><<<Blocks(lines), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<S*>(y), lines, count, inner, p);
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
