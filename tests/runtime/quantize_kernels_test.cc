// CPU kernels of linear quantization: rounding (ties to even), saturation, per-axis and
// blocked parameters, and the integer products against plain loops written here.
#include <cmath>
#include <cstdint>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using ir::DType;
using testing::F32;
using testing::Floats;
using testing::OneOp;

template <typename T>
Tensor Typed(DType t, std::vector<int64_t> shape, const std::vector<int>& v) {
  Tensor out = Tensor::Allocate(t, std::move(shape));
  REQUIRE(static_cast<int64_t>(v.size()) == out.num_elements());
  for (size_t i = 0; i < v.size(); ++i) out.data<T>()[i] = static_cast<T>(v[i]);
  return out;
}
Tensor U8(std::vector<int64_t> shape, const std::vector<int>& v) {
  return Typed<uint8_t>(DType::kU8, std::move(shape), v);
}
Tensor I8(std::vector<int64_t> shape, const std::vector<int>& v) {
  return Typed<int8_t>(DType::kI8, std::move(shape), v);
}
template <typename T>
std::vector<int> Ints(const Tensor& t) {
  return {t.data<T>(), t.data<T>() + t.num_elements()};
}

TEST_CASE("QuantizeLinear per axis rounds ties to even and saturates", "[runtime][quantize]") {
  OneOp t;
  t.Input("x", F32({2, 4}, {1, 3, 5, -300, 2.5f, -2.5f, 7, 1000}));
  t.Input("scale", F32({2}, {2, 1}));
  t.Input("zp", I8({2}, {0, 10}));
  auto y = t.Run("QuantizeLinear", {{"axis", int64_t{0}}});
  REQUIRE(y[0].dtype() == DType::kI8);
  // Row 0: 0.5, 1.5, 2.5 -> 0, 2, 2; -150 saturates. Row 1: 2.5 -> 2, -2.5 -> -2, +10.
  REQUIRE(Ints<int8_t>(y[0]) == std::vector<int>{0, 2, 2, -128, 12, 8, 17, 127});
}

TEST_CASE("QuantizeLinear blocked, with a shorter last block and output_dtype",
          "[runtime][quantize]") {
  OneOp t(21);
  t.Input("x", F32({2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5}));
  // Blocks of 2 along axis 1: [0, 1], [2, 3], [4].
  t.Input("scale", F32({2, 3}, {1, 2, 4, 0.5f, 1, 0.25f}));
  auto y = t.Run(
      "QuantizeLinear",
      {{"axis", int64_t{1}}, {"block_size", int64_t{2}}, {"output_dtype", int64_t{5}}});  // int16
  REQUIRE(y[0].dtype() == DType::kI16);
  // 3 / 2 = 1.5 -> 2, 4 / 2 = 2, 5 / 4 = 1.25 -> 1; row 1: -2, -4, -3, -4, -20.
  REQUIRE(Ints<int16_t>(y[0]) == std::vector<int>{1, 2, 2, 2, 1, -2, -4, -3, -4, -20});
}

TEST_CASE("DequantizeLinear blocked and per tensor", "[runtime][quantize]") {
  {
    OneOp t(21);
    t.Input("x", U8({3, 2}, {10, 20, 30, 40, 50, 60}));
    t.Input("scale", F32({2, 2}, {0.5f, 2, 1, 4}));
    t.Input("zp", U8({2, 2}, {10, 0, 20, 30}));
    auto y = t.Run("DequantizeLinear", {{"axis", int64_t{0}}, {"block_size", int64_t{2}}});
    // Rows 0-1 use block 0, row 2 block 1.
    REQUIRE(Floats(y[0]) == std::vector<float>{0, 40, 10, 80, 30, 120});
  }
  {
    OneOp t;
    t.Input("x", Typed<int32_t>(DType::kI32, {3}, {-7, 0, 1 << 20}));
    t.Input("scale", F32({}, {0.25f}));
    auto y = t.Run("DequantizeLinear");
    REQUIRE(Floats(y[0]) == std::vector<float>{-1.75f, 0, 262144});
  }
}

TEST_CASE("DynamicQuantizeLinear includes 0 in the range", "[runtime][quantize]") {
  OneOp t;
  t.Input("x", F32({4}, {1, 2, 3, 5.1f}));
  auto y = t.Run("DynamicQuantizeLinear", {}, 3);
  // Range [0, 5.1]: scale 0.02, zero point 0; 1 / 0.02 = 50, 5.1 / 0.02 = 255.
  REQUIRE(std::abs(y[1].data<float>()[0] - 0.02f) < 1e-7f);
  REQUIRE(Ints<uint8_t>(y[2]) == std::vector<int>{0});
  REQUIRE(Ints<uint8_t>(y[0]) == std::vector<int>{50, 100, 150, 255});

  OneOp n;
  n.Input("x", F32({3}, {-2.55f, 0, 2.55f}));
  y = n.Run("DynamicQuantizeLinear", {}, 3);
  // Range [-2.55, 2.55]: scale 0.02, zero point round(127.5) = 128 (ties to even).
  REQUIRE(Ints<uint8_t>(y[2]) == std::vector<int>{128});
  REQUIRE(Ints<uint8_t>(y[0]) == std::vector<int>{0, 128, 255});
}

