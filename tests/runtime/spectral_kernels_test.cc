// CPU kernels of DFT and STFT on cases the ONNX node tests leave out: one-sided output,
// dft_length padding, the inverse, a complex input, STFT of a complex signal. Expected values
// are worked out by hand or by the defining sum, written out below.
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::Floats;
using testing::I64;
using testing::OneOp;

TEST_CASE("DFT of [1, 2, 3, 4]: full, one-sided, inverse", "[runtime][kernels]") {
  // X = (10, -2 + 2i, -2, -2 - 2i).
  OneOp t(20);
  t.Input("x", F32({1, 4, 1}, {1, 2, 3, 4}));
  auto full = t.Run("DFT");
  CHECK_THAT(Floats(full[0]),
             Catch::Matchers::Approx(std::vector<float>{10, 0, -2, 2, -2, 0, -2, -2}).margin(1e-5));

  OneOp o(20);
  o.Input("x", F32({1, 4, 1}, {1, 2, 3, 4}));
  auto one = o.Run("DFT", {{"onesided", int64_t{1}}});
  REQUIRE(one[0].shape() == std::vector<int64_t>{1, 3, 2});
  CHECK_THAT(Floats(one[0]),
             Catch::Matchers::Approx(std::vector<float>{10, 0, -2, 2, -2, 0}).margin(1e-5));

  OneOp inv(20);
  inv.Input("x", F32({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}));
  auto back = inv.Run("DFT", {{"inverse", int64_t{1}}});
  CHECK_THAT(Floats(back[0]),
             Catch::Matchers::Approx(std::vector<float>{1, 0, 2, 0, 3, 0, 4, 0}).margin(1e-5));
}

TEST_CASE("DFT along axis 1 of [1, 3, 2, 2], zero-padded to dft_length 5", "[runtime][kernels]") {
  // A complex input [batch 1, 3, 2, complex]; the DFT runs along the 3 (padded to 5).
  std::vector<float> x = {1, 0.5f, -1, 2, 0, 1, 3, -2, 2, 0, 1, 1};
  OneOp t(20);
  t.Input("x", F32({1, 3, 2, 2}, x));
  t.Input("dft_length", I64({}, {5}));
  t.Input("axis", I64({}, {1}));
  auto y = t.Run("DFT");
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 5, 2, 2});
  std::vector<float> want(20);
  for (int col = 0; col < 2; ++col) {
    for (int k = 0; k < 5; ++k) {
      std::complex<double> s = 0;
      for (int j = 0; j < 3; ++j) {
        const std::complex<double> v(x[static_cast<size_t>((j * 2 + col) * 2)],
                                     x[static_cast<size_t>((j * 2 + col) * 2 + 1)]);
        s += v * std::polar(1.0, -2 * std::numbers::pi * j * k / 5);
      }
      want[static_cast<size_t>((k * 2 + col) * 2)] = static_cast<float>(s.real());
      want[static_cast<size_t>((k * 2 + col) * 2 + 1)] = static_cast<float>(s.imag());
    }
  }
  CHECK_THAT(Floats(y[0]), Catch::Matchers::Approx(want).margin(1e-5));
}

TEST_CASE("STFT: windowed frames, two-sided for a complex signal", "[runtime][kernels]") {
  // Signal 0..5 (+ i * 1 on every element), frames of 4 every 2: [0..3] and [2..5];
  // window (1, 2, 2, 1). Bin k of frame f: sum_j w_j * s_(2f + j) * e^(-2 pi i j k / 4).
  std::vector<float> sig;
  for (int i = 0; i < 6; ++i) sig.insert(sig.end(), {static_cast<float>(i), 1});
  const std::vector<float> w = {1, 2, 2, 1};
  OneOp t(17);
  t.Input("signal", F32({1, 6, 2}, sig));
  t.Input("step", I64({}, {2}));
  t.Input("window", F32({4}, w));
  auto y = t.Run("STFT", {{"onesided", int64_t{0}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 2, 4, 2});
  std::vector<float> want;
  for (int f = 0; f < 2; ++f) {
    for (int k = 0; k < 4; ++k) {
      std::complex<double> s = 0;
      for (int j = 0; j < 4; ++j) {
        s += static_cast<double>(w[static_cast<size_t>(j)]) * std::complex<double>(2 * f + j, 1) *
             std::polar(1.0, -2 * std::numbers::pi * j * k / 4);
      }
      want.push_back(static_cast<float>(s.real()));
      want.push_back(static_cast<float>(s.imag()));
    }
  }
  CHECK_THAT(Floats(y[0]), Catch::Matchers::Approx(want).margin(1e-4));
}

}  // namespace
}  // namespace tpc::runtime
