// Launch of RoiAlign: one thread per output cell (region, channel, ph, pw) in a grid-stride
// loop. It reads its region's four coordinates and batch index (out of [0, N): no read, the
// check flag set, the run fails naming the node), then the bilinear samples of its bin in
// its own channel plane (corner offsets clamped into the plane, math::RoiAlignSample), and
// writes y[i]. Math in math/roi_align.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/roi_align.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K, typename Index>
__global__ void RoiAlignKernel(math::RoiAlignParams p, const typename FloatIO<K>::Storage* x,
                               int64_t images, const typename FloatIO<K>::Storage* rois,
                               const Index* batch, typename FloatIO<K>::Storage* y, int64_t n,
                               int* flag, int code) {
  using IO = FloatIO<K>;
  const int64_t cells = p.out_h * p.out_w, plane = p.height * p.width;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t cell = i % cells, c = (i / cells) % p.channels, r = i / (cells * p.channels);
    const auto b = static_cast<int64_t>(batch[r]);
    if (b < 0 || b >= images) {
      atomicCAS(flag, 0, code);
      y[i] = IO::Store(0.0f);
      continue;
    }
    double roi[4];
    for (int q = 0; q < 4; ++q) roi[q] = static_cast<double>(IO::Load(rois[r * 4 + q]));
    const math::RoiBins bins = math::RoiAlignBins(p, roi);
    const typename IO::Storage* xp = x + (b * p.channels + c) * plane;
    y[i] = IO::Store(static_cast<float>(
        math::RoiAlignCell(p, bins, cell / p.out_w, cell % p.out_w,
                           [&](int64_t at) { return static_cast<double>(IO::Load(xp[at])); })));
  }
}

}  // namespace

cudaError_t LaunchRoiAlign(FloatKind k, const math::RoiAlignParams& p, const void* x,
                           int64_t images, const void* rois, const void* batch, bool batch_i64,
                           void* y, int64_t n, int* flag, int code, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (p.height < 1 || p.width < 1 || p.out_h < 1 || p.out_w < 1 || p.channels < 1) {
    return cudaErrorInvalidValue;
  }
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    if (batch_i64) {
      RoiAlignKernel<K, int64_t><<<Blocks(n), kThreads, 0, stream>>>(
          p, static_cast<const S*>(x), images, static_cast<const S*>(rois),
          static_cast<const int64_t*>(batch), static_cast<S*>(y), n, flag, code);
    } else {
      RoiAlignKernel<K, int32_t><<<Blocks(n), kThreads, 0, stream>>>(
          p, static_cast<const S*>(x), images, static_cast<const S*>(rois),
          static_cast<const int32_t*>(batch), static_cast<S*>(y), n, flag, code);
    }
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
