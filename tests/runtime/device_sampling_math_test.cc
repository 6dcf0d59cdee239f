// The sampling kernels' math (tpc/runtime/math/grid_sample.h) as grid_sample.cu's threads
// compute each output element (its point's taps found again per channel, loads and the
// store in the kernel's float type), against the CPU kernels: GridSample in each mode and
// padding, with and without align_corners, 2-D and 3-D, points inside and far outside;
// AffineGrid 2-D and 3-D.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/grid_sample.h"

namespace tpc::runtime {
namespace {

using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

TEST_CASE("GridSample element math equals the CPU kernel", "[runtime][device-math]") {
  const std::vector<std::string> modes = {"nearest", "linear", "cubic"};
  const std::vector<std::string> paddings = {"zeros", "border", "reflection"};
  for (const std::vector<int64_t>& xs :
       {std::vector<int64_t>{2, 3, 5, 6}, std::vector<int64_t>{1, 2, 3, 4, 5}}) {
    const int64_t r = static_cast<int64_t>(xs.size()) - 2;
    const Tensor x = Random(xs, 31);
    std::vector<int64_t> gs = {xs[0]};
    for (int64_t d = 0; d < r; ++d) gs.push_back(d + 2);
    gs.push_back(r);
    Tensor grid = Random(gs, 32);
    for (int64_t i = 0; i < grid.num_elements(); ++i) grid.data<float>()[i] *= 1.8f;  // some out
    for (const std::string& mode : modes) {
      if (mode == "cubic" && r == 3) continue;  // ONNX has no 3-D cubic
      for (const std::string& padding : paddings) {
        for (const int64_t align : {int64_t{0}, int64_t{1}}) {
          INFO(r << "-D " << mode << ", " << padding << ", align_corners " << align);
          OneOp o(20);
          o.Input("x", x);
          o.Input("grid", grid);
          const Tensor want =
              o.Run("GridSample",
                    {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}})[0];
          math::GridSampleGeometry g;
          g.spatial = static_cast<int>(r);
          g.channels = xs[1];
          g.mode = mode == "nearest"  ? math::GridMode::kNearest
                   : mode == "linear" ? math::GridMode::kLinear
                                      : math::GridMode::kCubic;
          g.padding = padding == "zeros"    ? math::GridPadding::kZeros
                      : padding == "border" ? math::GridPadding::kBorder
                                            : math::GridPadding::kReflection;
          g.align_corners = align != 0;
          int64_t stride = 1;
          for (int d = g.spatial - 1; d >= 0; --d) {
            g.in_strides[d] = stride;
            stride *= xs[static_cast<size_t>(d) + 2];
          }
          for (int d = 0; d < g.spatial; ++d) {
            g.axes[d] = math::MakeGridAxis(xs[static_cast<size_t>(d) + 2], g.align_corners);
            g.in_points *= xs[static_cast<size_t>(d) + 2];
            g.out_points *= gs[static_cast<size_t>(d) + 1];
          }
          std::vector<float> got(static_cast<size_t>(want.num_elements()));
          for (int64_t i = 0; i < want.num_elements(); ++i) {
            got[static_cast<size_t>(i)] = static_cast<float>(math::GridSampleElement(
                g, i, [&](int64_t j) { return static_cast<double>(x.data<float>()[j]); },
                [&](int64_t j) { return static_cast<double>(grid.data<float>()[j]); }));
          }
          RequireClose(got, Floats(want), 1e-6f);
        }
      }
    }
  }
}

TEST_CASE("AffineGrid element math equals the CPU kernel", "[runtime][device-math]") {
  for (const std::vector<int64_t>& size :
       {std::vector<int64_t>{2, 3, 4, 5}, std::vector<int64_t>{1, 1, 3, 2, 4}}) {
    const int r = static_cast<int>(size.size()) - 2;
    const Tensor theta = Random({size[0], r, r + 1}, 33);
    for (const int64_t align : {int64_t{0}, int64_t{1}}) {
      INFO(r << "-D, align_corners " << align);
      OneOp o(20);
      o.Input("theta", theta);
      o.Ints(size);
      const Tensor want = o.Run("AffineGrid", {{"align_corners", align}})[0];
      const std::vector<int64_t> dims(size.begin() + 2, size.end());
      int64_t points = 1;
      for (int64_t d : dims) points *= d;
      std::vector<float> got(static_cast<size_t>(want.num_elements()));
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        got[static_cast<size_t>(i)] = static_cast<float>(math::AffineGridElement(
            r, dims.data(), points, align != 0, i,
            [&](int64_t j) { return static_cast<double>(theta.data<float>()[j]); }));
      }
      RequireClose(got, Floats(want), 1e-6f);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
