// Index arithmetic shared by the CPU-side tests and the CUDA kernels: a linear index over
// an output shape mapped to the offset of an element in a strided view (broadcasting,
// transposes, slices, concatenation are all strided views).
#pragma once

#include <cstdint>
#include <vector>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

inline constexpr int kMaxDims = 8;

// a / b for a >= 0, b > 0: in 32 bits when both fit (a GPU divides 64-bit integers in
// software, several times slower).
TPC_HOST_DEVICE inline int64_t DivIndex(int64_t a, int64_t b) {
  if (((a | b) >> 32) == 0) return static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  return a / b;
}

// A view: `dims` (of the iteration space) and the element stride of each dim in memory,
// plus a base offset. Passed by value to kernels.
struct StridedView {
  int rank = 0;
  int64_t offset = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  // Offset of element `linear` of the iteration space (row-major over `dims`). What is
  // left after the inner dims is the outermost index (no division): a view simplified
  // to one dim costs a multiply.
  TPC_HOST_DEVICE int64_t At(int64_t linear) const {
    int64_t off = offset;
    for (int d = rank - 1; d > 0; --d) {
      const int64_t q = DivIndex(linear, dims[d]);
      off += (linear - q * dims[d]) * strides[d];
      linear = q;
    }
    return rank > 0 ? off + linear * strides[0] : off;
  }
};

// Row-major strides of `shape`.
inline std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    s[static_cast<size_t>(d)] = s[static_cast<size_t>(d) + 1] * shape[static_cast<size_t>(d) + 1];
  }
  return s;
}

// A view over `out_shape` of a tensor of shape `in_shape` broadcast to it (numpy rules,
// `in_shape` aligned right; the caller checked that the shapes broadcast). Rank must be
// at most kMaxDims.
inline StridedView BroadcastView(const std::vector<int64_t>& in_shape,
                                 const std::vector<int64_t>& out_shape) {
  StridedView v;
  v.rank = static_cast<int>(out_shape.size());
  const std::vector<int64_t> in_strides = ContiguousStrides(in_shape);
  const size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < out_shape.size(); ++d) {
    v.dims[d] = out_shape[d];
    const bool has = d >= lead && in_shape[d - lead] != 1;
    v.strides[d] = has ? in_strides[d - lead] : 0;
  }
  return v;
}

// A view over `dims` whose dim d steps `strides[d]` elements (the first dims.size() of
// them are read); rank at most kMaxDims. The attention core's mask rows: dims [batch..,
// s] with the mask's broadcast strides over them.
inline StridedView ViewOf(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  StridedView v;
  v.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    v.dims[d] = dims[d];
    v.strides[d] = strides[d];
  }
  return v;
}

// The contiguous view of `shape` itself.
inline StridedView ContiguousView(const std::vector<int64_t>& shape) {
  return BroadcastView(shape, shape);
}

// Drops dims of size 1 and merges neighbours that are contiguous in every view, so that
// kernels do fewer divisions (views share the same dims).
inline void Simplify(std::vector<StridedView*> views) {
  if (views.empty()) return;
  const int rank = views[0]->rank;
  int out = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t n = views[0]->dims[d];
    if (n == 1) continue;
    bool merge = out > 0;
    for (StridedView* v : views) {
      merge = merge && v->strides[out - 1] == v->strides[d] * n;
    }
    for (StridedView* v : views) {
      if (merge) {
        v->dims[out - 1] *= n;
        v->strides[out - 1] = v->strides[d];
      } else {
        v->dims[out] = n;
        v->strides[out] = v->strides[d];
      }
    }
    if (!merge) ++out;
  }
  for (StridedView* v : views) v->rank = out;
}

}  // namespace tpc::runtime::math
