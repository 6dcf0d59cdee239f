// The math the CUDA kernels share with the host (tpc/runtime/math: strided views,
// element functions, row statistics, half conversions), run here element by element and
// row by row as the kernels' threads do, against the CPU backend's kernels.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/nbits.h"
#include "tpc/runtime/math/pointwise.h"
#include "tpc/runtime/math/rotary.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/half.h"

namespace tpc::runtime {
namespace {

using math::FloatKind;
using math::StridedView;
using testing::F32;
using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;
using testing::WarpFold;

TEST_CASE("Strided views broadcast, and simplified views address the same elements",
          "[runtime][device-math]") {
  const std::vector<std::vector<int64_t>> ins = {{3, 1, 5}, {4, 1}, {5}, {2, 3, 4, 5}, {1}};
  const std::vector<int64_t> out = {2, 3, 4, 5};
  for (const auto& in : ins) {
    StridedView v = math::BroadcastView(in, out), c = math::ContiguousView(out);
    StridedView vs = v, cs = c;
    math::Simplify({&vs, &cs});
    CHECK(vs.rank <= v.rank);
    const std::vector<int64_t> st = math::ContiguousStrides(in);
    for (int64_t i = 0; i < 120; ++i) {
      // The element numpy broadcasting reads: each output index clamped to the input's dims.
      int64_t rem = i, off = 0;
      for (int d = 3; d >= 0; --d) {
        const int64_t idx = rem % out[static_cast<size_t>(d)];
        rem /= out[static_cast<size_t>(d)];
        const int lead = 4 - static_cast<int>(in.size());
        if (d >= lead && in[static_cast<size_t>(d - lead)] != 1)
          off += idx * st[static_cast<size_t>(d - lead)];
      }
      REQUIRE(v.At(i) == off);
      REQUIRE(vs.At(i) == off);
      REQUIRE(cs.At(i) == i);
    }
  }
}

TEST_CASE("Binary element math with broadcasting equals the CPU kernels",
          "[runtime][device-math]") {
  const Tensor a = Random({2, 3, 4}, 1), b = Random({3, 1}, 2);
  const std::vector<std::pair<std::string, math::BinaryOp>> ops = {
      {"Add", math::BinaryOp::kAdd}, {"Sub", math::BinaryOp::kSub}, {"Mul", math::BinaryOp::kMul},
      {"Div", math::BinaryOp::kDiv}, {"Max", math::BinaryOp::kMax}, {"Min", math::BinaryOp::kMin}};
  for (const auto& [name, op] : ops) {
    INFO(name);
    OneOp o;
    o.Input("a", a);
    o.Input("b", b);
    const std::vector<float> want = Floats(o.Run(name)[0]);
    std::vector<float> got(want.size());
    StridedView va = math::BroadcastView(a.shape(), {2, 3, 4}),
                vb = math::BroadcastView(b.shape(), {2, 3, 4});
    for (int64_t i = 0; i < 24; ++i) {
      math::BinaryElement<FloatKind::kF32>(op, a.data<float>(), va, b.data<float>(), vb, got.data(),
                                           i);
    }
    RequireClose(got, want, 1e-6f);
  }
}

// out = a + b (shapes broadcast to `out`) as BinaryRowsElement computes it in chunks of V,
// against BinaryElement; false when PlanBinaryRows does not apply.
template <FloatKind K, int V>
bool RowsEqualElementwise(const std::vector<int64_t>& sa, const std::vector<int64_t>& sb,
                          const std::vector<int64_t>& out, math::BinaryOp op) {
  using S = typename math::FloatIO<K>::Storage;
  auto fill = [](const std::vector<int64_t>& shape, uint32_t seed) {
    const Tensor t = Random(shape, seed);
    // Aligned storage (16 bytes) holding the values in K's storage type.
    std::vector<math::Chunk<16>> store(static_cast<size_t>(t.num_elements()) * sizeof(S) / 16 + 1);
    S* p = reinterpret_cast<S*>(store.data());
    for (int64_t i = 0; i < t.num_elements(); ++i)
      p[i] = math::FloatIO<K>::Store(t.data<float>()[i]);
    return store;
  };
  const auto a = fill(sa, 51), b = fill(sb, 52);
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<math::Chunk<16>> want_store(static_cast<size_t>(n) * sizeof(S) / 16 + 1),
      got_store(want_store.size());
  StridedView va = math::BroadcastView(sa, out), vb = math::BroadcastView(sb, out),
              vy = math::ContiguousView(out);
  math::Simplify({&va, &vb, &vy});
  const S* pa = reinterpret_cast<const S*>(a.data());
  const S* pb = reinterpret_cast<const S*>(b.data());
  S* want = reinterpret_cast<S*>(want_store.data());
  S* got = reinterpret_cast<S*>(got_store.data());
  for (int64_t i = 0; i < n; ++i) math::BinaryElement<K>(op, pa, va, pb, vb, want, i);
  const auto p = math::PlanBinaryRows(V, sizeof(S), pa, va, pb, vb, got);
  if (!p) return false;
  REQUIRE(p->rows * p->len == n);
  for (int64_t i = 0; i < n / V; ++i) math::BinaryRowsElement<K, V>(op, pa, pb, got, *p, i);
  REQUIRE(std::memcmp(want, got, static_cast<size_t>(n) * sizeof(S)) == 0);
  return true;
}

TEST_CASE("Binary math in rows of 16-byte chunks equals the element-wise math, where it applies",
          "[runtime][device-math]") {
  using math::BinaryOp;
  constexpr FloatKind kF32 = FloatKind::kF32, kF16 = FloatKind::kF16;
  // Same shapes (a residual Add), a bias row, one value per row, a scalar, a broadcast
  // first operand, rank 3 with the middle dim broadcast.
  CHECK(RowsEqualElementwise<kF32, 4>({3, 16}, {3, 16}, {3, 16}, BinaryOp::kAdd));
  CHECK(RowsEqualElementwise<kF16, 8>({3, 16}, {3, 16}, {3, 16}, BinaryOp::kMul));
  CHECK(RowsEqualElementwise<kF16, 8>({3, 16}, {16}, {3, 16}, BinaryOp::kAdd));
  CHECK(RowsEqualElementwise<kF32, 4>({3, 16}, {3, 1}, {3, 16}, BinaryOp::kDiv));
  CHECK(RowsEqualElementwise<kF16, 8>({2, 3, 16}, {}, {2, 3, 16}, BinaryOp::kSub));
  CHECK(RowsEqualElementwise<kF32, 4>({1, 16}, {5, 16}, {5, 16}, BinaryOp::kMax));
  CHECK(RowsEqualElementwise<kF16, 8>({2, 1, 8}, {2, 3, 8}, {2, 3, 8}, BinaryOp::kMin));
  // Both operands broadcast along different dims (one value per row in b).
  CHECK(RowsEqualElementwise<kF16, 8>({4, 1, 8}, {4, 3, 1}, {4, 3, 8}, BinaryOp::kAdd));
  // Rows that are not whole chunks.
  CHECK_FALSE(RowsEqualElementwise<kF32, 4>({3, 6}, {3, 6}, {3, 6}, BinaryOp::kAdd));
  CHECK_FALSE(RowsEqualElementwise<kF16, 8>({5, 12}, {12}, {5, 12}, BinaryOp::kAdd));
}

// Unary and bias-activation math in chunks of V equals the element math, bit for bit.
template <FloatKind K, int V>
void ChunksEqualElements() {
  using S = typename math::FloatIO<K>::Storage;
  const int64_t n = 48, cols = 16;
  const Tensor x = Random({n}, 61), bias = Random({cols}, 62);
  std::vector<math::Chunk<16>> xs(n * sizeof(S) / 16), bs(cols * sizeof(S) / 16), a(xs.size()),
      b(xs.size());
  S* px = reinterpret_cast<S*>(xs.data());
  S* pb = reinterpret_cast<S*>(bs.data());
  for (int64_t i = 0; i < n; ++i) px[i] = math::FloatIO<K>::Store(x.data<float>()[i]);
  for (int64_t i = 0; i < cols; ++i) pb[i] = math::FloatIO<K>::Store(bias.data<float>()[i]);
  S* want = reinterpret_cast<S*>(a.data());
  S* got = reinterpret_cast<S*>(b.data());
  for (math::UnaryOp op : {math::UnaryOp::kSigmoid, math::UnaryOp::kGeluTanh, math::UnaryOp::kSilu,
                           math::UnaryOp::kLeakyRelu}) {
    for (int64_t i = 0; i < n; ++i) math::UnaryElement<K>(op, 0.1f, px, want, i);
    for (int64_t i = 0; i < n / V; ++i) math::UnaryChunkElement<K, V>(op, 0.1f, px, got, i);
    REQUIRE(std::memcmp(want, got, n * sizeof(S)) == 0);
    for (const S* bias_ptr : {static_cast<const S*>(nullptr), static_cast<const S*>(pb)}) {
      std::memcpy(want, px, n * sizeof(S));
      std::memcpy(got, px, n * sizeof(S));
      for (int64_t i = 0; i < n; ++i) math::BiasActivationElement<K>(op, bias_ptr, cols, want, i);
      for (int64_t i = 0; i < n / V; ++i)
        math::BiasActivationChunkElement<K, V>(op, bias_ptr, cols, got, i);
      REQUIRE(std::memcmp(want, got, n * sizeof(S)) == 0);
    }
  }
}

TEST_CASE("Unary and GEMM-epilogue math in 16-byte chunks equals the element math",
          "[runtime][device-math]") {
  ChunksEqualElements<FloatKind::kF32, 4>();
  ChunksEqualElements<FloatKind::kF16, 8>();
  ChunksEqualElements<FloatKind::kBF16, 8>();
}

TEST_CASE("Unary element math equals the CPU kernels", "[runtime][device-math]") {
  // x in [-2, 2) with the edges of the piecewise ops (0, ±lambd, the thresholds) and
  // values where Round ties go to even; Acosh reads 1 + x², the inverse sines x / 2.
  Tensor x = Random({64}, 3), above_one = Random({64}, 3), halves = Random({64}, 3);
  const float edges[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 1.0f, 3.0f, -3.0f, 25.0f};
  for (size_t i = 0; i < std::size(edges); ++i) x.data<float>()[i] = edges[i];
  for (int64_t i = 0; i < 64; ++i) {
    above_one.data<float>()[i] = 1.0f + x.data<float>()[i] * x.data<float>()[i];
    halves.data<float>()[i] = x.data<float>()[i] / 4.0f;
  }
  struct UnaryCase {
    std::string name;
    math::UnaryOp op;
    ir::Attributes attrs;
    math::UnaryParams params;
    const Tensor* input;
  };
  using U = math::UnaryOp;
  const std::vector<UnaryCase> ops = {
      {"Relu", U::kRelu, {}, {}, &x},
      {"Tanh", U::kTanh, {}, {}, &x},
      {"Erf", U::kErf, {}, {}, &x},
      {"Exp", U::kExp, {}, {}, &x},
      {"Neg", U::kNeg, {}, {}, &x},
      {"Abs", U::kAbs, {}, {}, &x},
      {"Reciprocal", U::kReciprocal, {}, {}, &halves},
      {"Sigmoid", U::kSigmoid, {}, {}, &x},
      {"Sin", U::kSin, {}, {}, &x},
      {"Cos", U::kCos, {}, {}, &x},
      {"Tan", U::kTan, {}, {}, &halves},
      {"Asin", U::kAsin, {}, {}, &halves},
      {"Acos", U::kAcos, {}, {}, &halves},
      {"Atan", U::kAtan, {}, {}, &x},
      {"Sinh", U::kSinh, {}, {}, &halves},
      {"Cosh", U::kCosh, {}, {}, &halves},
      {"Asinh", U::kAsinh, {}, {}, &x},
      {"Acosh", U::kAcosh, {}, {}, &above_one},
      {"Atanh", U::kAtanh, {}, {}, &halves},
      {"Ceil", U::kCeil, {}, {}, &x},
      {"Floor", U::kFloor, {}, {}, &x},
      {"Round", U::kRound, {}, {}, &x},
      {"Sign", U::kSign, {}, {}, &x},
      {"Softplus", U::kSoftplus, {}, {}, &x},
      {"Mish", U::kMish, {}, {}, &x},
      {"Softsign", U::kSoftsign, {}, {}, &x},
      {"Elu", U::kElu, {{"alpha", 0.7f}}, 0.7f, &x},
      {"Selu", U::kSelu, {{"alpha", 1.5f}, {"gamma", 1.1f}}, {1.5f, 1.1f}, &x},
      {"Selu", U::kSelu, {}, {1.67326319217681884765625f, 1.05070102214813232421875f}, &x},
      {"Celu", U::kCelu, {{"alpha", 0.8f}}, 0.8f, &x},
      {"ThresholdedRelu", U::kThresholdedRelu, {{"alpha", 0.5f}}, 0.5f, &x},
      {"HardSigmoid", U::kHardSigmoid, {{"alpha", 0.3f}, {"beta", 0.4f}}, {0.3f, 0.4f}, &x},
      {"HardSwish", U::kHardSwish, {}, {}, &x},
      {"Shrink", U::kShrink, {{"lambd", 0.5f}, {"bias", 0.25f}}, {0.5f, 0.25f}, &x},
      {"Clip", U::kClip, {{"min", -0.5f}, {"max", 1.5f}}, {-0.5f, 1.5f}, &x},
      {"Gelu", U::kGeluErf, {}, {}, &x},
      {"Gelu", U::kGeluTanh, {{"approximate", std::string("tanh")}}, {}, &x},
      {"LeakyRelu", U::kLeakyRelu, {{"alpha", 0.1f}}, 0.1f, &x}};
  for (const UnaryCase& c : ops) {
    INFO(c.name);
    // Clip's bounds are attributes before opset 11; the other ops' opsets take them all.
    OneOp o(c.name == "Clip" ? 6 : 20);
    o.Input("x", *c.input);
    const std::vector<float> want = Floats(o.Run(c.name, c.attrs)[0]);
    std::vector<float> got(want.size());
    for (int64_t i = 0; i < 64; ++i) {
      math::UnaryElement<FloatKind::kF32>(c.op, c.params, c.input->data<float>(), got.data(), i);
    }
    RequireClose(got, want, 2e-6f);
  }
}

// Mod (both kinds), PRelu, and Mean's division of the sum by the count.
TEST_CASE("Mod PRelu and Mean element math equals the CPU kernels", "[runtime][device-math]") {
  const Tensor a = Random({2, 3, 4}, 11);
  Tensor b = Random({3, 1}, 12);
  b.data<float>()[1] = -b.data<float>()[1];  // divisors of both signs
  const std::vector<int64_t> out = {2, 3, 4};
  const StridedView va = math::BroadcastView(a.shape(), out),
                    vb = math::BroadcastView(b.shape(), out);
  for (const auto& [name, op, attrs] :
       std::vector<std::tuple<std::string, math::BinaryOp, ir::Attributes>>{
           {"Mod", math::BinaryOp::kFmod, {{"fmod", int64_t{1}}}},
           {"Mod", math::BinaryOp::kFloorMod, {}},
           {"PRelu", math::BinaryOp::kPRelu, {}}}) {
    INFO(name << " " << static_cast<int>(op));
    OneOp o;
    o.Input("a", a);
    o.Input("b", b);
    const std::vector<float> want = Floats(o.Run(name, attrs)[0]);
    std::vector<float> got(want.size());
    for (int64_t i = 0; i < 24; ++i) {
      math::BinaryElement<FloatKind::kF32>(op, a.data<float>(), va, b.data<float>(), vb, got.data(),
                                           i);
    }
    RequireClose(got, want, 1e-6f);
  }
  OneOp o;
  o.Input("a", a);
  o.Input("b", b);
  o.Input("c", a);
  const std::vector<float> want = Floats(o.Run("Mean")[0]);
  std::vector<float> got(24);
  for (int64_t i = 0; i < 24; ++i) {
    math::BinaryElement<FloatKind::kF32>(math::BinaryOp::kAdd, a.data<float>(), va, b.data<float>(),
                                         vb, got.data(), i);
    math::BinaryElement<FloatKind::kF32>(math::BinaryOp::kAdd, got.data(),
                                         math::ContiguousView(out), a.data<float>(), va, got.data(),
                                         i);
    math::UnaryElement<FloatKind::kF32>(math::UnaryOp::kDivideBy, 3.0f, got.data(), got.data(), i);
  }
  RequireClose(got, want, 1e-6f);
}

TEST_CASE("Transpose, slice and gather index math equals the CPU kernels",
          "[runtime][device-math]") {
  const Tensor x = Random({2, 3, 4}, 4);
  {  // Transpose perm (2, 0, 1): the view the CUDA kernel builds.
    OneOp o;
    o.Input("x", x);
    const std::vector<float> want =
        Floats(o.Run("Transpose", {{"perm", std::vector<int64_t>{2, 0, 1}}})[0]);
    StridedView vs;
    vs.rank = 3;
    const int64_t dims[3] = {4, 2, 3}, strides[3] = {1, 12, 4};
    for (int d = 0; d < 3; ++d) {
      vs.dims[d] = dims[d];
      vs.strides[d] = strides[d];
    }
    StridedView vd = math::ContiguousView({4, 2, 3});
    math::Simplify({&vs, &vd});
    std::vector<float> got(24);
    for (int64_t i = 0; i < 24; ++i) {
      math::CopyElement(x.data<uint32_t>(), vs, reinterpret_cast<uint32_t*>(got.data()), vd, i);
    }
    RequireClose(got, want, 0.0f);
  }
  {  // Gather axis 1 with a negative index.
    OneOp o;
    o.Input("x", x);
    o.Input("i", testing::I64({2}, {-1, 0}));
    const std::vector<float> want = Floats(o.Run("Gather", {{"axis", int64_t{1}}})[0]);
    const int64_t idx[2] = {-1, 0};
    std::vector<float> got(16);
    for (int64_t i = 0; i < 16; ++i) {
      REQUIRE(math::GatherElement(x.data<float>(), idx, 2, 3, 4, got.data(), i));
    }
    RequireClose(got, want, 0.0f);
    // Out of range: 0 written, reported.
    const int64_t bad[2] = {3, -4};
    for (int64_t i = 0; i < 16; ++i) {
      REQUIRE(!math::GatherElement(x.data<float>(), bad, 2, 3, 4, got.data(), i));
      REQUIRE(got[static_cast<size_t>(i)] == 0.0f);
    }
  }
}

// CenterCropPad as movement_ops.cc runs it: y zeroed, then the part inside x as one copy
// through math::CropPadViews (crops, pads and both at once, odd differences); and
// ReverseSequence as y = x then one reversed copy per entry (math::ReversedStepsViews,
// batch on either axis); against the CPU kernels.
TEST_CASE("CenterCropPad and ReverseSequence copies equal the CPU kernels",
          "[runtime][device-math]") {
  const Tensor x = Random({4, 5, 3}, 83);
  const auto copy = [](const Tensor& src, const StridedView& vs, const StridedView& vd,
                       std::vector<float>& dst) {
    int64_t n = 1;
    for (int d = 0; d < vs.rank; ++d) n *= vs.dims[d];
    for (int64_t i = 0; i < n; ++i) {
      dst[static_cast<size_t>(vd.At(i))] = src.data<float>()[vs.At(i)];
    }
  };
  for (const std::vector<int64_t>& sizes :
       {std::vector<int64_t>{2, 8, 3}, std::vector<int64_t>{7, 2, 1}, std::vector<int64_t>{4, 5, 6},
        std::vector<int64_t>{1, 1, 1}}) {
    INFO("sizes " << sizes[0] << "x" << sizes[1] << "x" << sizes[2]);
    OneOp o;
    o.Input("x", x);
    o.Ints(sizes);
    const Tensor want = o.Run("CenterCropPad")[0];
    std::vector<int64_t> shift(3);
    for (size_t d = 0; d < 3; ++d) {
      const int64_t in = x.shape()[d];
      shift[d] = in >= sizes[d] ? (in - sizes[d]) / 2 : -((sizes[d] - in) / 2);
    }
    std::vector<float> got(static_cast<size_t>(want.num_elements()), 0.0f);
    StridedView vs, vd;
    REQUIRE(math::CropPadViews(x.shape(), sizes, shift, &vs, &vd));
    copy(x, vs, vd, got);
    RequireClose(got, Floats(want), 0.0f);
  }
  for (const int64_t batch_axis : {int64_t{0}, int64_t{1}}) {
    INFO("batch_axis " << batch_axis);
    const std::vector<int64_t> lens =
        batch_axis == 0 ? std::vector<int64_t>{5, 0, 2, 1} : std::vector<int64_t>{4, 1, 3, 2, 0};
    OneOp o;
    o.Input("x", x);
    o.Ints(lens);
    const Tensor want =
        o.Run("ReverseSequence", {{"batch_axis", batch_axis}, {"time_axis", 1 - batch_axis}})[0];
    std::vector<float> got(x.data<float>(), x.data<float>() + x.num_elements());
    for (size_t b = 0; b < lens.size(); ++b) {
      if (lens[b] < 2) continue;
      StridedView vs, vd;
      math::ReversedStepsViews(x.shape(), static_cast<int>(batch_axis), static_cast<int64_t>(b),
                               lens[b], &vs, &vd);
      copy(x, vs, vd, got);
    }
    RequireClose(got, Floats(want), 0.0f);
  }
}

TEST_CASE("Where element math with broadcasting equals the CPU kernel", "[runtime][device-math]") {
  // cond [3, 1], x [1, 4], y [3, 4]: each broadcast to the output [3, 4].
  Tensor cond = Tensor::Allocate(ir::DType::kBool, {3, 1});
  const bool picks[3] = {true, false, true};
  for (int i = 0; i < 3; ++i) cond.data<bool>()[i] = picks[i];
  const Tensor x = Random({1, 4}, 71), y = Random({3, 4}, 72);
  OneOp o;
  o.Input("c", cond);
  o.Input("x", x);
  o.Input("y", y);
  const std::vector<float> want = Floats(o.Run("Where")[0]);
  const std::vector<int64_t> out = {3, 4};
  StridedView vc = math::BroadcastView({3, 1}, out), vx = math::BroadcastView({1, 4}, out),
              vy = math::BroadcastView({3, 4}, out);
  std::vector<float> got(12);
  for (int64_t i = 0; i < 12; ++i) {
    math::WhereElement(cond.data<bool>(), vc, x.data<uint32_t>(), vx, y.data<uint32_t>(), vy,
                       reinterpret_cast<uint32_t*>(got.data()), i);
  }
  RequireClose(got, want, 0.0f);
}

TEST_CASE("MatMulNBits' weight dequantization equals the CPU kernel's", "[runtime][device-math]") {
  // A = the identity: Y[k, n] = W[n, k], which NBitsWeight gives element by element.
  const int64_t k = 32, n = 3, bits = 4, block = 16, blocks = 2, blob = block * bits / 8;
  std::mt19937 g(9);
  Tensor b = Tensor::Allocate(ir::DType::kU8, {n, blocks, blob});
  for (int64_t i = 0; i < b.num_elements(); ++i) b.data<uint8_t>()[i] = static_cast<uint8_t>(g());
  const Tensor scales = Random({n * blocks}, 10);
  Tensor zp = Tensor::Allocate(ir::DType::kU8, {n, 1});
  for (int64_t i = 0; i < n; ++i) zp.data<uint8_t>()[i] = static_cast<uint8_t>(g());
  Tensor eye = Tensor::Allocate(ir::DType::kF32, {k, k});
  for (int64_t i = 0; i < k; ++i) eye.data<float>()[i * k + i] = 1.0f;
  for (bool with_zp : {false, true}) {
    OneOp o;
    o.Input("a", eye);
    o.Input("b", b);
    o.Input("scales", scales);
    if (with_zp) o.Input("zp", zp);
    auto y = o.TryRun("MatMulNBits", {{"K", k}, {"N", n}, {"bits", bits}, {"block_size", block}}, 1,
                      "com.microsoft");
    INFO(y.status().ToString());
    REQUIRE(y.ok());
    math::NBitsLayout l;
    l.n = n;
    l.k = k;
    l.bits = bits;
    l.block_size = block;
    for (int64_t col = 0; col < n; ++col) {
      for (int64_t row = 0; row < k; ++row) {
        const float scale = scales.data<float>()[col * blocks + row / block];
        const float want = math::NBitsWeight(l, b.data<uint8_t>(), col, row, scale,
                                             with_zp ? zp.data<uint8_t>() : nullptr, false, 0);
        REQUIRE(std::abs((*y)[0].data<float>()[row * n + col] - want) <=
                1e-6f * (1 + std::abs(want)));
      }
    }
  }
}

TEST_CASE("MatMulNBits' decoding GEMV, lane by lane, equals the CPU kernel",
          "[runtime][device-math]") {
  // The CUDA GEMV's lanes (nbits.cu's GemvKernel runs math::NBitsGemvLane on 32 lanes,
  // then adds them up): every lane here, summed, against the CPU kernel, through the word
  // path (4-bit codes, K % 8 == 0) and the single-code path (any layout).
  std::mt19937 g(5);
  struct Case {
    int64_t k, block, bits;
  };
  // 4 bits: blocks of 32 (K 352: 11 blocks, 44 words over 32 lanes), of 16 with the last
  // partial (K 40: the last block's 16-code blob holds 8 codes of padding), K 36 (single codes
  // only); 8 bits with a partial block; 2 bits.
  for (const Case c :
       {Case{352, 32, 4}, Case{40, 16, 4}, Case{36, 16, 4}, Case{80, 32, 8}, Case{96, 64, 2}}) {
    const int64_t n = 5, rows = 3, blocks = (c.k + c.block - 1) / c.block;
    const int64_t blob = c.block * c.bits / 8;
    Tensor b = Tensor::Allocate(ir::DType::kU8, {n, blocks, blob});
    for (int64_t i = 0; i < b.num_elements(); ++i) b.data<uint8_t>()[i] = static_cast<uint8_t>(g());
    const Tensor scales = Random({n * blocks}, 11);
    const Tensor a = Random({rows, c.k}, 12);
    Tensor packed = Tensor::Allocate(ir::DType::kU8, {n, (blocks * c.bits + 7) / 8});
    for (int64_t i = 0; i < packed.num_elements(); ++i) {
      packed.data<uint8_t>()[i] = static_cast<uint8_t>(g());
    }
    Tensor floats = Tensor::Allocate(ir::DType::kF32, {n * blocks});
    for (int64_t i = 0; i < floats.num_elements(); ++i) {
      floats.data<float>()[i] = static_cast<float>(g() % (1u << c.bits)) + 0.25f;
    }
    math::NBitsLayout l;
    l.n = n;
    l.k = c.k;
    l.bits = c.bits;
    l.block_size = c.block;
    for (int zero_kind = 0; zero_kind < 3; ++zero_kind) {  // none, packed, float
      OneOp o;
      o.Input("a", a);
      o.Input("b", b);
      o.Input("scales", scales);
      if (zero_kind == 1) o.Input("zp", packed);
      if (zero_kind == 2) o.Input("zp", floats);
      auto y =
          o.TryRun("MatMulNBits", {{"K", c.k}, {"N", n}, {"bits", c.bits}, {"block_size", c.block}},
                   1, "com.microsoft");
      INFO("K " << c.k << ", block " << c.block << ", bits " << c.bits << ", zero points "
                << zero_kind << ": " << y.status().ToString());
      REQUIRE(y.ok());
      auto param = [](const Tensor& t) {
        return [p = t.data<float>()](int64_t i) { return p[i]; };
      };
      auto load_a = [p = a.data<float>(), k = c.k](int r, int64_t i) { return p[r * k + i]; };
      for (bool words : {false, true}) {
        if (words && (c.bits != 4 || c.k % 8 != 0)) continue;
        for (int64_t col = 0; col < n; ++col) {
          float total[rows] = {};
          for (int lane = 0; lane < 32; ++lane) {
            float acc[rows] = {};
            auto run = [&](auto kwords) {
              math::NBitsGemvLane<rows, decltype(kwords)::value>(
                  l, b.data<uint8_t>(), zero_kind == 1 ? packed.data<uint8_t>() : nullptr,
                  zero_kind == 2, param(scales), param(floats), load_a, col, lane, 32, acc);
            };
            if (words) {
              run(std::true_type{});
            } else {
              run(std::false_type{});
            }
            for (int64_t r = 0; r < rows; ++r) total[r] += acc[r];
          }
          for (int64_t r = 0; r < rows; ++r) {
            const float want = (*y)[0].data<float>()[r * n + col];
            INFO("words " << words << ", column " << col << ", row " << r);
            REQUIRE(std::abs(total[r] - want) <= 1e-4f * (1 + std::abs(want)));
          }
        }
      }
    }
  }
}

TEST_CASE("The fused GEMM's bias and activation epilogue equals the CPU's FusedMatMul",
          "[runtime][device-math]") {
  const int64_t m = 6, k = 5, n = 7;
  const Tensor a = Random({2, 3, k}, 21), w = Random({k, n}, 22), bias = Random({n}, 23);
  const std::vector<std::pair<std::string, math::UnaryOp>> acts = {
      {"", math::UnaryOp::kIdentity},         {"Gelu", math::UnaryOp::kGeluErf},
      {"GeluTanh", math::UnaryOp::kGeluTanh}, {"Relu", math::UnaryOp::kRelu},
      {"Tanh", math::UnaryOp::kTanh},         {"SiLU", math::UnaryOp::kSilu}};
  for (const auto& [name, op] : acts) {
    for (bool with_bias : {false, true}) {
      INFO(name << (with_bias ? " with bias" : ""));
      OneOp o;
      o.Input("a", a);
      o.Input("w", w);
      if (with_bias) o.Input("b", bias);
      o.output_type = ir::TensorType(ir::DType::kF32, {ir::Dim(2), ir::Dim(3), ir::Dim(n)});
      ir::Attributes attrs;
      if (!name.empty()) attrs["activation"] = name;
      auto want = o.TryRun("FusedMatMul", attrs, 1, "tpc");
      REQUIRE(want.ok());
      // The GEMM's result as cuBLAS leaves it, then the epilogue element by element.
      std::vector<float> got(static_cast<size_t>(m * n), 0.0f);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          for (int64_t j = 0; j < k; ++j)
            got[r * n + c] += a.data<float>()[r * k + j] * w.data<float>()[j * n + c];
        }
      }
      for (int64_t i = 0; i < m * n; ++i) {
        math::BiasActivationElement<FloatKind::kF32>(op, with_bias ? bias.data<float>() : nullptr,
                                                     n, got.data(), i);
      }
      RequireClose(got, Floats((*want)[0]), 1e-5f);
    }
  }
}

