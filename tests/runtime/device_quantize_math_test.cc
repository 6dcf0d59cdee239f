// The quantization kernels' math (tpc/runtime/math/quantize.h), computed as quantize.cu's
// threads compute each element (its scale and zero point at QuantIndex::At, half scales
// loaded through FloatIO; DynamicQuantizeLinear's extremes folded as the Reduce rows fold
// them), against the CPU backend's kernels.
#include <cstdint>
#include <limits>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/quantize.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using ir::DType;
using math::FloatKind;
using math::QuantIndex;
using testing::BlockFold;
using testing::F32;
using testing::OneOp;
using testing::Random;

// x spread over a few hundred quantization steps, with exact ties (k + 0.5 steps).
Tensor Spread(const std::vector<int64_t>& shape, uint32_t seed) {
  Tensor x = Random(shape, seed);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    x.data<float>()[i] = i % 7 == 0 ? static_cast<float>(i % 11) - 4.5f : x.data<float>()[i] * 90;
  }
  return x;
}

template <typename T>
Tensor Ints(DType t, const std::vector<int64_t>& shape, int64_t start) {
  Tensor out = Tensor::Allocate(t, shape);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    out.data<T>()[i] = static_cast<T>((start + 37 * i) % 101 - (std::is_signed_v<T> ? 50 : 0));
  }
  return out;
}

struct Layout {
  const char* name;
  std::vector<int64_t> scale_shape;
  ir::Attributes attrs;
  QuantIndex q;
};

// x [2, 6, 4]: per tensor, per axis 1, and blocked by 4 along axis 1 (opset 21).
std::vector<Layout> Layouts() {
  QuantIndex tensor, axis, blocked;
  axis.mode = QuantIndex::Mode::kAxis;
  axis.dim = 6;
  axis.inner = 4;
  blocked = axis;
  blocked.mode = QuantIndex::Mode::kBlocked;
  blocked.block = 4;
  blocked.blocks = 2;
  return {{"per tensor", {}, {}, tensor},
          {"per axis", {6}, {{"axis", int64_t{1}}}, axis},
          {"blocked", {2, 2, 4}, {{"axis", int64_t{1}}, {"block_size", int64_t{4}}}, blocked}};
}

Tensor Scales(const std::vector<int64_t>& shape) {
  Tensor s = Random(shape, 7);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    s.data<float>()[i] = 0.25f + static_cast<float>(i % 5) * 0.5f;
  }
  return s;
}

template <typename T>
void CheckQuantize(DType type) {
  const Tensor x = Spread({2, 6, 4}, 5);
  for (const Layout& l : Layouts()) {
    INFO(l.name << ", " << ir::DTypeName(type));
    const Tensor scale = Scales(l.scale_shape);
    const Tensor zp = Ints<T>(type, l.scale_shape, 3);
    OneOp o(21);
    o.Input("x", x);
    o.Input("scale", scale);
    o.Input("zp", zp);
    const Tensor want = o.Run("QuantizeLinear", l.attrs)[0];
    REQUIRE(want.dtype() == type);
    const double lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      INFO("element " << i);
      const int64_t j = l.q.At(i);
      const auto got = static_cast<T>(math::QuantizeElement(
          x.data<float>()[i], scale.data<float>()[j], zp.data<T>()[j], lo, hi));
      REQUIRE(static_cast<int>(got) == static_cast<int>(want.data<T>()[i]));
    }
  }
}

TEST_CASE("QuantizeLinear element math equals the CPU kernel", "[runtime][device-math]") {
  CheckQuantize<uint8_t>(DType::kU8);
  CheckQuantize<int8_t>(DType::kI8);
  CheckQuantize<int16_t>(DType::kI16);
}

