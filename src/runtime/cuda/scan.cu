// Launch of CumSum: one thread per line along the axis (math::CumSumLine), which reads and
// writes only its own line's elements, in order.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void CumSumKernel(const typename FloatIO<K>::Storage* x, typename FloatIO<K>::Storage* y,
                             RowLayout l, bool exclusive, bool reverse, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t r = First(); r < n; r += Step()) {
    math::CumSumLine(
        l, r, exclusive, reverse, [&](int64_t at) { return IO::Load(x[at]); },
        [&](int64_t at, float v) { y[at] = IO::Store(v); });
  }
}

template <FloatKind K>
cudaError_t CumSum(const void* x, void* y, const RowLayout& l, bool exclusive, bool reverse,
                   cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t n = l.rows();
  CumSumKernel<K><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(y),
                                                      l, exclusive, reverse, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchCumSum(FloatKind k, const void* x, void* y, const RowLayout& lines,
                         bool exclusive, bool reverse, cudaStream_t stream) {
  if (lines.rows() == 0 || lines.len == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return CumSum<decltype(kind)::value>(x, y, lines, exclusive, reverse, stream);
  });
}

}  // namespace tpc::runtime::cuda
