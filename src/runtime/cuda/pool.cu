// Launch of the windowed pools: one thread per output element (over every plane) in a
// grid-stride loop; each reads only its own plane's window (math/pool.h) and writes only
// y[i] and index[i].
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/pool.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void PoolKernel(math::ConvGeometry g, math::PoolParams pp,
                           const typename FloatIO<K>::Storage* x, typename FloatIO<K>::Storage* y,
                           int64_t* index, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::PoolElement<K>(g, pp, x, y, index, i);
}

template <FloatKind K>
cudaError_t Pool(const math::ConvGeometry& g, const math::PoolParams& pp, const void* x, void* y,
                 int64_t* index, int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  PoolKernel<K><<<Blocks(n), kThreads, 0, stream>>>(g, pp, static_cast<const S*>(x),
                                                    static_cast<S*>(y), index, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPool(FloatKind k, const math::ConvGeometry& g, const math::PoolParams& pp,
                       int64_t planes, const void* x, void* y, int64_t* index,
                       cudaStream_t stream) {
  const int64_t n = planes * g.outs;
  if (n == 0) return cudaSuccess;
  return ByKind(
      k, [&](auto kind) { return Pool<decltype(kind)::value>(g, pp, x, y, index, n, stream); });
}

}  // namespace tpc::runtime::cuda