// The kernel's f16 path: the scale loaded from f16 storage, the result stored as f16 (the
// CPU computes in f32 and converts).
template <FloatKind K, typename T>
void CheckDequantize(DType type, DType float_type) {
  const Tensor x = Ints<T>(type, {2, 6, 4}, 11);
  using IO = math::FloatIO<K>;
  for (const Layout& l : Layouts()) {
    INFO(l.name << ", " << ir::DTypeName(type) << " to " << ir::DTypeName(float_type));
    const Tensor scale32 = Scales(l.scale_shape);
    Tensor scale = Tensor::Allocate(float_type, l.scale_shape);
    for (int64_t i = 0; i < scale.num_elements(); ++i) {
      scale.data<typename IO::Storage>()[i] = IO::Store(scale32.data<float>()[i]);
    }
    const Tensor zp = Ints<T>(type, l.scale_shape, 5);
    OneOp o(21);
    o.Input("x", x);
    o.Input("scale", scale);
    o.Input("zp", zp);
    const Tensor want = o.Run("DequantizeLinear", l.attrs)[0];
    REQUIRE(want.dtype() == float_type);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      INFO("element " << i);
      const int64_t j = l.q.At(i);
      const typename IO::Storage got = IO::Store(static_cast<float>(math::DequantizeElement(
          x.data<T>()[i], zp.data<T>()[j], IO::Load(scale.data<typename IO::Storage>()[j]))));
      REQUIRE(got == want.data<typename IO::Storage>()[i]);
    }
  }
}

TEST_CASE("DequantizeLinear element math equals the CPU kernel", "[runtime][device-math]") {
  CheckDequantize<FloatKind::kF32, uint8_t>(DType::kU8, DType::kF32);
  CheckDequantize<FloatKind::kF32, int16_t>(DType::kI16, DType::kF32);
  CheckDequantize<FloatKind::kF16, int8_t>(DType::kI8, DType::kF16);
  CheckDequantize<FloatKind::kBF16, uint8_t>(DType::kU8, DType::kBF16);
}

// DynamicQuantizeLinear: the extremes as two Reduce rows (kMin, kMax folded as a block),
// the parameters from them, then each element; all positive, all negative, mixed, with a
// NaN (skipped by the range, as std::min/max skip it), and an empty x (the extremes'
// scratch zeroed).
TEST_CASE("DynamicQuantizeLinear math equals the CPU kernel", "[runtime][device-math]") {
  for (const float shift : {0.0f, 200.0f, -200.0f}) {
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{777}}) {
      INFO("shift " << shift << ", " << n << " elements");
      Tensor x = Spread({n}, 9);
      for (int64_t i = 0; i < n; ++i) x.data<float>()[i] += shift;
      if (n > 2) x.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();  // skipped
      OneOp o;
      o.Input("x", x);
      const std::vector<Tensor> want = o.Run("DynamicQuantizeLinear", {}, 3);
      const auto extreme = [&](math::ReduceKind k) {
        if (n == 0) return 0.0f;
        const float e = BlockFold<float>(
            n, 256, math::ReduceInit(k),
            [&](float acc, int64_t j) { return math::ReduceCombine(k, acc, x.data<float>()[j]); },
            [&](float a, float b) { return math::ReduceCombine(k, a, b); });
        return math::ReduceFinish(k, e, n);
      };
      const math::DynamicQuant p = math::DynamicQuantParams(extreme(math::ReduceKind::kMinNumber),
                                                            extreme(math::ReduceKind::kMaxNumber));
      CHECK(p.scale == want[1].data<float>()[0]);
      CHECK(static_cast<uint8_t>(p.zero_point) == want[2].data<uint8_t>()[0]);
      for (int64_t i = 0; i < n; ++i) {
        INFO("element " << i);
        REQUIRE(static_cast<uint8_t>(
                    math::QuantizeElement(x.data<float>()[i], p.scale, p.zero_point, 0.0, 255.0)) ==
                want[0].data<uint8_t>()[i]);
      }
    }
  }
}

