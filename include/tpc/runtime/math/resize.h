// The per-coordinate arithmetic of Resize (where an output coordinate reads the input, the
// nearest rounding, the linear and cubic weights) and one output element of a resized axis,
// in double as onnx's reference: shared by the CPU kernel (cpu/resize.cc, grid_sample.cc)
// and the device kernel (resize.cu), which resize one axis at a time as the CPU does.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class ResizeCoord : int {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
};
enum class ResizeNearest : int { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class ResizeMode : int { kNearest, kLinear, kCubic };

// The input coordinate that output coordinate `x` reads along one axis of `in` elements
// resized by `scale` to `out` elements (`roi_start`, `roi_end`: tf_crop_and_resize's
// region, as fractions of the input). As onnx's reference, the mapping uses the unrounded
// output length scale * in.
TPC_HOST_DEVICE inline double ResizeSourceCoord(ResizeCoord mode, int64_t x, double scale,
                                                int64_t in, int64_t out, double roi_start,
                                                double roi_end) {
  const double xd = static_cast<double>(x), ind = static_cast<double>(in);
  const double out_width = scale * ind;
  switch (mode) {
    case ResizeCoord::kAlignCorners:
      return out_width == 1 ? 0.0 : xd * (ind - 1) / (out_width - 1);
    case ResizeCoord::kAsymmetric:
      return xd / scale;
    case ResizeCoord::kTfCropAndResize: {
      const double c = out_width == 1 ? (roi_end - roi_start) * (ind - 1) / 2
                                      : xd * (roi_end - roi_start) * (ind - 1) / (out_width - 1);
      return c + roi_start * (ind - 1);
    }
    case ResizeCoord::kPytorchHalfPixel:
      return out_width == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
    case ResizeCoord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out) / out_width;
      const double offset = ind / 2 * (1 - adjustment);
      return offset + (xd + 0.5) / scale - 0.5;
    }
    case ResizeCoord::kHalfPixel:
      break;
  }
  return (xd + 0.5) / scale - 0.5;
}

// tf_crop_and_resize reads `extrapolation_value` where the coordinate leaves the input.
TPC_HOST_DEVICE inline bool ResizeExtrapolates(ResizeCoord mode, double c, int64_t in) {
  return mode == ResizeCoord::kTfCropAndResize && (c < 0 || c > static_cast<double>(in - 1));
}

// The input index that nearest mode reads for coordinate `c`, clamped into [0, in).
TPC_HOST_DEVICE inline int64_t ResizeNearestIndex(ResizeNearest mode, double c, int64_t in) {
  const double f = floor(c);
  const double ratio = c - f;
  int64_t i = static_cast<int64_t>(f);
  if (ratio != 0) {
    switch (mode) {
      case ResizeNearest::kRoundPreferFloor:
        i += ratio > 0.5 ? 1 : 0;
        break;
      case ResizeNearest::kRoundPreferCeil:
        i += ratio >= 0.5 ? 1 : 0;
        break;
      case ResizeNearest::kFloor:
        break;
      case ResizeNearest::kCeil:
        i += 1;
        break;
    }
  }
  return i < 0 ? 0 : (i >= in ? in - 1 : i);
}

// The linear (triangle) weight of a tap at distance `d` from the coordinate.
TPC_HOST_DEVICE inline double ResizeLinearWeight(double d) {
  const double a = fabs(d);
  return a < 1 ? 1 - a : 0.0;
}

// The cubic convolution weight (Keys, with coefficient `a`) of a tap at distance `d`.
TPC_HOST_DEVICE inline double ResizeCubicWeight(double d, double a) {
  const double x = fabs(d);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// The first tap, relative to floor(c), of a filter of half-width `support` (1 linear, 2
// cubic) stretched by 1 / `scale` when antialiasing a downscale; the taps run from there to
// -first + 1 (2 - 2 * first taps).
TPC_HOST_DEVICE inline int64_t ResizeFirstTap(double support, double scale, bool antialias) {
  const double s = antialias && scale < 1 ? scale : 1.0;
  return static_cast<int64_t>(floor(-support / s) + 1);
}

// The options of a Resize (the attributes) and one axis's geometry.
struct ResizeOptions {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0;
};
struct ResizeAxisGeometry {
  int64_t in = 1, out = 1;
  double scale = 1, roi_start = 0, roi_end = 1;
};

// Calls tap(index, weight) for each input element that output coordinate o of the axis
// reads (nearest: one tap of weight 1; linear and cubic: the filter's non-zero taps, their
// weights normalized to sum 1 when antialiasing or excluding the outside); returns false
// (no tap) where tf_crop_and_resize extrapolates.
template <typename Tap>
TPC_HOST_DEVICE inline bool ResizeTaps(const ResizeOptions& opt, const ResizeAxisGeometry& a,
                                       int64_t o, Tap tap) {
  const double c = ResizeSourceCoord(opt.coord, o, a.scale, a.in, a.out, a.roi_start, a.roi_end);
  if (ResizeExtrapolates(opt.coord, c, a.in)) return false;
  if (opt.mode == ResizeMode::kNearest) {
    tap(ResizeNearestIndex(opt.nearest, c, a.in), 1.0);
    return true;
  }
  const double support = opt.mode == ResizeMode::kLinear ? 1 : 2;
  const int64_t start = ResizeFirstTap(support, a.scale, opt.antialias);
  const double f = floor(c);
  const double ratio = c - f;
  const double s = opt.antialias && a.scale < 1 ? a.scale : 1.0;
  const auto weight = [&](int64_t i) {
    const double d = s * (static_cast<double>(i) - ratio);
    double w =
        opt.mode == ResizeMode::kLinear ? ResizeLinearWeight(d) : ResizeCubicWeight(d, opt.cubic_a);
    const int64_t k = static_cast<int64_t>(f) + i;
    if (opt.exclude_outside && (k < 0 || k >= a.in)) w = 0;
    return w;
  };
  double sum = 1.0;
  if (opt.antialias || opt.exclude_outside) {
    sum = 0;
    for (int64_t i = start; i <= 1 - start; ++i) sum += weight(i);
    if (sum == 0) sum = 1.0;
  }
  for (int64_t i = start; i <= 1 - start; ++i) {
    const double w = weight(i);
    if (w == 0) continue;
    const int64_t k = static_cast<int64_t>(f) + i;
    tap(k < 0 ? 0 : (k >= a.in ? a.in - 1 : k), w / sum);
  }
  return true;
}

// Output element i of one resized axis, y [outer, out, inner] from x [outer, in, inner]:
// the weighted taps of its coordinate, or the extrapolation value.
template <typename Load>
TPC_HOST_DEVICE inline double ResizeAxisElement(const ResizeOptions& opt,
                                                const ResizeAxisGeometry& a, int64_t inner,
                                                int64_t i, Load load) {
  const int64_t j = i % inner, r = i / inner;
  const int64_t o = r % a.out, outer = r / a.out;
  const int64_t base = outer * a.in * inner + j;
  double acc = 0;
  if (!ResizeTaps(opt, a, o, [&](int64_t k, double w) { acc += w * load(base + k * inner); })) {
    return opt.extrapolation;
  }
  return acc;
}

}  // namespace tpc::runtime::math
