// The per-coordinate arithmetic of Resize (tpc/runtime/math/resize.h) on cases the ONNX node
// tests reach only through whole images: ties of the nearest rounding, one-element outputs,
// the extrapolation of tf_crop_and_resize and the antialias filter width.
#include "tpc/runtime/math/resize.h"

#include "catch2/catch.hpp"

namespace tpc::runtime::math {
namespace {

TEST_CASE("Resize nearest rounding breaks ties by its mode and clamps", "[runtime][kernels]") {
  CHECK(ResizeNearestIndex(ResizeNearest::kRoundPreferFloor, 1.5, 4) == 1);
  CHECK(ResizeNearestIndex(ResizeNearest::kRoundPreferCeil, 1.5, 4) == 2);
  CHECK(ResizeNearestIndex(ResizeNearest::kFloor, 1.9, 4) == 1);
  CHECK(ResizeNearestIndex(ResizeNearest::kCeil, 1.1, 4) == 2);
  CHECK(ResizeNearestIndex(ResizeNearest::kCeil, 2.0, 4) == 2);  // integers stay
  CHECK(ResizeNearestIndex(ResizeNearest::kRoundPreferFloor, -0.5, 4) == 0);
  CHECK(ResizeNearestIndex(ResizeNearest::kCeil, 3.25, 4) == 3);
}

TEST_CASE("Resize source coordinates of each transformation mode", "[runtime][kernels]") {
  // 4 -> 8 (scale 2).
  CHECK(ResizeSourceCoord(ResizeCoord::kHalfPixel, 0, 2.0, 4, 8, 0, 1) == Approx(-0.25));
  CHECK(ResizeSourceCoord(ResizeCoord::kAsymmetric, 3, 2.0, 4, 8, 0, 1) == Approx(1.5));
  CHECK(ResizeSourceCoord(ResizeCoord::kAlignCorners, 7, 2.0, 4, 8, 0, 1) == Approx(3.0));
  CHECK(ResizeSourceCoord(ResizeCoord::kPytorchHalfPixel, 0, 0.25, 4, 1, 0, 1) == -0.5);
  CHECK(ResizeSourceCoord(ResizeCoord::kAlignCorners, 0, 0.25, 4, 1, 0, 1) == 0.0);
  // tf_crop_and_resize over the middle half: 0 -> 0.25 * 3.
  const double c = ResizeSourceCoord(ResizeCoord::kTfCropAndResize, 0, 1.0, 4, 4, 0.25, 0.75);
  CHECK(c == Approx(0.75));
  CHECK_FALSE(ResizeExtrapolates(ResizeCoord::kTfCropAndResize, c, 4));
  CHECK(ResizeExtrapolates(ResizeCoord::kTfCropAndResize, 3.5, 4));
  CHECK_FALSE(ResizeExtrapolates(ResizeCoord::kHalfPixel, 3.5, 4));
}

TEST_CASE("Resize filter weights and the antialias footprint", "[runtime][kernels]") {
  CHECK(ResizeLinearWeight(0.25) == Approx(0.75));
  CHECK(ResizeLinearWeight(-1.5) == 0.0);
  // Keys' cubic sums to 1 over its four taps at any phase.
  const double r = 0.3;
  double sum = 0;
  for (int i = -1; i <= 2; ++i) sum += ResizeCubicWeight(i - r, -0.75);
  CHECK(sum == Approx(1.0));
  CHECK(ResizeCubicWeight(0, -0.5) == 1.0);
  CHECK(ResizeCubicWeight(1, -0.5) == Approx(0.0).margin(1e-12));
  CHECK(ResizeFirstTap(1, 2.0, true) == 0);    // upscale: two taps
  CHECK(ResizeFirstTap(1, 0.5, true) == -1);   // linear at half size: four taps
  CHECK(ResizeFirstTap(2, 0.5, false) == -1);  // no antialias: cubic's four taps
  CHECK(ResizeFirstTap(2, 0.5, true) == -3);
}

}  // namespace
}  // namespace tpc::runtime::math
