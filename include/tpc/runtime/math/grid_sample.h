// GridSample's and AffineGrid's element math, shared by the CPU kernels (cpu/grid_sample.cc)
// and the CUDA ones (cuda/grid_sample.cu). Coordinates, weights and sums in double, as
// onnx's reference computes them.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/resize.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class GridPadding : int { kZeros, kBorder, kReflection };
enum class GridMode : int { kNearest, kLinear, kCubic };

// Reflects `x` at the borders [lo, hi] until it lies between them.
TPC_HOST_DEVICE inline double GridReflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = floor(dx / range);
    const double r = dx - n * range;
    return fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = floor(dx / range);
    const double r = dx - n * range;
    return fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

// One spatial dim of the input: its size and the borders a coordinate may reach (the outer
// edges of the end pixels, or their centres with align_corners).
struct GridAxis {
  int64_t size = 1;
  double lo = 0, hi = 0;
};
TPC_HOST_DEVICE inline GridAxis MakeGridAxis(int64_t size, bool align_corners) {
  return align_corners ? GridAxis{size, 0.0, static_cast<double>(size - 1)}
                       : GridAxis{size, -0.5, static_cast<double>(size) - 0.5};
}

TPC_HOST_DEVICE inline int64_t GridClampIndex(int64_t i, int64_t size) {
  return i < 0 ? 0 : (i > size - 1 ? size - 1 : i);
}

// Input index `i` after padding, or -1 for a zero (padding "zeros" outside the input).
TPC_HOST_DEVICE inline int64_t GridResolveIndex(int64_t i, const GridAxis& a, GridPadding padding) {
  if (i >= 0 && i < a.size) return i;
  switch (padding) {
    case GridPadding::kZeros:
      return -1;
    case GridPadding::kBorder:
      return GridClampIndex(i, a.size);
    case GridPadding::kReflection:
      break;
  }
  const auto r = static_cast<int64_t>(GridReflect(static_cast<double>(i), a.lo, a.hi));
  return GridClampIndex(r, a.size);
}

// The taps (index, weight; index -1: a zero of the padding) that position x (already
// denormalized; rounded for nearest) reads along one axis: 1, 2 or 4 of them.
struct GridTaps {
  int count = 0;
  int64_t index[4] = {};
  double weight[4] = {};
};
TPC_HOST_DEVICE inline GridTaps GridAxisTaps(double x, const GridAxis& a, GridMode mode,
                                             GridPadding padding) {
  if (x < a.lo || x > a.hi) {
    if (padding == GridPadding::kBorder) {
      const double top = static_cast<double>(a.size - 1);
      x = x < 0.0 ? 0.0 : (x > top ? top : x);
    }
    if (padding == GridPadding::kReflection) x = GridReflect(x, a.lo, a.hi);
  }
  GridTaps t;
  if (mode == GridMode::kNearest) {
    t.count = 1;
    t.index[0] = GridResolveIndex(static_cast<int64_t>(x), a, padding);
    t.weight[0] = 1.0;
    return t;
  }
  const double f = floor(x);
  const double frac = x - f;
  const auto i0 = static_cast<int64_t>(f);
  if (mode == GridMode::kLinear) {
    t.count = 2;
    t.index[0] = GridResolveIndex(i0, a, padding);
    t.weight[0] = 1 - frac;
    t.index[1] = GridResolveIndex(i0 + 1, a, padding);
    t.weight[1] = frac;
    return t;
  }
  t.count = 4;
  for (int k = -1; k <= 2; ++k) {
    t.index[k + 1] = GridResolveIndex(i0 + k, a, padding);
    t.weight[k + 1] = ResizeCubicWeight(static_cast<double>(k) - frac, -0.75);
  }
  return t;
}

// A normalized coordinate in [-1, 1] as a position along `size` pixels (nearest: rounded,
// ties to even).
TPC_HOST_DEVICE inline double GridPosition(double n, int64_t size, bool align_corners,
                                           GridMode mode) {
  const auto s = static_cast<double>(size);
  const double p = align_corners ? (n + 1) / 2 * (s - 1) : ((n + 1) * s - 1) / 2;
  return mode == GridMode::kNearest ? rint(p) : p;
}