TEST_CASE("The rotate_half rotary element math equals the CPU's RotaryHalf",
          "[runtime][device-math]") {
  // x [2, 3, 4, 8], cos and sin one row per position [4, 8] (broadcast over batch and heads).
  const std::vector<int64_t> shape = {2, 3, 4, 8};
  const Tensor x = Random(shape, 31), cos = Random({4, 8}, 32), sin = Random({1, 4, 8}, 33);
  OneOp o;
  o.Input("x", x);
  o.Input("cos", cos);
  o.Input("sin", sin);
  o.output_type = ir::TensorType(ir::DType::kF32, {ir::Dim(2), ir::Dim(3), ir::Dim(4), ir::Dim(8)});
  auto want = o.TryRun("RotaryHalf", {}, 1, "tpc");
  REQUIRE(want.ok());
  StridedView vx = math::ContiguousView(shape), vc = math::BroadcastView(cos.shape(), shape),
              vs = math::BroadcastView(sin.shape(), shape);
  math::Simplify({&vx, &vc, &vs});
  std::vector<float> got(static_cast<size_t>(x.num_elements()));
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    math::RotaryHalfElement<FloatKind::kF32>(x.data<float>(), cos.data<float>(), vc,
                                             sin.data<float>(), vs, 8, got.data(), i);
  }
  RequireClose(got, Floats((*want)[0]), 1e-6f);
}

