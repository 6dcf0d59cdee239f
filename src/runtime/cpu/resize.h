// Internal to the CPU backend: the per-coordinate arithmetic of Resize (where an output
// coordinate reads the input, the nearest rounding, the linear and cubic weights). Plain
// functions, the same on every backend; resize.cc reads the ONNX attributes and inputs.
#pragma once

#include <cmath>
#include <cstdint>

namespace tpc::runtime::cpu {

enum class ResizeCoord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
};
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// The input coordinate that output coordinate `x` reads along one axis of `in` elements
// resized by `scale` to `out` elements (`roi_start`, `roi_end`: tf_crop_and_resize's
// region, as fractions of the input). As onnx's reference, the mapping uses the unrounded
// output length scale * in.
inline double ResizeSourceCoord(ResizeCoord mode, int64_t x, double scale, int64_t in, int64_t out,
                                double roi_start, double roi_end) {
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
inline bool ResizeExtrapolates(ResizeCoord mode, double c, int64_t in) {
  return mode == ResizeCoord::kTfCropAndResize && (c < 0 || c > static_cast<double>(in - 1));
}

// The input index that nearest mode reads for coordinate `c`, clamped into [0, in).
inline int64_t ResizeNearestIndex(ResizeNearest mode, double c, int64_t in) {
  const double f = std::floor(c);
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
inline double ResizeLinearWeight(double d) {
  const double a = std::fabs(d);
  return a < 1 ? 1 - a : 0.0;
}

// The cubic convolution weight (Keys, with coefficient `a`) of a tap at distance `d`.
inline double ResizeCubicWeight(double d, double a) {
  const double x = std::fabs(d);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// The first tap, relative to floor(c), of a filter of half-width `support` (1 linear, 2
// cubic) stretched by 1 / `scale` when antialiasing a downscale; the taps run from there to
// -first + 1 (2 - 2 * first taps).
inline int64_t ResizeFirstTap(double support, double scale, bool antialias) {
  const double s = antialias && scale < 1 ? scale : 1.0;
  return static_cast<int64_t>(std::floor(-support / s) + 1);
}

}  // namespace tpc::runtime::cpu
