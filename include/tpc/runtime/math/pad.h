// Index math of the copies that fill: Pad (the source coordinate of an output coordinate
// in each mode) and Trilu (which elements of a matrix stay). Shared by the CPU kernels
// and the device kernels (pad.cu).
#pragma once

#include <cstdint>

#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class PadMode : int { kConstant, kEdge, kReflect, kWrap };

// The input coordinate that coordinate p (already shifted by the pad before: p < 0 or
// p >= n is in the padding) reads along a dim of n elements; -1 where the output takes the
// constant (mode constant, or an empty dim).
TPC_HOST_DEVICE inline int64_t PadSourceIndex(PadMode mode, int64_t p, int64_t n) {
  if (p >= 0 && p < n) return p;
  if (mode == PadMode::kConstant || n == 0) return -1;
  switch (mode) {
    case PadMode::kEdge:
      return p < 0 ? 0 : n - 1;
    case PadMode::kWrap:
      return ((p % n) + n) % n;
    default: {  // reflect, without repeating the edge
      const int64_t period = n > 1 ? 2 * (n - 1) : 1;
      const int64_t q = ((p % period) + period) % period;
      return q >= n ? period - q : q;
    }
  }
}

// Pad's output over `rank` dims (out), the input's dims and row-major strides, and the
// pads before each dim (negative: a crop).
struct PadLayout {
  int rank = 0;
  PadMode mode = PadMode::kConstant;
  int64_t out[kMaxDims] = {}, in[kMaxDims] = {}, in_strides[kMaxDims] = {}, before[kMaxDims] = {};
};

// Output element i of Pad: the input element its coordinates read, or `fill`.
template <typename Word>
TPC_HOST_DEVICE inline void PadElement(const PadLayout& l, const Word* x, Word fill, Word* y,
                                       int64_t i) {
  int64_t rest = i, off = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t q = DivIndex(rest, l.out[d]);
    const int64_t src = PadSourceIndex(l.mode, rest - q * l.out[d] - l.before[d], l.in[d]);
    rest = q;
    if (src < 0) {
      y[i] = fill;
      return;
    }
    off += src * l.in_strides[d];
  }
  y[i] = x[off];
}

// Trilu keeps element (row i, column j) of each matrix when j − i ≥ k (upper) or ≤ k.
TPC_HOST_DEVICE inline bool TriluKeeps(bool upper, int64_t k, int64_t i, int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

// Element e of Trilu over matrices of rows × cols: x's, or zero bits.
template <typename Word>
TPC_HOST_DEVICE inline void TriluElement(const Word* x, Word* y, int64_t rows, int64_t cols,
                                         bool upper, int64_t k, int64_t e) {
  const int64_t r = DivIndex(e, cols);
  const int64_t j = e - r * cols;
  const int64_t i = r - DivIndex(r, rows) * rows;
  y[e] = TriluKeeps(upper, k, i, j) ? x[e] : Word{};
}

}  // namespace tpc::runtime::math