TEST_CASE("MatMulInteger: per-row and per-column zero points, broadcast batch",
          "[runtime][quantize]") {
  const int64_t b = 2, m = 3, k = 4, n = 2;
  std::vector<int> a(static_cast<size_t>(b * m * k)), w(static_cast<size_t>(k * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 37) % 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int>((i * 53 + 11) % 256);
  const std::vector<int> azp = {3, 130, 255}, bzp = {7, 200};
  OneOp t;
  t.Input("A", U8({b, m, k}, a));
  t.Input("B", U8({k, n}, w));
  t.Input("azp", U8({m}, azp));
  t.Input("bzp", U8({n}, bzp));
  auto y = t.Run("MatMulInteger");
  REQUIRE(y[0].dtype() == DType::kI32);
  REQUIRE(y[0].shape() == std::vector<int64_t>{b, m, n});
  std::vector<int> want;
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += (a[static_cast<size_t>((bi * m + i) * k + p)] - azp[static_cast<size_t>(i)]) *
                 (w[static_cast<size_t>(p * n + j)] - bzp[static_cast<size_t>(j)]);
        }
        want.push_back(acc);
      }
    }
  }
  REQUIRE(Ints<int32_t>(y[0]) == want);
}

TEST_CASE("QLinearMatMul saturates the requantized result", "[runtime][quantize]") {
  OneOp t;
  t.Input("a", I8({1, 2}, {100, -100}));
  t.Input("as", F32({}, {1}));
  t.Input("azp", I8({}, {0}));
  t.Input("b", I8({2, 3}, {2, -2, 1, 0, 0, 1}));
  t.Input("bs", F32({}, {0.5f}));
  t.Input("bzp", I8({}, {0}));
  t.Input("ys", F32({}, {0.25f}));
  t.Input("yzp", I8({}, {1}));
  auto y = t.Run("QLinearMatMul");
  // C = [200, -200, 0] * 0.5 / 0.25 + 1 = [401, -399, 1]: saturated to [127, -128, 1].
  REQUIRE(Ints<int8_t>(y[0]) == std::vector<int>{127, -128, 1});
}

// conv(x - x_zp, w - w_zp[m]) for [1, C, H, W] x and [M, C / group, kh, kw] w, stride s,
// symmetric padding p.
std::vector<int> NaiveConv(const std::vector<int>& x, int c, int h, int wd,
                           const std::vector<int>& w, int m, int kh, int kw, int group, int s,
                           int p, int xzp, const std::vector<int>& wzp, int* oh, int* ow) {
  *oh = (h + 2 * p - kh) / s + 1;
  *ow = (wd + 2 * p - kw) / s + 1;
  const int cg = c / group, mg = m / group;
  std::vector<int> y;
  for (int oc = 0; oc < m; ++oc) {
    for (int i = 0; i < *oh; ++i) {
      for (int j = 0; j < *ow; ++j) {
        int acc = 0;
        for (int ci = 0; ci < cg; ++ci) {
          for (int a = 0; a < kh; ++a) {
            for (int bb = 0; bb < kw; ++bb) {
              const int r = i * s + a - p, q = j * s + bb - p;
              if (r < 0 || r >= h || q < 0 || q >= wd) continue;
              const int ic = (oc / mg) * cg + ci;
              acc += (x[static_cast<size_t>((ic * h + r) * wd + q)] - xzp) *
                     (w[static_cast<size_t>(((oc * cg + ci) * kh + a) * kw + bb)] -
                      wzp[static_cast<size_t>(oc)]);
            }
          }
        }
        y.push_back(acc);
      }
    }
  }
  return y;
}

TEST_CASE("ConvInteger and QLinearConv: groups, strides, padding, per-channel weights",
          "[runtime][quantize]") {
  const int c = 4, h = 5, wd = 4, m = 4, kh = 3, kw = 2, group = 2;
  std::vector<int> x(c * h * wd), w(m * (c / group) * kh * kw);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int>((i * 29 + 5) % 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int>((i * 71 + 3) % 256);
  const std::vector<int> wzp = {128, 0, 255, 17};
  int oh = 0, ow = 0;
  const std::vector<int> want = NaiveConv(x, c, h, wd, w, m, kh, kw, group, 2, 1, 9, wzp, &oh, &ow);
  const ir::Attributes attrs = {{"group", int64_t{group}},
                                {"strides", std::vector<int64_t>{2, 2}},
                                {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  {
    OneOp t;
    t.Input("x", U8({1, c, h, wd}, x));
    t.Input("w", U8({m, c / group, kh, kw}, w));
    t.Input("xzp", U8({}, {9}));
    t.Input("wzp", U8({m}, wzp));
    auto y = t.Run("ConvInteger", attrs);
    REQUIRE(y[0].shape() == std::vector<int64_t>{1, m, oh, ow});
    REQUIRE(Ints<int32_t>(y[0]) == want);
  }
  {
    const std::vector<float> ws = {0.01f, 0.02f, 0.005f, 0.03f};
    const std::vector<int> bias = {100, -2000, 0, 50};
    OneOp t;
    t.Input("x", U8({1, c, h, wd}, x));
    t.Input("xs", F32({}, {0.5f}));
    t.Input("xzp", U8({}, {9}));
    t.Input("w", U8({m, c / group, kh, kw}, w));
    t.Input("ws", F32({m}, ws));
    t.Input("wzp", U8({m}, wzp));
    t.Input("ys", F32({}, {4}));
    t.Input("yzp", U8({}, {128}));
    t.Input("B", Typed<int32_t>(DType::kI32, {m}, bias));
    auto y = t.Run("QLinearConv", attrs);
    const size_t per = static_cast<size_t>(oh * ow);
    std::vector<int> q;
    for (size_t i = 0; i < want.size(); ++i) {
      const size_t oc = i / per;
      const double v = (want[i] + bias[oc]) * static_cast<double>(0.5f * ws[oc] / 4.0f) + 128;
      q.push_back(static_cast<int>(std::min(255.0, std::max(0.0, std::nearbyint(v)))));
    }
    REQUIRE(Ints<uint8_t>(y[0]) == q);
  }
}

}  // namespace
}  // namespace tpc::runtime
