// Launches of the CUDA kernels that index by values (GatherElements): one thread per
// output element in a grid-stride loop; the math is math/indexing.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/indexing.h"

namespace tpc::runtime::cuda {
namespace {

template <typename Word, typename Index>
__global__ void GatherElementsKernel(const Word* data, StridedView base, const Index* indices,
                                     int64_t axis_len, int64_t axis_stride, Word* out, int64_t n,
                                     int* flag, int code) {
  for (int64_t i = First(); i < n; i += Step()) {
    if (!math::GatherElementsElement(data, base, indices, axis_len, axis_stride, out, i)) {
      atomicCAS(flag, 0, code);  // the first bad launch of a run names its node
    }
  }
}

template <typename Word>
cudaError_t GatherElements(const void* data, const StridedView& base, const void* indices, bool i64,
                           int64_t axis_len, int64_t axis_stride, void* out, int64_t n, int* flag,
                           int code, cudaStream_t stream) {
  if (i64) {
    GatherElementsKernel<Word, int64_t><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const Word*>(data), base, static_cast<const int64_t*>(indices), axis_len,
        axis_stride, static_cast<Word*>(out), n, flag, code);
  } else {
    GatherElementsKernel<Word, int32_t><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const Word*>(data), base, static_cast<const int32_t*>(indices), axis_len,
        axis_stride, static_cast<Word*>(out), n, flag, code);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGatherElements(int elem_bytes, const void* data, const StridedView& base,
                                 const void* indices, bool indices_i64, int64_t axis_len,
                                 int64_t axis_stride, void* out, int64_t n, int* flag, int code,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return GatherElements<uint8_t>(data, base, indices, indices_i64, axis_len, axis_stride, out,
                                     n, flag, code, stream);
    case 2:
      return GatherElements<uint16_t>(data, base, indices, indices_i64, axis_len, axis_stride, out,
                                      n, flag, code, stream);
    case 4:
      return GatherElements<uint32_t>(data, base, indices, indices_i64, axis_len, axis_stride, out,
                                      n, flag, code, stream);
    case 8:
      return GatherElements<uint64_t>(data, base, indices, indices_i64, axis_len, axis_stride, out,
                                      n, flag, code, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
