// Element math of the device pools (MaxPool with its Indices, AveragePool, LpPool) over
// the window of math::ConvGeometry, as the CPU kernel computes each output (cpu/pool.cc:
// the taps in row-major order; a tap in the padding is skipped, and counts in
// AveragePool's divisor with count_include_pad when it lies within the pads).
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class PoolOp : int { kMax, kAverage, kLp };

struct PoolParams {
  PoolOp op = PoolOp::kMax;
  bool count_include_pad = false;  // AveragePool
  float p = 2.0f;                  // LpPool
  bool column_major = false;       // MaxPool's Indices: storage_order 1
};

// |v|^p and its root, with p = 1 and 2 exact (the CPU kernel's LpTerm and LpRoot).
TPC_HOST_DEVICE inline float PoolLpTerm(float v, float p) {
  const float a = fabsf(v);
  return p == 1.0f ? a : p == 2.0f ? a * a : powf(a, p);
}
TPC_HOST_DEVICE inline float PoolLpRoot(float sum, float p) {
  return p == 1.0f ? sum : p == 2.0f ? sqrtf(sum) : powf(sum, 1.0f / p);
}

// The window of a global pool: one output per plane, its window the whole plane (`in`:
// the `spatial` dims of a plane).
inline ConvGeometry WholePlaneWindow(const int64_t* in, int spatial) {
  ConvGeometry g;
  g.spatial = spatial;
  for (int d = 0; d < spatial; ++d) {
    g.in[d] = g.kernel[d] = in[d];
    g.out[d] = g.strides[d] = g.dilations[d] = 1;
    g.in_size *= in[d];
    g.taps *= in[d];
  }
  return g;
}

// Output i of the pooled planes ([planes, outs...] row-major; plane j reads x's plane j of
// g.in_size elements): y[i], and for MaxPool with `index` its argmax as an index into the
// whole input (row-major, or column-major within the plane with column_major).
template <FloatKind K>
TPC_HOST_DEVICE inline void PoolElement(const ConvGeometry& g, const PoolParams& pp,
                                        const typename FloatIO<K>::Storage* x,
                                        typename FloatIO<K>::Storage* y, int64_t* index,
                                        int64_t i) {
  using IO = FloatIO<K>;
  const int64_t plane = DivIndex(i, g.outs);
  int64_t o = i - plane * g.outs;
  int64_t od[kMaxSpatial] = {};
  for (int d = g.spatial - 1; d >= 0; --d) {
    const int64_t q = DivIndex(o, g.out[d]);
    od[d] = o - q * g.out[d];
    o = q;
  }
  const typename IO::Storage* xp = x + plane * g.in_size;
  float acc = pp.op == PoolOp::kMax ? -INFINITY : 0.0f;
  int64_t best = -1, count = 0, padded = 0;
  for (int64_t t = 0; t < g.taps; ++t) {
    int64_t rest = t, c[kMaxSpatial] = {};
    bool inside = true, in_padded = true;
    for (int d = g.spatial - 1; d >= 0; --d) {  // tap t's input coordinates
      const int64_t q = DivIndex(rest, g.kernel[d]);
      const int64_t k = rest - q * g.kernel[d];
      rest = q;
      c[d] = od[d] * g.strides[d] + k * g.dilations[d] - g.pad_begin[d];
      inside = inside && c[d] >= 0 && c[d] < g.in[d];
      in_padded = in_padded && c[d] >= -g.pad_begin[d] && c[d] < g.in[d] + g.pad_end[d];
    }
    int64_t off = 0, cm_off = 0, cm_stride = 1;
    for (int d = 0; d < g.spatial; ++d) {  // row-major, and column-major (first dim fastest)
      off = off * g.in[d] + c[d];
      cm_off += c[d] * cm_stride;
      cm_stride *= g.in[d];
    }
    padded += in_padded ? 1 : 0;
    if (!inside) continue;
    ++count;
    const float v = IO::Load(xp[off]);
    if (pp.op == PoolOp::kMax) {
      if (best < 0 || v > acc) {
        acc = v;
        best = pp.column_major ? cm_off : off;
      }
    } else {
      acc += pp.op == PoolOp::kLp ? PoolLpTerm(v, pp.p) : v;
    }
  }
  if (pp.op == PoolOp::kAverage) {
    const int64_t divisor = pp.count_include_pad ? padded : count;
    acc = divisor > 0 ? acc / static_cast<float>(divisor) : 0.0f;
  } else if (pp.op == PoolOp::kLp) {
    acc = PoolLpRoot(acc, pp.p);
  }
  y[i] = IO::Store(pp.op == PoolOp::kMax && best < 0 ? IO::kLowest : acc);
  if (index != nullptr) index[i] = plane * g.in_size + (best < 0 ? 0 : best);
}

}  // namespace tpc::runtime::math
