// Launches of GridSample and AffineGrid: one thread per output element in a grid-stride
// loop. A GridSample thread reads its point's r coordinates from the grid and the taps of
// its own plane of X (every tap index resolved into [0, size) or dropped as a zero of the
// padding, math::GridResolveIndex); an AffineGrid thread reads one row of its image's
// theta. Each writes y[i]. Math (in double) in math/grid_sample.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void GridSampleKernel(math::GridSampleGeometry g, const typename FloatIO<K>::Storage* x,
                                 const typename FloatIO<K>::Storage* grid,
                                 typename FloatIO<K>::Storage* y, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    y[i] = IO::Store(static_cast<float>(math::GridSampleElement(
        g, i, [&](int64_t j) { return static_cast<double>(IO::Load(x[j])); },
        [&](int64_t j) { return static_cast<double>(IO::Load(grid[j])); })));
  }
}

template <FloatKind K>
__global__ void AffineGridKernel(int r, AffineDims dims, bool align_corners,
                                 const typename FloatIO<K>::Storage* theta,
                                 typename FloatIO<K>::Storage* grid, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    grid[i] = IO::Store(static_cast<float>(math::AffineGridElement(
        r, dims.dims, dims.points, align_corners, i,
        [&](int64_t j) { return static_cast<double>(IO::Load(theta[j])); })));
  }
}

}  // namespace

cudaError_t LaunchGridSample(FloatKind k, const math::GridSampleGeometry& g, const void* x,
                             const void* grid, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (g.spatial < 1 || g.spatial > math::kMaxSpatial || g.out_points < 1 || g.channels < 1) {
    return cudaErrorInvalidValue;
  }
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    GridSampleKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
        g, static_cast<const S*>(x), static_cast<const S*>(grid), static_cast<S*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchAffineGrid(FloatKind k, int r, const AffineDims& dims, bool align_corners,
                             const void* theta, void* grid, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if ((r != 2 && r != 3) || dims.points < 1) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    AffineGridKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
        r, dims, align_corners, static_cast<const S*>(theta), static_cast<S*>(grid), n);
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