// X [N, C, D1..Dr], grid [N, H1..Hr, r] (a point's coordinates x, y, ...: the last dim
// first) -> Y [N, C, H1..Hr].
struct GridSampleGeometry {
  int spatial = 0;
  GridAxis axes[kMaxSpatial];
  int64_t in_strides[kMaxSpatial] = {};  // within one plane of X
  int64_t channels = 0, in_points = 1, out_points = 1;
  GridMode mode = GridMode::kLinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
};

// The taps of output point `o` of image `n` along each axis.
template <typename LoadGrid>
TPC_HOST_DEVICE inline void GridPointTaps(const GridSampleGeometry& g, int64_t n, int64_t o,
                                          LoadGrid grid, GridTaps* taps) {
  const int64_t r = g.spatial;
  const int64_t at = (n * g.out_points + o) * r;
  for (int d = 0; d < g.spatial; ++d) {
    const double c = GridPosition(grid(at + r - 1 - d), g.axes[d].size, g.align_corners, g.mode);
    taps[d] = GridAxisTaps(c, g.axes[d], g.mode, g.padding);
  }
}

// Output point `o`'s value in one plane of X: the sum over the product of the axes' taps
// (axis 0 slowest, a zero of the padding dropped), each weight the product of its axes'
// weights in axis order.
template <typename LoadX>
TPC_HOST_DEVICE inline double GridPlaneSum(const GridSampleGeometry& g, const GridTaps* taps,
                                           LoadX plane) {
  int k[kMaxSpatial] = {};
  double sum = 0;
  for (;;) {
    bool zero = false;
    int64_t off = 0;
    double w = 1.0;
    for (int d = 0; d < g.spatial; ++d) {
      const int64_t index = taps[d].index[k[d]];
      zero = zero || index < 0;
      off += index * g.in_strides[d];
      w *= taps[d].weight[k[d]];
    }
    if (!zero) sum += w * plane(off);
    int d = g.spatial - 1;
    for (; d >= 0; --d) {
      if (++k[d] < taps[d].count) break;
      k[d] = 0;
    }
    if (d < 0) return sum;
  }
}

// Element i of Y ([N, C, out points]).
template <typename LoadX, typename LoadGrid>
TPC_HOST_DEVICE inline double GridSampleElement(const GridSampleGeometry& g, int64_t i, LoadX x,
                                                LoadGrid grid) {
  const int64_t o = i % g.out_points, plane = i / g.out_points, n = plane / g.channels;
  GridTaps taps[kMaxSpatial];
  GridPointTaps(g, n, o, grid, taps);
  return GridPlaneSum(g, taps, [&](int64_t off) { return x(plane * g.in_points + off); });
}

// AffineGrid's normalized coordinate of index i along a dim of `len` points.
TPC_HOST_DEVICE inline double AffineGridBase(int64_t i, int64_t len, bool align_corners) {
  const auto fi = static_cast<double>(i), fl = static_cast<double>(len);
  return align_corners ? (len > 1 ? -1 + 2 * fi / (fl - 1) : 0.0) : (2 * fi + 1) / fl - 1;
}

// AffineGrid's element i of grid [N, S1..Sr, r] (r = 2 or 3; `dims` = S1..Sr): row
// i % r of theta [N, r, r + 1] times the point (x, y[, z], 1), x along the last dim.
template <typename LoadTheta>
TPC_HOST_DEVICE inline double AffineGridElement(int r, const int64_t* dims, int64_t points,
                                                bool align_corners, int64_t i, LoadTheta theta) {
  const int64_t row = i % r, p = (i / r) % points, n = i / (r * points);
  double point[4] = {1.0, 1.0, 1.0, 1.0};
  int64_t rem = p;
  for (int d = r - 1; d >= 0; --d) {
    const int64_t idx = rem % dims[d];
    rem /= dims[d];
    point[r - 1 - d] = AffineGridBase(idx, dims[d], align_corners);
  }
  double sum = 0;
  for (int k = 0; k <= r; ++k) sum += theta((n * r + row) * (r + 1) + k) * point[k];
  return sum;
}

}  // namespace tpc::runtime::math
