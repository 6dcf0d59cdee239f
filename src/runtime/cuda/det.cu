// Launch of Det: one thread per matrix in a grid-stride loop; thread k copies its m × m
// matrix into its own slice of the f64 scratch (k · m² onwards), eliminates it there
// (math::LuDeterminant) and writes y[k].
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/det.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void DetKernel(const typename FloatIO<K>::Storage* x, double* scratch, int64_t m,
                          typename FloatIO<K>::Storage* y, int64_t count) {
  using IO = FloatIO<K>;
  const int64_t mm = m * m;
  for (int64_t k = First(); k < count; k += Step()) {
    double* a = scratch + k * mm;
    for (int64_t i = 0; i < mm; ++i) a[i] = static_cast<double>(IO::Load(x[k * mm + i]));
    y[k] = IO::Store(static_cast<float>(math::LuDeterminant(a, m)));
  }
}

}  // namespace

cudaError_t LaunchDet(FloatKind k, const void* x, double* scratch, int64_t m, void* y,
                      int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    DetKernel<K><<<Blocks(count), kThreads, 0, stream>>>(static_cast<const S*>(x), scratch, m,
                                                         static_cast<S*>(y), count);
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
