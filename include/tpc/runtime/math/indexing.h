// Per-element math of the device kernels that index by values: GatherElements, GatherND,
// the scatters (ScatterND, ScatterElements) without a reduction, and MaxUnpool.
#pragma once

#include <cstdint>

#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// Element i of GatherElements (the output contiguous over the indices' dims, as the
// indices are): data at i's coordinates with the axis coordinate replaced by indices[i]
// (negative counts from the end). `base` views the indices' dims with data's strides and
// stride 0 on the axis. An index out of range writes 0 and returns false (the kernel
// reports it; the run fails naming the node, as the CPU kernel does).
template <typename Word, typename Index>
TPC_HOST_DEVICE inline bool GatherElementsElement(const Word* data, const StridedView& base,
                                                  const Index* indices, int64_t axis_len,
                                                  int64_t axis_stride, Word* out, int64_t i) {
  int64_t idx = static_cast<int64_t>(indices[i]);
  if (idx < 0) idx += axis_len;
  const bool ok = idx >= 0 && idx < axis_len;
  out[i] = ok ? data[base.At(i) + idx * axis_stride] : Word{};
  return ok;
}

// The element offset that tuple t of ND indices ([tuples, last], int64 or int32, negative
// counting from the end of the dim) names in data, whose addressed dims are dims[0..last)
// with element strides strides[0..last), after `batch_offset` (GatherND's batch dims);
// false when an index is out of range.
struct NdIndex {
  int last = 0;
  int64_t dims[kMaxDims] = {}, strides[kMaxDims] = {};
};
template <typename Index>
TPC_HOST_DEVICE inline bool NdOffset(const NdIndex& l, const Index* indices, int64_t t,
                                     int64_t* off) {
  bool ok = true;
  int64_t o = 0;
  for (int k = 0; k < l.last; ++k) {
    int64_t idx = static_cast<int64_t>(indices[t * l.last + k]);
    if (idx < 0) idx += l.dims[k];
    ok = ok && idx >= 0 && idx < l.dims[k];
    o += idx * l.strides[k];
  }
  *off = o;
  return ok;
}

// Element i of GatherND: slice element j = i % slice of tuple t = i / slice, in the batch
// entry of t (per_batch tuples each, batch_stride elements apart in data). An index out of
// range writes 0 and returns false.
template <typename Word, typename Index>
TPC_HOST_DEVICE inline bool GatherNdElement(const Word* data, const NdIndex& l,
                                            const Index* indices, int64_t slice, int64_t per_batch,
                                            int64_t batch_stride, Word* out, int64_t i) {
  const int64_t t = DivIndex(i, slice);
  const int64_t j = i - t * slice;
  int64_t off = 0;
  const bool ok = NdOffset(l, indices, t, &off);
  out[i] = ok ? data[DivIndex(t, per_batch) * batch_stride + off + j] : Word{};
  return ok;
}

// Element i of ScatterND's updates ([tuples, slice]): written at its tuple's offset plus
// its place in the slice. Without a reduction; with repeated tuples the last write is
// whichever thread comes last (ONNX leaves it undefined; the CPU takes the last tuple).
// An index out of range writes nothing and returns false.
template <typename Word, typename Index>
TPC_HOST_DEVICE inline bool ScatterNdElement(const NdIndex& l, const Index* indices,
                                             const Word* updates, int64_t slice, Word* y,
                                             int64_t i) {
  const int64_t t = DivIndex(i, slice);
  int64_t off = 0;
  if (!NdOffset(l, indices, t, &off)) return false;
  y[off + (i - t * slice)] = updates[i];
  return true;
}

// Element i of ScatterElements' updates (contiguous over the indices' dims): written at
// its own coordinates with the axis coordinate replaced by indices[i]; `base` as
// GatherElementsElement's. Without a reduction (repeated targets as ScatterNdElement).
template <typename Word, typename Index>
TPC_HOST_DEVICE inline bool ScatterElementsElement(const StridedView& base, const Index* indices,
                                                   int64_t axis_len, int64_t axis_stride,
                                                   const Word* updates, Word* y, int64_t i) {
  int64_t idx = static_cast<int64_t>(indices[i]);
  if (idx < 0) idx += axis_len;
  if (idx < 0 || idx >= axis_len) return false;
  y[base.At(i) + idx * axis_stride] = updates[i];
  return true;
}

// MaxUnpool's element i of X: written to y at the offset of its index, a position in the
// flattened pool-inverse dims that `out` views with y's strides; false when the index is
// outside [0, total). Two elements with one index race on the device (the CPU keeps the
// last); MaxPool's indices repeat only where overlapping windows chose one element, whose
// value both carry.
template <typename Word, typename Index>
TPC_HOST_DEVICE inline bool UnpoolElement(const StridedView& out, const Index* indices,
                                          int64_t total, const Word* x, Word* y, int64_t i) {
  const auto at = static_cast<int64_t>(indices[i]);
  if (at < 0 || at >= total) return false;
  y[out.At(at)] = x[i];
  return true;
}

}  // namespace tpc::runtime::math
