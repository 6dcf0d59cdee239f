// The sampling kernels' math (tpc/runtime/math/grid_sample.h) as grid_sample.cu's threads
// compute each output element (its point's taps found again per channel, loads and the
// store in the kernel's float type), against the CPU kernels: GridSample in each mode and
// padding, with and without align_corners, 2-D and 3-D, points inside and far outside;
// AffineGrid 2-D and 3-D; RoiAlign, one thread per cell; DFT and STFT from f16 storage.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/grid_sample.h"
#include "tpc/runtime/math/roi_align.h"
#include "tpc/runtime/math/spectral.h"

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

// RoiAlign as roi_align.cu's threads compute each cell (its region's bins found again per
// cell and channel), avg and max, both coordinate modes, adaptive and fixed sampling, a
// region partly outside the image; against the CPU kernel.
TEST_CASE("RoiAlign cell math equals the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({2, 3, 6, 7}, 35);
  const Tensor rois = testing::F32(
      {3, 4}, {0.5f, 1.0f, 4.0f, 5.5f, -1.0f, 2.0f, 8.5f, 3.0f, 2.0f, 0.0f, 2.5f, 6.0f});
  const std::vector<int64_t> batch = {1, 0, 1};
  for (const std::string mode : {"avg", "max"}) {
    for (const std::string coord : {"half_pixel", "output_half_pixel"}) {
      for (const int64_t ratio : {int64_t{0}, int64_t{2}}) {
        INFO(mode << ", " << coord << ", sampling_ratio " << ratio);
        OneOp o(16);
        o.Input("x", x);
        o.Input("rois", rois);
        o.Input("batch", testing::I64({3}, batch));
        const Tensor want = o.Run("RoiAlign", {{"mode", mode},
                                               {"coordinate_transformation_mode", coord},
                                               {"output_height", int64_t{2}},
                                               {"output_width", int64_t{3}},
                                               {"sampling_ratio", ratio},
                                               {"spatial_scale", 0.75f}})[0];
        math::RoiAlignParams p;
        p.channels = 3;
        p.height = 6;
        p.width = 7;
        p.out_h = 2;
        p.out_w = 3;
        p.ratio = ratio;
        p.scale = 0.75f;
        p.half_pixel = coord == "half_pixel";
        p.max = mode == "max";
        std::vector<float> got(static_cast<size_t>(want.num_elements()));
        for (int64_t i = 0; i < want.num_elements(); ++i) {  // as RoiAlignKernel
          const int64_t cell = i % 6, c = (i / 6) % 3, r = i / 18;
          double roi[4];
          for (int q = 0; q < 4; ++q) roi[q] = rois.data<float>()[r * 4 + q];
          const math::RoiBins bins = math::RoiAlignBins(p, roi);
          const float* plane = x.data<float>() + (batch[static_cast<size_t>(r)] * 3 + c) * 42;
          got[static_cast<size_t>(i)] =
              static_cast<float>(math::RoiAlignCell(p, bins, cell / 3, cell % 3, [&](int64_t at) {
                return static_cast<double>(plane[at]);
              }));
        }
        RequireClose(got, Floats(want), 1e-6f);
      }
    }
  }
}

// DFT (complex input, a dft_length longer than the axis, inverse) and STFT (a window, a
// step) as spectral.cu's threads compute each output bin from f16 storage, stored
// back as f16: the CPU kernel's bits (it converts f16 to f32 and back).
TEST_CASE("DFT and STFT element math from f16 equal the CPU kernels", "[runtime][device-math]") {
  using IO = math::FloatIO<math::FloatKind::kF16>;
  const auto half = [](const Tensor& t) {
    Tensor h = Tensor::Allocate(ir::DType::kF16, t.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i)
      h.data<uint16_t>()[i] = IO::Store(t.data<float>()[i]);
    return h;
  };
  const auto load = [](const Tensor& h) {
    return [&h](int64_t j) { return static_cast<double>(IO::Load(h.data<uint16_t>()[j])); };
  };
  const Tensor x = half(Random({2, 5, 3, 2}, 61));
  OneOp o(20);
  o.Input("x", x);
  o.Input("n", testing::I64({}, {7}));
  o.Input("axis", testing::I64({}, {1}));
  const Tensor want = o.Run("DFT", {{"inverse", int64_t{1}}})[0];
  math::DftLayout l;
  l.outer = 2;
  l.axis_len = 5;
  l.inner = 3;
  l.comps = 2;
  l.n = 7;
  l.bins = 7;
  l.inverse = true;
  REQUIRE(want.num_elements() == 2 * 7 * 3 * 2);
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    INFO("DFT element " << i);
    const math::ComplexD v = math::DftOutputBin(l, i / 2, load(x));  // as DftKernel
    CHECK(IO::Store(static_cast<float>(i % 2 == 0 ? v.re : v.im)) == want.data<uint16_t>()[i]);
  }
  const Tensor signal = half(Random({2, 20, 1}, 62)), window = half(Random({8}, 63));
  OneOp s(17);
  s.Input("signal", signal);
  s.Input("step", testing::I64({}, {3}));
  s.Input("window", window);
  const Tensor want_s = s.Run("STFT")[0];
  math::StftLayout sl;
  sl.length = 20;
  sl.step = 3;
  sl.frame = 8;
  sl.frames = 1 + (20 - 8) / 3;
  sl.bins = 8 / 2 + 1;
  REQUIRE(want_s.num_elements() == 2 * sl.frames * sl.bins * 2);
  for (int64_t i = 0; i < want_s.num_elements(); ++i) {
    INFO("STFT element " << i);
    const math::ComplexD v = math::StftOutputBin(sl, i / 2, load(signal), load(window));
    CHECK(IO::Store(static_cast<float>(i % 2 == 0 ? v.re : v.im)) == want_s.data<uint16_t>()[i]);
  }
}

}  // namespace
}  // namespace tpc::runtime
