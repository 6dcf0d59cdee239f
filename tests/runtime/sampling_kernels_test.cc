// CPU kernels of the operators that sample at computed coordinates (GridSample, AffineGrid,
// DeformConv) on points worked out by hand: where a normalized coordinate lands
// (align_corners 0 and 1), each padding mode at the edge, nearest's ties to even, cubic at a
// pixel centre, a 3-D sample, AffineGrid's coordinates, DeformConv's moved and masked taps.
#include <algorithm>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::Floats;
using testing::I64;
using testing::OneOp;

// X = [[1, 2, 3], [4, 5, 6]] sampled at grid points (x, y).
std::vector<float> Sample2x3(std::vector<float> points, ir::Attributes attrs) {
  OneOp t(22);
  t.Input("x", F32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6}));
  const auto n = static_cast<int64_t>(points.size() / 2);
  t.Input("grid", F32({1, 1, n, 2}, std::move(points)));
  return Floats(t.Run("GridSample", std::move(attrs))[0]);
}

TEST_CASE("GridSample linear: centre and corner under each padding mode", "[runtime][kernels]") {
  // (0, 0) lands at column 1, row 0.5 (align_corners 0): between 2 and 5.
  // (-1, -1) lands at (-0.5, -0.5): zeros keeps a quarter of X[0, 0]; border clamps to it;
  // reflection maps the taps at -1 back onto index 0.
  const std::vector<float> pts = {0, 0, -1, -1};
  CHECK_THAT(Sample2x3(pts, {{"padding_mode", std::string("zeros")}}),
             Catch::Matchers::Approx(std::vector<float>{3.5f, 0.25f}));
  CHECK_THAT(Sample2x3(pts, {{"padding_mode", std::string("border")}}),
             Catch::Matchers::Approx(std::vector<float>{3.5f, 1}));
  CHECK_THAT(Sample2x3(pts, {{"padding_mode", std::string("reflection")}}),
             Catch::Matchers::Approx(std::vector<float>{3.5f, 1}));
  // align_corners 1: (1, 1) is exactly X[1, 2]; (0, 0) is the middle of 2, 5 (column 1).
  CHECK_THAT(Sample2x3({1, 1, 0, 0}, {{"align_corners", int64_t{1}}}),
             Catch::Matchers::Approx(std::vector<float>{6, 3.5f}));
  // Outside by more than a pixel, zeros padding gives 0.
  CHECK(Sample2x3({3, 3}, {})[0] == 0.0f);
}

TEST_CASE("GridSample nearest rounds half to even and cubic is exact at pixel centres",
          "[runtime][kernels]") {
  // align_corners 1 on 3 columns: x = -0.5 -> column 0.5 -> 0; x = 0.5 -> 1.5 -> 2.
  CHECK(Sample2x3({-0.5f, -1, 0.5f, -1},
                  {{"mode", std::string("nearest")}, {"align_corners", int64_t{1}}}) ==
        std::vector<float>{1, 3});
  // Cubic at (column 2, row 1) and (column 0, row 0): the pixels themselves.
  CHECK_THAT(
      Sample2x3({1, 1, -1, -1}, {{"mode", std::string("cubic")}, {"align_corners", int64_t{1}}}),
      Catch::Matchers::Approx(std::vector<float>{6, 1}).margin(1e-6));
}

TEST_CASE("GridSample 3-D linear: the mean of the 8 voxels at the centre", "[runtime][kernels]") {
  OneOp t(22);
  t.Input("x", F32({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  t.Input("grid", F32({1, 1, 1, 1, 3}, {0, 0, 0}));
  auto y = t.Run("GridSample", {{"align_corners", int64_t{1}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 1, 1, 1, 1});
  CHECK(Floats(y[0])[0] == Approx(4.5));
}

TEST_CASE("AffineGrid: normalized coordinates through theta", "[runtime][kernels]") {
  // Identity plus a shift of x by 0.5, on a 2 x 3 grid.
  for (int64_t align : {0, 1}) {
    OneOp t(20);
    t.Input("theta", F32({1, 2, 3}, {1, 0, 0.5f, 0, 1, 0}));
    t.Input("size", I64({4}, {1, 1, 2, 3}));
    auto y = t.Run("AffineGrid", {{"align_corners", align}});
    REQUIRE(y[0].shape() == std::vector<int64_t>{1, 2, 3, 2});
    // Columns at (2i + 1) / 3 - 1 (or -1, 0, 1), rows at -1/2, 1/2 (or -1, 1).
    const std::vector<float> xs =
        align ? std::vector<float>{-1, 0, 1} : std::vector<float>{-2.0f / 3, 0, 2.0f / 3};
    const std::vector<float> ys =
        align ? std::vector<float>{-1, 1} : std::vector<float>{-0.5f, 0.5f};
    std::vector<float> want;
    for (float yv : ys) {
      for (float xv : xs) {
        want.push_back(xv + 0.5f);
        want.push_back(yv);
      }
    }
    CHECK_THAT(Floats(y[0]), Catch::Matchers::Approx(want).margin(1e-6));
  }
}

TEST_CASE("DeformConv: a tap moved between pixels, masked, with bias", "[runtime][kernels]") {
  // X = 1..9 (3 x 3); W keeps the top-left tap only; that tap moves by (dy, dx) = (0.5, 1),
  // so output (i, j) reads X at (i + 0.5, j + 1): the mean of two vertical neighbours.
  std::vector<float> offset(8 * 4, 0.0f);
  std::fill(offset.begin(), offset.begin() + 4, 0.5f);   // tap 0, dy
  std::fill(offset.begin() + 4, offset.begin() + 8, 1);  // tap 0, dx
  std::vector<float> mask(4 * 4, 1.0f);
  std::fill(mask.begin(), mask.begin() + 4, 2);  // tap 0 counts twice
  OneOp t(22);
  t.Input("x", F32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  t.Input("w", F32({1, 1, 2, 2}, {1, 0, 0, 0}));
  t.Input("offset", F32({1, 8, 2, 2}, offset));
  t.Input("b", F32({1}, {1}));
  t.Input("mask", F32({1, 4, 2, 2}, mask));
  auto y = t.Run("DeformConv", {{"kernel_shape", std::vector<int64_t>{2, 2}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 1, 2, 2});
  // 2 * mean + 1: (2 + 5) / 2, (3 + 6) / 2, (5 + 8) / 2, (6 + 9) / 2.
  CHECK_THAT(Floats(y[0]), Catch::Matchers::Approx(std::vector<float>{8, 10, 14, 16}));
}

}  // namespace
}  // namespace tpc::runtime