TEST_CASE("The attention core's row math, mask rows and folds equal the CPU's AttentionCore",
          "[runtime][device-math]") {
  // Q [2, 3, s, d], K [2, 1, t, d] (shared by the heads) or Kᵀ, V [2, 3, t, dv], masks of
  // several broadcasts; the softmax folded as one warp folds a row of up to 1024 keys, as
  // the kernel does.
  const int64_t s = 5, t = 7, d = 4, dv = 3;
  const Tensor q = Random({2, 3, s, d}, 41), k = Random({2, 1, t, d}, 42),
               v = Random({2, 3, t, dv}, 43);
  Tensor kt = Tensor::Allocate(ir::DType::kF32, {2, 1, d, t});
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < d; ++j)
        kt.data<float>()[(b * d + j) * t + i] = k.data<float>()[(b * t + i) * d + j];
    }
  }
  Tensor causal = Tensor::Allocate(ir::DType::kF32, {1, 1, s, t});
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < t; ++j)
      causal.data<float>()[i * t + j] = j > i + 2 ? std::numeric_limits<float>::lowest() : 0.0f;
  }
  const Tensor padding = Random({2, 1, 1, t}, 44), per_head = Random({3, s, t}, 45);
  const std::vector<const Tensor*> masks = {nullptr, &causal, &padding, &per_head};
  for (size_t mi = 0; mi < masks.size(); ++mi) {
    for (bool divide : {false, true}) {
      for (bool transposed : {false, true}) {
        INFO("mask " << mi << (divide ? " divides" : " multiplies")
                     << (transposed ? ", Kᵀ" : ", K"));
        const bool has_mask = masks[mi] != nullptr;
        OneOp o;
        o.Input("q", q);
        o.Input("k", transposed ? kt : k);
        o.Input("v", v);
        if (has_mask) o.Input("m", *masks[mi]);
        o.output_type =
            ir::TensorType(ir::DType::kF32, {ir::Dim(2), ir::Dim(3), ir::Dim(s), ir::Dim(dv)});
        const float scale = divide ? 2.0f : 0.5f;
        auto want = o.TryRun("AttentionCore",
                             {{"scale", scale},
                              {"scale_divides", int64_t{divide}},
                              {"k_transposed", int64_t{transposed}}},
                             1, "tpc");
        INFO(want.status().ToString());
        REQUIRE(want.ok());
        StridedView rows;
        int64_t col = 0;
        if (has_mask) {
          const std::vector<int64_t> ms = masks[mi]->shape();
          const StridedView full = math::BroadcastView(ms, {2, 3, s, t});
          rows = math::ViewOf({2, 3, s}, {full.strides[0], full.strides[1], full.strides[2]});
          col = full.strides[3];
          math::Simplify({&rows});
        }
        std::vector<float> got(static_cast<size_t>(2 * 3 * s * dv), 0.0f);
        std::vector<float> sc(static_cast<size_t>(t)), p(static_cast<size_t>(t));
        for (int64_t r = 0; r < 2 * 3 * s; ++r) {  // a row of scores: the GEMM's, then the kernel's
          const int64_t bi = r / (3 * s), hi = (r / s) % 3, qi = r % s;
          for (int64_t j = 0; j < t; ++j) {
            float dot = 0;
            for (int64_t e = 0; e < d; ++e)
              dot += q.data<float>()[((bi * 3 + hi) * s + qi) * d + e] *
                     k.data<float>()[(bi * t + j) * d + e];
            sc[static_cast<size_t>(j)] = divide ? dot : dot * scale;
          }
          const float* m = has_mask ? masks[mi]->data<float>() + rows.At(r) : nullptr;
          auto score = [&](int64_t j) {
            return math::AttentionScore(sc[static_cast<size_t>(j)], divide ? scale : 1.0f,
                                        m != nullptr ? m[j * col] : 0.0f);
          };
          const float mx = WarpFold(
              t, -INFINITY, [&](float a, int64_t j) { return math::CombineMax(a, score(j)); },
              [](float a, float b) { return math::CombineMax(a, b); });
          const float sum = WarpFold(
              t, 0.0f, [&](float a, int64_t j) { return a + math::SoftmaxTerm(score(j), mx); },
              [](float a, float b) { return a + b; });
          for (int64_t j = 0; j < t; ++j)
            p[static_cast<size_t>(j)] = math::SoftmaxElement(score(j), mx, sum, false);
          for (int64_t c = 0; c < dv; ++c) {
            for (int64_t j = 0; j < t; ++j)
              got[static_cast<size_t>(r * dv + c)] +=
                  p[static_cast<size_t>(j)] * v.data<float>()[((bi * 3 + hi) * t + j) * dv + c];
          }
        }
        RequireClose(got, Floats((*want)[0]), 1e-5f);
      }
    }
  }
}

