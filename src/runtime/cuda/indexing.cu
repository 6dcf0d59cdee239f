// Launches of the CUDA kernels that index by values (GatherElements, GatherND, ScatterND
// and ScatterElements without a reduction, MaxUnpool): one thread per output (or update) element in
// a grid-stride loop; the math is math/indexing.h. An index out of range sets the backend's check
// flag to the launch's code (the first failing launch of a run wins).
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

// The three launches below by the index type (int64 or int32) and element size.
enum class IndexOp { kGatherNd, kScatterNd, kScatterElements, kUnpool };

struct IndexArgs {
  const void* data;  // GatherND's data
  const void* indices;
  const void* updates;  // the scatters'
  void* out;            // GatherND's output, or the scatters' y (a copy of data)
  math::NdIndex nd;
  int64_t slice, per_batch, batch_stride;  // GatherND, ScatterND (slice)
  StridedView base;                        // ScatterElements; MaxUnpool's output view
  int64_t axis_len, axis_stride;           // ScatterElements; axis_len: MaxUnpool's total
};

template <typename Word, typename Index>
__global__ void IndexKernel(IndexOp op, IndexArgs a, int64_t n, int* flag, int code) {
  const auto* indices = static_cast<const Index*>(a.indices);
  for (int64_t i = First(); i < n; i += Step()) {
    bool ok = true;
    switch (op) {
      case IndexOp::kGatherNd:
        ok = math::GatherNdElement(static_cast<const Word*>(a.data), a.nd, indices, a.slice,
                                   a.per_batch, a.batch_stride, static_cast<Word*>(a.out), i);
        break;
      case IndexOp::kScatterNd:
        ok = math::ScatterNdElement(a.nd, indices, static_cast<const Word*>(a.updates), a.slice,
                                    static_cast<Word*>(a.out), i);
        break;
      case IndexOp::kScatterElements:
        ok = math::ScatterElementsElement(a.base, indices, a.axis_len, a.axis_stride,
                                          static_cast<const Word*>(a.updates),
                                          static_cast<Word*>(a.out), i);
        break;
      case IndexOp::kUnpool:
        ok = math::UnpoolElement(a.base, indices, a.axis_len, static_cast<const Word*>(a.updates),
                                 static_cast<Word*>(a.out), i);
        break;
    }
    if (!ok) atomicCAS(flag, 0, code);
  }
}

template <typename Word>
cudaError_t Index(IndexOp op, const IndexArgs& a, bool i64, int64_t n, int* flag, int code,
                  cudaStream_t stream) {
  if (i64) {
    IndexKernel<Word, int64_t><<<Blocks(n), kThreads, 0, stream>>>(op, a, n, flag, code);
  } else {
    IndexKernel<Word, int32_t><<<Blocks(n), kThreads, 0, stream>>>(op, a, n, flag, code);
  }
  return cudaGetLastError();
}

cudaError_t LaunchIndex(IndexOp op, int elem_bytes, const IndexArgs& a, bool i64, int64_t n,
                        int* flag, int code, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByWord(elem_bytes, [&](auto word) {
    return Index<decltype(word)>(op, a, i64, n, flag, code, stream);
  });
}

}  // namespace

cudaError_t LaunchGatherNd(int elem_bytes, const void* data, const math::NdIndex& nd,
                           const void* indices, bool indices_i64, int64_t slice, int64_t per_batch,
                           int64_t batch_stride, void* out, int64_t n, int* flag, int code,
                           cudaStream_t stream) {
  if (slice < 1 || per_batch < 1) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  IndexArgs a{};
  a.data = data;
  a.indices = indices;
  a.out = out;
  a.nd = nd;
  a.slice = slice;
  a.per_batch = per_batch;
  a.batch_stride = batch_stride;
  return LaunchIndex(IndexOp::kGatherNd, elem_bytes, a, indices_i64, n, flag, code, stream);
}

cudaError_t LaunchScatterNd(int elem_bytes, const math::NdIndex& nd, const void* indices,
                            bool indices_i64, const void* updates, int64_t slice, void* y,
                            int64_t n, int* flag, int code, cudaStream_t stream) {
  if (slice < 1) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  IndexArgs a{};
  a.indices = indices;
  a.updates = updates;
  a.out = y;
  a.nd = nd;
  a.slice = slice;
  return LaunchIndex(IndexOp::kScatterNd, elem_bytes, a, indices_i64, n, flag, code, stream);
}

cudaError_t LaunchScatterElements(int elem_bytes, const StridedView& base, const void* indices,
                                  bool indices_i64, int64_t axis_len, int64_t axis_stride,
                                  const void* updates, void* y, int64_t n, int* flag, int code,
                                  cudaStream_t stream) {
  IndexArgs a{};
  a.indices = indices;
  a.updates = updates;
  a.out = y;
  a.base = base;
  a.axis_len = axis_len;
  a.axis_stride = axis_stride;
  return LaunchIndex(IndexOp::kScatterElements, elem_bytes, a, indices_i64, n, flag, code, stream);
}

cudaError_t LaunchMaxUnpool(int elem_bytes, const StridedView& out, const void* indices,
                            bool indices_i64, int64_t total, const void* x, void* y, int64_t n,
                            int* flag, int code, cudaStream_t stream) {
  IndexArgs a{};
  a.indices = indices;
  a.updates = x;
  a.out = y;
  a.base = out;
  a.axis_len = total;
  return LaunchIndex(IndexOp::kUnpool, elem_bytes, a, indices_i64, n, flag, code, stream);
}

cudaError_t LaunchGatherElements(int elem_bytes, const void* data, const StridedView& base,
                                 const void* indices, bool indices_i64, int64_t axis_len,
                                 int64_t axis_stride, void* out, int64_t n, int* flag, int code,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByWord(elem_bytes, [&](auto word) {
    return GatherElements<decltype(word)>(data, base, indices, indices_i64, axis_len, axis_stride,
                                          out, n, flag, code, stream);
  });
}

}  // namespace tpc::runtime::cuda
