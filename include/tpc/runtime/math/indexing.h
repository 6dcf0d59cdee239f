// Per-element math of the device kernels that index by values: GatherElements.
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

}  // namespace tpc::runtime::math