// The integer products as quantize_ops.cc computes them: each operand centered on its zero
// point in f64 through the zero point's broadcast view (per row of A, per column of B), the
// product in f64 (exact, so any order of summation gives it), then wrapped to int32
// (MatMulInteger) or requantized through the scales' views (QLinearMatMul).
TEST_CASE("MatMulInteger and QLinearMatMul element math equal the CPU kernels",
          "[runtime][device-math]") {
  const int64_t batch = 2, m = 3, k = 5, n = 4;
  const Tensor a = Ints<uint8_t>(DType::kU8, {batch, m, k}, 2);
  const Tensor b = Ints<uint8_t>(DType::kU8, {k, n}, 9);
  const Tensor a_zp = Ints<uint8_t>(DType::kU8, {m}, 4);  // per row of A
  const Tensor b_zp = Ints<uint8_t>(DType::kU8, {n}, 6);  // per column of B
  const auto centered = [](const Tensor& x, const Tensor& zp, const math::StridedView& v) {
    std::vector<double> out(static_cast<size_t>(x.num_elements()));
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      out[static_cast<size_t>(i)] = static_cast<double>(x.data<uint8_t>()[i]) -
                                    static_cast<double>(zp.data<uint8_t>()[v.At(i)]);
    }
    return out;
  };
  const std::vector<double> ca = centered(a, a_zp, math::BroadcastView({m, 1}, {batch, m, k}));
  const std::vector<double> cb = centered(b, b_zp, math::BroadcastView({n}, {k, n}));
  std::vector<double> c(static_cast<size_t>(batch * m * n));
  for (int64_t r = 0; r < batch * m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t q = 0; q < k; ++q) {
        c[static_cast<size_t>(r * n + j)] +=
            ca[static_cast<size_t>(r * k + q)] * cb[static_cast<size_t>(q * n + j)];
      }
    }
  }
  OneOp o;
  o.Input("a", a);
  o.Input("b", b);
  o.Input("a_zp", a_zp);
  o.Input("b_zp", b_zp);
  const Tensor want = o.Run("MatMulInteger")[0];
  REQUIRE(want.num_elements() == static_cast<int64_t>(c.size()));
  for (size_t i = 0; i < c.size(); ++i) {
    INFO("element " << i);
    REQUIRE(math::WrapInt32(c[i]) == want.data<int32_t>()[i]);
  }

  // QLinearMatMul: a_scale one value, b_scale per column, y_scale and y_zero_point one value.
  OneOp q;
  q.Input("a", a);
  q.Input("a_scale", F32({}, {0.05f}));
  q.Input("a_zp", a_zp);
  q.Input("b", b);
  q.Input("b_scale", F32({n}, {0.02f, 0.03f, 0.01f, 0.04f}));
  q.Input("b_zp", b_zp);
  q.Input("y_scale", F32({}, {0.07f}));
  Tensor y_zp = Tensor::Allocate(DType::kU8, {});
  y_zp.data<uint8_t>()[0] = 120;
  q.Input("y_zp", y_zp);
  const Tensor wq = q.Run("QLinearMatMul")[0];
  const math::StridedView vb = math::BroadcastView({n}, {batch, m, n});
  const float b_scale[] = {0.02f, 0.03f, 0.01f, 0.04f};
  for (size_t i = 0; i < c.size(); ++i) {
    INFO("element " << i);
    const auto got = static_cast<uint8_t>(math::RequantizeElement(
        c[i], 0.05f, b_scale[vb.At(static_cast<int64_t>(i))], 0.07f, 120.0, 0.0, 255.0));
    REQUIRE(got == wq.data<uint8_t>()[i]);
  }
}