// Runs the copy vs → vd of `elem_bytes` elements as ChunkRows plans it in chunks of
// `Bytes` (when it does) and element by element; returns whether it was chunked, and
// checks both wrote the same bytes.
template <int Bytes>
bool ChunkedEqualsElementwise(int elem_bytes, const StridedView& vs, const StridedView& vd,
                              int64_t src_elems, int64_t dst_elems, int64_t src_shift = 0) {
  std::vector<math::Chunk<16>> src_store(static_cast<size_t>(src_elems * elem_bytes / 16 + 2));
  std::vector<math::Chunk<16>> a_store(static_cast<size_t>(dst_elems * elem_bytes / 16 + 2));
  std::vector<math::Chunk<16>> b_store(a_store.size());
  uint8_t* src = reinterpret_cast<uint8_t*>(src_store.data()) + src_shift * elem_bytes;
  for (int64_t i = 0; i < src_elems * elem_bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  uint8_t* a = reinterpret_cast<uint8_t*>(a_store.data());
  uint8_t* b = reinterpret_cast<uint8_t*>(b_store.data());
  int64_t n = 1;
  for (int d = 0; d < vs.rank; ++d) n *= vs.dims[d];
  for (int64_t i = 0; i < n; ++i) {  // the element-wise copy, byte by byte
    for (int k = 0; k < elem_bytes; ++k)
      a[vd.At(i) * elem_bytes + k] = src[vs.At(i) * elem_bytes + k];
  }
  const auto c = math::ChunkRows(elem_bytes, Bytes, src, vs, b, vd);
  if (!c) return false;
  REQUIRE(c->rows * c->chunks * (Bytes / elem_bytes) == n);
  using C = math::Chunk<Bytes>;
  for (int64_t i = 0; i < c->rows * c->chunks; ++i) {
    math::CopyChunkElement(reinterpret_cast<const C*>(src), c->src, reinterpret_cast<C*>(b), c->dst,
                           c->chunks, i);
  }
  REQUIRE(std::memcmp(a, b, static_cast<size_t>(dst_elems * elem_bytes)) == 0);
  return true;
}

TEST_CASE("Chunked copies move the bytes the element-wise strided copy moves, where they apply",
          "[runtime][device-math]") {
  // Transpose [2, 3, 4, 8] → [2, 4, 3, 8] (the heads' transpose keeps the last dim), f16.
  StridedView t_src = math::ViewOf({2, 4, 3, 8}, {96, 8, 32, 1});
  StridedView t_dst = math::ContiguousView({2, 4, 3, 8});
  math::Simplify({&t_src, &t_dst});
  CHECK(ChunkedEqualsElementwise<16>(2, t_src, t_dst, 192, 192));
  CHECK(ChunkedEqualsElementwise<8>(2, t_src, t_dst, 192, 192));
  CHECK(ChunkedEqualsElementwise<8>(4, t_src, t_dst, 192, 192));
  CHECK_FALSE(
      ChunkedEqualsElementwise<4>(4, t_src, t_dst, 192, 192));  // no narrower than an element
  // Expand [2, 2, 1, 5, 8] → [2, 2, 3, 5, 8] (GQA's repeated K/V heads), f32.
  StridedView e_src = math::BroadcastView({2, 2, 1, 5, 8}, {2, 2, 3, 5, 8});
  StridedView e_dst = math::ContiguousView({2, 2, 3, 5, 8});
  math::Simplify({&e_src, &e_dst});
  CHECK(ChunkedEqualsElementwise<16>(4, e_src, e_dst, 160, 480));
  // A slice [.., 4:12] of rows of 16 f16 into a [3, 8] output; a Concat's second part (an
  // offset into the output); the same slice starting at 2 (4 bytes: 4-byte chunks only).
  StridedView s_src = math::ViewOf({3, 8}, {16, 1});
  s_src.offset = 4;
  StridedView s_dst = math::ContiguousView({3, 8});
  CHECK(ChunkedEqualsElementwise<8>(2, s_src, s_dst, 48, 24));
  StridedView c_dst = math::ViewOf({3, 8}, {16, 1});
  c_dst.offset = 8;
  CHECK(ChunkedEqualsElementwise<16>(2, s_dst, c_dst, 24, 48));
  s_src.offset = 2;
  CHECK_FALSE(ChunkedEqualsElementwise<8>(2, s_src, s_dst, 48, 24));
  CHECK(ChunkedEqualsElementwise<4>(2, s_src, s_dst, 48, 24));
  // Where chunks do not apply: the last dim strided (a transpose of the last two dims), a
  // row of 6 bytes, a source pointer off the chunk boundary.
  StridedView l_src = math::ViewOf({4, 8}, {1, 4});
  StridedView l_dst = math::ContiguousView({4, 8});
  CHECK_FALSE(ChunkedEqualsElementwise<16>(4, l_src, l_dst, 32, 32));
  StridedView odd_src = math::ContiguousView({4, 3}), odd_dst = odd_src;
  CHECK_FALSE(ChunkedEqualsElementwise<4>(2, odd_src, odd_dst, 12, 12));
  CHECK(ChunkedEqualsElementwise<16>(2, t_src, t_dst, 192, 192, 0));
  CHECK_FALSE(ChunkedEqualsElementwise<16>(2, t_src, t_dst, 192, 192, 1));
}

TEST_CASE("Half and bfloat16 conversions round to nearest even and round-trip",
          "[runtime][device-math]") {
  // Every half value converts to float and back unchanged (NaNs stay NaNs).
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      REQUIRE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      REQUIRE(FloatToHalf(f) == h);
    }
    const float b = BFloat16ToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(b)) REQUIRE(FloatToBFloat16(b) == h);
  }
  // Ties go to the even neighbour; the largest finite half; overflow to infinity.
  CHECK(FloatToHalf(1.0f + 1.0f / 2048.0f) == 0x3c00);  // tie between 1 and 1 + 2^-10
  CHECK(FloatToHalf(1.0f + 3.0f / 2048.0f) == 0x3c02);  // tie, rounds up to even
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);
  CHECK(FloatToHalf(std::ldexp(1.0f, -25)) == 0);          // half the smallest subnormal
  CHECK(FloatToHalf(std::ldexp(3.0f, -25)) == 2);          // 1.5 subnormal ulps: to even
  CHECK(FloatToBFloat16(1.0f + 1.0f / 256.0f) == 0x3f80);  // tie to even
  CHECK(FloatToBFloat16(1.0f + 3.0f / 256.0f) == 0x3f82);
  // Loads and stores of the kernels' storage types are these conversions.
  CHECK(math::FloatIO<FloatKind::kF16>::Load(0x3c00) == 1.0f);
  CHECK(math::FloatIO<FloatKind::kBF16>::Store(-2.0f) == 0xc000);
}

}  // namespace
}  // namespace tpc::runtime