// The integer convolutions as quantize_ops.cc runs them: X centered on its zero point and
// W on its per-channel one in f64, im2col of the centered image (math::Im2ColElement on
// doubles), the f64 GEMM per group, then wrapped to int32 (ConvInteger) or, with the int32
// bias and per-channel w_scale, requantized (QLinearConv); against the CPU kernels.
TEST_CASE("ConvInteger and QLinearConv by f64 im2col and GEMM equal the CPU kernels",
          "[runtime][device-math]") {
  const int64_t n = 2, c = 4, m = 6, group = 2, cg = c / group, mg = m / group;
  const Tensor x = Ints<uint8_t>(DType::kU8, {n, c, 5, 4}, 3);
  const Tensor w = Ints<int8_t>(DType::kI8, {m, cg, 3, 2}, 8);
  Tensor x_zp = Tensor::Allocate(DType::kU8, {}), w_zp = Ints<int8_t>(DType::kI8, {m}, 5);
  x_zp.data<uint8_t>()[0] = 17;
  math::ConvGeometry g;
  g.spatial = 2;
  const int64_t in[2] = {5, 4}, kernel[2] = {3, 2}, strides[2] = {2, 1}, pads[2] = {1, 0};
  for (int d = 0; d < 2; ++d) {
    g.in[d] = in[d];
    g.kernel[d] = kernel[d];
    g.strides[d] = strides[d];
    g.dilations[d] = 1;
    g.pad_begin[d] = g.pad_end[d] = pads[d];
    g.out[d] = (in[d] + 2 * pads[d] - kernel[d]) / strides[d] + 1;
    g.taps *= kernel[d];
    g.outs *= g.out[d];
    g.in_size *= in[d];
  }
  const ir::Attributes attrs = {{"group", group},
                                {"strides", std::vector<int64_t>{2, 1}},
                                {"pads", std::vector<int64_t>{1, 0, 1, 0}}};
  std::vector<double> xc(static_cast<size_t>(x.num_elements())),
      wc(static_cast<size_t>(w.num_elements()));
  for (size_t i = 0; i < xc.size(); ++i) xc[i] = x.data<uint8_t>()[i] - 17.0;
  const int64_t per = cg * g.taps;
  for (size_t i = 0; i < wc.size(); ++i) {
    wc[i] = static_cast<double>(w.data<int8_t>()[i]) -
            w_zp.data<int8_t>()[i / static_cast<size_t>(per)];
  }
  const int64_t rows = cg * g.taps;
  std::vector<double> acc(static_cast<size_t>(n * m * g.outs)),
      col(static_cast<size_t>(rows * g.outs));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t grp = 0; grp < group; ++grp) {
      const double* xg = xc.data() + (i * c + grp * cg) * g.in_size;
      for (int64_t e = 0; e < rows * g.outs; ++e) math::Im2ColElement(g, xg, col.data(), e);
      for (int64_t r = 0; r < mg; ++r) {
        for (int64_t p = 0; p < g.outs; ++p) {
          double sum = 0;
          for (int64_t q = 0; q < rows; ++q) {
            sum += wc[static_cast<size_t>((grp * mg + r) * rows + q)] *
                   col[static_cast<size_t>(q * g.outs + p)];
          }
          acc[static_cast<size_t>((i * m + grp * mg + r) * g.outs + p)] = sum;
        }
      }
    }
  }
  OneOp o;
  o.Input("x", x);
  o.Input("w", w);
  o.Input("x_zp", x_zp);
  o.Input("w_zp", w_zp);
  const Tensor want = o.Run("ConvInteger", attrs)[0];
  REQUIRE(want.num_elements() == static_cast<int64_t>(acc.size()));
  for (size_t i = 0; i < acc.size(); ++i) {
    INFO("element " << i);
    REQUIRE(math::WrapInt32(acc[i]) == want.data<int32_t>()[i]);
  }

  Tensor bias = Tensor::Allocate(DType::kI32, {m});
  std::vector<float> w_scale(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    bias.data<int32_t>()[j] = static_cast<int32_t>(j * 37 - 90);
    w_scale[static_cast<size_t>(j)] = 0.002f * static_cast<float>(j + 1);
  }
  Tensor y_zp = Tensor::Allocate(DType::kU8, {});
  y_zp.data<uint8_t>()[0] = 100;
  OneOp q;
  q.Input("x", x);
  q.Input("x_scale", F32({}, {0.05f}));
  q.Input("x_zp", x_zp);
  q.Input("w", w);
  q.Input("w_scale", F32({m}, w_scale));
  q.Input("w_zp", w_zp);
  q.Input("y_scale", F32({}, {0.09f}));
  q.Input("y_zp", y_zp);
  q.Input("bias", bias);
  const Tensor wq = q.Run("QLinearConv", attrs)[0];
  for (size_t i = 0; i < acc.size(); ++i) {
    INFO("element " << i);
    const size_t oc = (i / static_cast<size_t>(g.outs)) % static_cast<size_t>(m);
    const auto got = static_cast<uint8_t>(math::RequantizeElement(
        acc[i] + bias.data<int32_t>()[oc], 0.05f, w_scale[oc], 0.09f, 100.0, 0.0, 255.0));
    REQUIRE(got == wq.data<uint8_t>()[i]);
  }
}

}  // namespace
}  // namespace tpc::runtime
