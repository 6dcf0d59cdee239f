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
#include "one_op.h"
#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/gqa.h"
#include "tpc/runtime/math/indexing.h"
#include "tpc/runtime/math/logic.h"
#include "tpc/runtime/math/loss.h"
#include "tpc/runtime/math/nbits.h"
#include "tpc/runtime/math/pointwise.h"
#include "tpc/runtime/math/rotary.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/sdpa.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/half.h"

namespace tpc::runtime {
namespace {

using math::FloatKind;
using math::StridedView;
using testing::F32;
using testing::Floats;
using testing::OneOp;

Tensor Random(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Tensor t = Tensor::Allocate(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(g);
  return t;
}

void RequireClose(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1.0f + std::abs(want[i])));
  }
}

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
  const Tensor x = Random({64}, 3);
  const std::vector<std::tuple<std::string, math::UnaryOp, ir::Attributes>> ops = {
      {"Relu", math::UnaryOp::kRelu, {}},
      {"Tanh", math::UnaryOp::kTanh, {}},
      {"Erf", math::UnaryOp::kErf, {}},
      {"Exp", math::UnaryOp::kExp, {}},
      {"Neg", math::UnaryOp::kNeg, {}},
      {"Abs", math::UnaryOp::kAbs, {}},
      {"Reciprocal", math::UnaryOp::kReciprocal, {}},
      {"Sigmoid", math::UnaryOp::kSigmoid, {}},
      {"Sin", math::UnaryOp::kSin, {}},
      {"Cos", math::UnaryOp::kCos, {}},
      {"Gelu", math::UnaryOp::kGeluErf, {}},
      {"Gelu", math::UnaryOp::kGeluTanh, {{"approximate", std::string("tanh")}}},
      {"LeakyRelu", math::UnaryOp::kLeakyRelu, {{"alpha", 0.1f}}}};
  for (const auto& [name, op, attrs] : ops) {
    INFO(name);
    OneOp o(20);
    o.Input("x", x);
    const std::vector<float> want = Floats(o.Run(name, attrs)[0]);
    std::vector<float> got(want.size());
    const float alpha = name == "LeakyRelu" ? 0.1f : 0.0f;
    for (int64_t i = 0; i < 64; ++i) {
      math::UnaryElement<FloatKind::kF32>(op, alpha, x.data<float>(), got.data(), i);
    }
    RequireClose(got, want, 2e-6f);
  }
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

TEST_CASE("Tile as one strided copy equals the CPU kernel", "[runtime][device-math]") {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3}, {2, 1}}, {{2, 3}, {1, 3}}, {{1, 4, 1}, {3, 2, 5}}, {{2, 1, 3, 2}, {2, 2, 2, 2}},
      {{3}, {1}},       {{2, 3}, {0, 2}}};
  for (const auto& [shape, repeats] : cases) {
    INFO("shape " << shape.size() << " dims, repeats " << repeats[0]);
    const Tensor x = Random(shape, 11);
    OneOp o;
    o.Input("x", x);
    o.Ints(repeats);
    const std::vector<float> want = Floats(o.Run("Tile")[0]);
    StridedView vs, vd;
    REQUIRE(math::TileViews(shape, repeats, &vs, &vd));
    math::Simplify({&vs, &vd});
    std::vector<float> got(want.size(), -1.0f);
    int64_t n = 1;
    for (int d = 0; d < vs.rank; ++d) n *= vs.dims[d];
    if (want.empty()) n = 0;
    for (int64_t i = 0; i < n; ++i) {
      math::CopyElement(x.data<uint32_t>(), vs, reinterpret_cast<uint32_t*>(got.data()), vd, i);
    }
    RequireClose(got, want, 0.0f);
  }
  // Over kMaxDims dims once the ones are left out: refused (the kernel names the limit).
  StridedView vs, vd;
  CHECK(!math::TileViews({2, 2, 2, 2, 2}, {2, 2, 2, 2, 2}, &vs, &vd));
}

TEST_CASE("GatherElements element math equals the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({3, 4, 5}, 12);
  for (int64_t axis : {0, 1, 2, -1}) {
    INFO("axis " << axis);
    const int64_t a = axis < 0 ? axis + 3 : axis;
    // Indices of shape [2, 3, 4] (each dim at most data's), negative ones among them.
    std::vector<int64_t> idx(24);
    for (size_t i = 0; i < idx.size(); ++i) {
      const int64_t len = x.shape()[static_cast<size_t>(a)];
      idx[i] = static_cast<int64_t>(i * 7 % static_cast<size_t>(len)) - (i % 3 == 0 ? len : 0);
    }
    OneOp o(13);
    o.Input("x", x);
    o.Input("i", testing::I64({2, 3, 4}, idx));
    const std::vector<float> want = Floats(o.Run("GatherElements", {{"axis", axis}})[0]);
    const std::vector<int64_t> strides = math::ContiguousStrides(x.shape());
    StridedView base = math::ViewOf({2, 3, 4}, strides), out = math::ContiguousView({2, 3, 4});
    base.strides[a] = 0;
    math::Simplify({&base, &out});
    std::vector<float> got(24);
    for (int64_t i = 0; i < 24; ++i) {
      REQUIRE(math::GatherElementsElement(x.data<float>(), base, idx.data(),
                                          x.shape()[static_cast<size_t>(a)],
                                          strides[static_cast<size_t>(a)], got.data(), i));
    }
    RequireClose(got, want, 0.0f);
    const int64_t bad = x.shape()[static_cast<size_t>(a)];
    CHECK(!math::GatherElementsElement(x.data<float>(), base, &bad, bad, 1, got.data(), 0));
    CHECK(got[0] == 0.0f);
  }
}

TEST_CASE("The negative log-likelihood terms equal the CPU's SoftmaxCrossEntropyLoss",
          "[runtime][device-math]") {
  const Tensor scores = Random({3, 5, 2}, 13);  // [N, C, d]
  const std::vector<int64_t> labels = {0, 4, 2, -100, 1, 3};
  const Tensor weight = F32({5}, {1.0f, 0.5f, 2.0f, 1.5f, 0.25f});
  // log-probabilities over C (the CPU's LogSoftmax, axis 1).
  OneOp lo(13);
  lo.Input("x", scores);
  const Tensor logp = lo.Run("LogSoftmax", {{"axis", int64_t{1}}})[0];
  math::NllLayout l;
  l.n = 3;
  l.c = 5;
  l.inner = 2;
  l.has_ignore = true;
  l.ignore = -100;
  for (const std::string reduction : {"none", "sum", "mean"}) {
    for (bool weighted : {false, true}) {
      INFO(reduction << (weighted ? " weighted" : ""));
      OneOp o(13);
      o.Input("x", scores);
      o.Input("t", testing::I64({3, 2}, labels));
      if (weighted) o.Input("w", weight);
      const std::vector<float> want =
          Floats(o.Run("SoftmaxCrossEntropyLoss",
                       {{"reduction", reduction}, {"ignore_index", int64_t{-100}}})[0]);
      std::vector<float> got;
      double sum = 0, wsum = 0;
      for (int64_t t = 0; t < l.targets(); ++t) {
        const math::NllTerm term = math::NllOf<FloatKind::kF32>(
            logp.data<float>(), labels.data(), weighted ? weight.data<float>() : nullptr, l, t);
        REQUIRE(term.ok);
        got.push_back(static_cast<float>(term.loss));
        sum += term.loss;
        wsum += term.weight;
      }
      if (reduction != "none") {
        got = {static_cast<float>(math::ReduceNll(sum, wsum, reduction == "mean"))};
      }
      RequireClose(got, want, 1e-6f);
    }
  }
  const int64_t out_of_range[1] = {5};
  CHECK(!math::NllOf<FloatKind::kF32>(logp.data<float>(), out_of_range, nullptr, l, 0).ok);
  CHECK(std::isnan(math::ReduceNll(0.0, 0.0, true)));  // every target ignored
}

TEST_CASE("Convolution by im2col and one GEMM per image and group equals the CPU's Conv",
          "[runtime][device-math]") {
  struct Case {
    std::vector<int64_t> x, w;
    ir::Attributes attrs;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 8}, {4, 3, 4, 4}, {{"strides", std::vector<int64_t>{4, 4}}}},  // patches
      {{1, 4, 7, 6},
       {6, 2, 3, 3},
       {{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 0, 2, 1}}}},
      {{1, 2, 9},
       {3, 2, 3},
       {{"dilations", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{2}}}},
      {{1, 2, 4, 4, 3}, {2, 2, 2, 3, 2}, {{"auto_pad", std::string("SAME_UPPER")}}},
      {{1, 3, 5, 5}, {2, 3, 1, 1}, {}}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    const Tensor x = Random(c.x, 20 + static_cast<uint32_t>(ci));
    const Tensor w = Random(c.w, 40 + static_cast<uint32_t>(ci));
    const Tensor b = Random({c.w[0]}, 60);
    OneOp o;
    o.Input("x", x);
    o.Input("w", w);
    o.Input("b", b);
    const Tensor y = o.Run("Conv", c.attrs)[0];
    // The geometry as the CUDA kernel fills it: the output's spatial dims and the pads.
    const int spatial = static_cast<int>(c.x.size()) - 2;
    math::ConvGeometry g;
    g.spatial = spatial;
    const auto attr = [&](const char* name, int64_t def, int d) -> int64_t {
      auto it = c.attrs.find(name);
      if (it == c.attrs.end()) return def;
      return std::get<std::vector<int64_t>>(it->second)[static_cast<size_t>(d)];
    };
    for (int d = 0; d < spatial; ++d) {
      g.in[d] = c.x[static_cast<size_t>(d) + 2];
      g.kernel[d] = c.w[static_cast<size_t>(d) + 2];
      g.strides[d] = attr("strides", 1, d);
      g.dilations[d] = attr("dilations", 1, d);
      g.pad_begin[d] = attr("pads", 0, d);
      g.out[d] = y.shape()[static_cast<size_t>(d) + 2];
      if (c.attrs.count("auto_pad")) {  // SAME_UPPER: the smaller half before
        const int64_t total = std::max<int64_t>(
            0, (g.out[d] - 1) * g.strides[d] + (g.kernel[d] - 1) * g.dilations[d] + 1 - g.in[d]);
        g.pad_begin[d] = total / 2;
      }
      g.taps *= g.kernel[d];
      g.outs *= g.out[d];
      g.in_size *= g.in[d];
    }
    const int64_t group = c.attrs.count("group") ? std::get<int64_t>(c.attrs.at("group")) : 1;
    const int64_t n = c.x[0], ch = c.x[1], m = c.w[0], cg = ch / group, mg = m / group;
    const int64_t rows = cg * g.taps;
    std::vector<float> col(static_cast<size_t>(rows * g.outs));
    std::vector<float> got(static_cast<size_t>(y.num_elements()));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t grp = 0; grp < group; ++grp) {
        const float* xg = x.data<float>() + (i * ch + grp * cg) * g.in_size;
        for (int64_t e = 0; e < rows * g.outs; ++e) math::Im2ColElement(g, xg, col.data(), e);
        for (int64_t r = 0; r < mg; ++r) {
          for (int64_t p = 0; p < g.outs; ++p) {
            double acc = b.data<float>()[grp * mg + r];
            for (int64_t q = 0; q < rows; ++q) {
              acc += static_cast<double>(w.data<float>()[(grp * mg + r) * rows + q]) *
                     col[static_cast<size_t>(q * g.outs + p)];
            }
            got[static_cast<size_t>((i * m + grp * mg + r) * g.outs + p)] = static_cast<float>(acc);
          }
        }
      }
    }
    RequireClose(got, Floats(y), 2e-5f);
  }
}

// GroupQueryAttention as the CUDA kernel composes it (the layout elements, the scores of
// each group, the masked softmax of each row, P·V), in f32 on the host.
std::vector<Tensor> GqaByDeviceMath(const math::GqaLayout& l, const Tensor& query,
                                    const Tensor* key, const Tensor* value, const Tensor* past_k,
                                    const Tensor* past_v, const std::vector<int32_t>& lens,
                                    const Tensor* cos, const Tensor* sin, float scale) {
  const float* nul = nullptr;
  std::vector<float> q(static_cast<size_t>(l.batch * l.hq * l.seq * l.hd));
  std::vector<float> pk(static_cast<size_t>(l.batch * l.hkv * l.total * l.hd)), pv(pk.size());
  const int64_t* no_positions = nullptr;
  for (size_t i = 0; i < q.size(); ++i) {
    REQUIRE(math::GqaQueryElement<FloatKind::kF32>(
        l, query.data<float>(), key ? key->data<float>() : nul, value ? value->data<float>() : nul,
        lens.data(), no_positions, cos ? cos->data<float>() : nul, sin ? sin->data<float>() : nul,
        q.data(), static_cast<int64_t>(i)));
  }
  for (size_t i = 0; i < pk.size(); ++i) {
    REQUIRE(math::GqaPresentElement<FloatKind::kF32>(
        l, query.data<float>(), key ? key->data<float>() : nul, value ? value->data<float>() : nul,
        past_k ? past_k->data<float>() : nul, past_v ? past_v->data<float>() : nul, lens.data(),
        no_positions, cos ? cos->data<float>() : nul, sin ? sin->data<float>() : nul, pk.data(),
        pv.data(), static_cast<int64_t>(i)));
  }
  Tensor y = Tensor::Allocate(ir::DType::kF32, {l.batch, l.seq, l.hq * l.hd});
  const int64_t group = l.hq / l.hkv;
  std::vector<float> row(static_cast<size_t>(l.total));
  for (int64_t b = 0; b < l.batch; ++b) {
    int64_t keys = 0, own = 0;
    REQUIRE(math::GqaRowKeys(l, lens[static_cast<size_t>(b)], &keys, &own));
    for (int64_t h = 0; h < l.hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < l.seq; ++i) {
        float mx = l.smooth ? 0.0f : -INFINITY;
        for (int64_t j = 0; j < l.total; ++j) {
          float dot = 0;
          for (int64_t d = 0; d < l.hd; ++d) {
            dot += q[static_cast<size_t>(((b * l.hq + h) * l.seq + i) * l.hd + d)] *
                   pk[static_cast<size_t>(((b * l.hkv + g) * l.total + j) * l.hd + d)];
          }
          row[static_cast<size_t>(j)] =
              math::GqaOpen(l, keys, own, i, j) ? math::GqaSoftcap(l, scale * dot) : -INFINITY;
          mx = std::max(mx, row[static_cast<size_t>(j)]);
        }
        float sum = l.smooth ? std::exp(-mx) : 0.0f;
        for (float v : row) sum += math::SoftmaxTerm(v, mx);
        for (int64_t d = 0; d < l.hd; ++d) {
          float acc = 0;
          for (int64_t j = 0; j < l.total; ++j) {
            acc += math::SoftmaxElement(row[static_cast<size_t>(j)], mx, sum, false) *
                   pv[static_cast<size_t>(((b * l.hkv + g) * l.total + j) * l.hd + d)];
          }
          y.data<float>()[(b * l.seq + i) * l.hq * l.hd + h * l.hd + d] = acc;
        }
      }
    }
  }
  Tensor tk = Tensor::Allocate(ir::DType::kF32, {l.batch, l.hkv, l.total, l.hd});
  Tensor tv = Tensor::Allocate(ir::DType::kF32, {l.batch, l.hkv, l.total, l.hd});
  std::copy(pk.begin(), pk.end(), tk.data<float>());
  std::copy(pv.begin(), pv.end(), tv.data<float>());
  return {y, tk, tv};
}

TEST_CASE("GroupQueryAttention composed from the device math equals the CPU kernel",
          "[runtime][device-math]") {
  struct Case {
    bool packed, interleaved, with_past, smooth;
    int64_t window;
    float softcap;
    std::vector<int32_t> lens;
  };
  const std::vector<Case> cases = {
      {false, false, true, false, -1, 0.0f, {4, 3}},   // decode rows of 5 and 4 keys
      {true, true, true, true, 2, 5.0f, {4, 4}},       // packed, window, softcap, smooth
      {false, false, false, false, -1, 0.0f, {2, 1}},  // a padded first prompt
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    math::GqaLayout l;
    l.batch = 2;
    l.seq = 3;
    l.hq = 4;
    l.hkv = 2;
    l.hd = 8;
    l.past = c.with_past ? 2 : 0;
    l.total = l.past + l.seq;
    l.packed = c.packed;
    l.q_row = (c.packed ? l.hq + 2 * l.hkv : l.hq) * l.hd;
    l.rotary = true;
    l.interleaved = c.interleaved;
    l.half = 2;
    l.cache_rows = 16;
    l.window = c.window;
    l.softcap = c.softcap;
    l.smooth = c.smooth;
    const Tensor query = Random({l.batch, l.seq, l.q_row}, 70 + static_cast<uint32_t>(ci));
    const Tensor key = Random({l.batch, l.seq, l.hkv * l.hd}, 71);
    const Tensor value = Random({l.batch, l.seq, l.hkv * l.hd}, 72);
    const Tensor past_k = Random({l.batch, l.hkv, l.past, l.hd}, 73);
    const Tensor past_v = Random({l.batch, l.hkv, l.past, l.hd}, 74);
    const Tensor cos = Random({16, 2}, 75), sin = Random({16, 2}, 76);
    Tensor lens = Tensor::Allocate(ir::DType::kI32, {l.batch});
    std::copy(c.lens.begin(), c.lens.end(), lens.data<int32_t>());
    const float scale = 0.3f;
    OneOp o;
    o.Input("query", query);
    if (c.packed) {
      o.None();
      o.None();
    } else {
      o.Input("key", key);
      o.Input("value", value);
    }
    if (c.with_past) {
      o.Input("past_key", past_k);
      o.Input("past_value", past_v);
    } else {
      o.None();
      o.None();
    }
    o.Input("seqlens_k", lens);
    o.None();
    o.Input("cos", cos);
    o.Input("sin", sin);
    o.output_type = ir::TensorType(ir::DType::kF32, {});
    auto want = o.TryRun("GroupQueryAttention",
                         {{"num_heads", l.hq},
                          {"kv_num_heads", l.hkv},
                          {"scale", scale},
                          {"do_rotary", int64_t{1}},
                          {"rotary_interleaved", int64_t{c.interleaved ? 1 : 0}},
                          {"local_window_size", c.window},
                          {"softcap", c.softcap},
                          {"smooth_softmax", int64_t{c.smooth ? 1 : 0}}},
                         3, "com.microsoft");
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    const std::vector<Tensor> got =
        GqaByDeviceMath(l, query, c.packed ? nullptr : &key, c.packed ? nullptr : &value,
                        c.with_past ? &past_k : nullptr, c.with_past ? &past_v : nullptr, c.lens,
                        &cos, &sin, scale);
    for (size_t k = 0; k < 3; ++k) {
      INFO("output " << k);
      REQUIRE(got[k].shape() == (*want)[k].shape());
      RequireClose(Floats(got[k]), Floats((*want)[k]), 2e-5f);
    }
  }
  // A row with more keys than past + seq, and a position past the caches, are refused.
  math::GqaLayout l;
  l.batch = 1;
  l.seq = 1;
  l.past = 2;
  l.total = 3;
  l.cache_rows = 2;
  int64_t keys = 0, own = 0, pos = 0;
  CHECK(!math::GqaRowKeys(l, 3, &keys, &own));
  REQUIRE(math::GqaRowKeys(l, 2, &keys, &own));
  const int64_t* none = nullptr;
  CHECK(!math::GqaPosition(l, none, own, 0, 0, &pos));  // own + 0 = 2, caches of 2
}

TEST_CASE("Comparison, predicate and logic element math equals the CPU kernels",
          "[runtime][device-math]") {
  // Values with ties, infinities and a NaN; b broadcast along the last dim.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor a = F32({2, 3}, {1.0f, -inf, std::nanf(""), 2.0f, inf, 0.5f});
  const Tensor b = F32({2, 1}, {1.0f, 2.0f});
  const StridedView va = math::ContiguousView({2, 3}), vb = math::BroadcastView({2, 1}, {2, 3});
  const std::vector<std::pair<std::string, math::CompareOp>> compares = {
      {"Equal", math::CompareOp::kEqual},
      {"Less", math::CompareOp::kLess},
      {"LessOrEqual", math::CompareOp::kLessOrEqual},
      {"Greater", math::CompareOp::kGreater},
      {"GreaterOrEqual", math::CompareOp::kGreaterOrEqual}};
  auto bools = [](const Tensor& t) {
    return std::vector<bool>(t.data<bool>(), t.data<bool>() + t.num_elements());
  };
  for (const auto& [name, op] : compares) {
    INFO(name);
    OneOp o;
    o.Input("a", a);
    o.Input("b", b);
    const std::vector<bool> want = bools(o.Run(name)[0]);
    bool got[6];
    for (int64_t i = 0; i < 6; ++i) {
      math::CompareElement<FloatKind::kF32>(op, a.data<float>(), va, b.data<float>(), vb, got, i);
    }
    CHECK(std::vector<bool>(got, got + 6) == want);
  }
  const std::vector<std::tuple<std::string, math::Predicate, ir::Attributes>> predicates = {
      {"IsNaN", {.nan = true}, {}},
      {"IsInf", {}, {}},
      {"IsInf",
       {.nan = false, .positive = false, .negative = true},
       {{"detect_positive", int64_t{0}}}},
      {"IsInf",
       {.nan = false, .positive = true, .negative = false},
       {{"detect_negative", int64_t{0}}}}};
  for (const auto& [name, p, attrs] : predicates) {
    INFO(name << " " << p.positive << p.negative);
    OneOp o;
    o.Input("a", a);
    const std::vector<bool> want = bools(o.Run(name, attrs)[0]);
    bool got[6];
    for (int64_t i = 0; i < 6; ++i)
      math::PredicateElement<FloatKind::kF32>(p, a.data<float>(), got, i);
    CHECK(std::vector<bool>(got, got + 6) == want);
  }
  Tensor x = Tensor::Allocate(ir::DType::kBool, {2, 2}),
         y = Tensor::Allocate(ir::DType::kBool, {2});
  const bool xv[4] = {true, false, true, true}, yv[2] = {false, true};
  std::copy(xv, xv + 4, x.data<bool>());
  std::copy(yv, yv + 2, y.data<bool>());
  const StridedView vx = math::ContiguousView({2, 2}), vy = math::BroadcastView({2}, {2, 2});
  for (const auto& [name, op] :
       std::vector<std::pair<std::string, math::LogicOp>>{{"And", math::LogicOp::kAnd},
                                                          {"Or", math::LogicOp::kOr},
                                                          {"Xor", math::LogicOp::kXor},
                                                          {"Not", math::LogicOp::kNot}}) {
    INFO(name);
    OneOp o;
    o.Input("x", x);
    if (op != math::LogicOp::kNot) o.Input("y", y);
    const std::vector<bool> want = bools(o.Run(name)[0]);
    bool got[4];
    for (int64_t i = 0; i < 4; ++i) {
      math::LogicElement(op, x.data<bool>(), vx, y.data<bool>(), vy, got, i);
    }
    CHECK(std::vector<bool>(got, got + 4) == want);
  }
}

TEST_CASE("ONNX Attention's row math, composed as the CUDA kernel does, equals the CPU kernel",
          "[runtime][device-math]") {
  // 4-D Q [B, Hq, qs, hd], K/V [B, Hkv, s, hd] after a past of 2; GQA heads.
  const int64_t b = 2, hq = 4, hkv = 2, qs = 3, s = 3, hd = 4, past = 2, total = past + s;
  const Tensor q = Random({b, hq, qs, hd}, 80), k = Random({b, hkv, s, hd}, 81),
               v = Random({b, hkv, s, hd}, 82), pk = Random({b, hkv, past, hd}, 83),
               pv = Random({b, hkv, past, hd}, 84);
  Tensor bool_mask = Tensor::Allocate(ir::DType::kBool, {qs, 4});  // 4 < total columns
  for (int64_t i = 0; i < qs * 4; ++i) bool_mask.data<bool>()[i] = (i * 5) % 3 != 0;
  const Tensor float_mask = Random({b, 1, qs, total}, 85);
  struct Case {
    const Tensor* mask;
    bool causal;
    float softcap;
    int64_t mode;
  };
  const std::vector<Case> cases = {
      {nullptr, true, 0.0f, 0}, {&bool_mask, false, 0.0f, 3}, {&float_mask, true, 2.0f, 2}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    OneOp o(23);
    o.Input("q", q);
    o.Input("k", k);
    o.Input("v", v);
    if (c.mask != nullptr) {
      o.Input("m", *c.mask);
    } else {
      o.None();
    }
    o.Input("pk", pk);
    o.Input("pv", pv);
    const float scale = 0.5f;
    const std::vector<Tensor> want = o.Run("Attention",
                                           {{"scale", scale},
                                            {"is_causal", int64_t{c.causal ? 1 : 0}},
                                            {"softcap", c.softcap},
                                            {"qk_matmul_output_mode", c.mode}},
                                           4);
    math::SdpaLayout l;
    l.batch = b;
    l.hq = hq;
    l.qs = qs;
    l.total = total;
    l.past = past;
    l.causal = c.causal;
    l.softcap = c.softcap;
    l.qk_mode = static_cast<int>(c.mode);
    if (c.mask != nullptr) {
      l.mask = c.mask->dtype() == ir::DType::kBool ? 1 : 2;
      l.mask_cols = c.mask->shape().back();
      const StridedView mv = math::BroadcastView(c.mask->shape(), {b, hq, qs, l.mask_cols});
      for (int d = 0; d < 4; ++d) l.mask_strides[d] = mv.strides[d];
    }
    std::vector<float> y(static_cast<size_t>(b * hq * qs * hd)),
        qk(static_cast<size_t>(b * hq * qs * total));
    for (int64_t bb = 0; bb < b; ++bb) {
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / (hq / hkv);
        auto key = [&](int64_t j, int64_t d) {
          return j < past ? pk.data<float>()[((bb * hkv + g) * past + j) * hd + d]
                          : k.data<float>()[((bb * hkv + g) * s + j - past) * hd + d];
        };
        auto val = [&](int64_t j, int64_t d) {
          return j < past ? pv.data<float>()[((bb * hkv + g) * past + j) * hd + d]
                          : v.data<float>()[((bb * hkv + g) * s + j - past) * hd + d];
        };
        for (int64_t i = 0; i < qs; ++i) {
          std::vector<float> raw(static_cast<size_t>(total)), sc(static_cast<size_t>(total));
          float mx = -INFINITY;
          for (int64_t j = 0; j < total; ++j) {
            float dot = 0;
            for (int64_t d = 0; d < hd; ++d) {
              dot += q.data<float>()[((bb * hq + h) * qs + i) * hd + d] * key(j, d);
            }
            raw[static_cast<size_t>(j)] = scale * dot;
            sc[static_cast<size_t>(j)] =
                math::SdpaSoftcap(l, scale * dot) +
                math::SdpaBias<FloatKind::kF32>(l, c.mask ? c.mask->raw() : nullptr, nullptr, bb, h,
                                                i, j);
            mx = std::max(mx, sc[static_cast<size_t>(j)]);
          }
          float sum = 0;
          for (float x : sc) sum += mx == -INFINITY ? 0.0f : math::SoftmaxTerm(x, mx);
          for (int64_t j = 0; j < total; ++j) {
            const float p = mx == -INFINITY
                                ? 0.0f
                                : math::SoftmaxElement(sc[static_cast<size_t>(j)], mx, sum, false);
            qk[static_cast<size_t>(((bb * hq + h) * qs + i) * total + j)] =
                l.qk_mode <= 1   ? math::SdpaSoftcap(l, raw[static_cast<size_t>(j)])
                : l.qk_mode == 2 ? sc[static_cast<size_t>(j)]
                                 : p;
            for (int64_t d = 0; d < hd; ++d) {
              y[static_cast<size_t>(((bb * hq + h) * qs + i) * hd + d)] += p * val(j, d);
            }
          }
        }
      }
    }
    RequireClose(y, Floats(want[0]), 2e-5f);
    // -inf where masked compares equal; RequireClose needs finite values.
    const std::vector<float> want_qk = Floats(want[3]);
    REQUIRE(want_qk.size() == qk.size());
    for (size_t i = 0; i < qk.size(); ++i) {
      INFO("qk " << i << ": " << qk[i] << " vs " << want_qk[i]);
      if (std::isinf(want_qk[i])) {
        CHECK(qk[i] == want_qk[i]);
      } else {
        CHECK(std::abs(qk[i] - want_qk[i]) <= 2e-5f * (1.0f + std::abs(want_qk[i])));
      }
    }
  }
}

TEST_CASE("RotaryEmbedding element math equals the CPU kernels", "[runtime][device-math]") {
  struct Case {
    std::string domain;
    bool four_d, interleaved;
    int pos_mode;  // 0 none, 1 [batch, seq], 2 onnxruntime's [1] offset
    int64_t rd;    // rotary_embedding_dim (0: the head)
  };
  const std::vector<Case> cases = {{"", false, false, 1, 0},
                                   {"", true, true, 0, 4},
                                   {"", false, true, 1, 6},
                                   {"com.microsoft", false, false, 2, 0},
                                   {"com.microsoft", true, true, 1, 0}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    math::RotaryLayout l;
    l.batch = 2;
    l.heads = 3;
    l.seq = 4;
    l.hd = 8;
    l.four_d = c.four_d;
    l.interleaved = c.interleaved;
    l.pos_mode = c.pos_mode;
    const int64_t rd = c.rd == 0 ? l.hd : c.rd;
    l.half = rd / 2;
    l.cache_rows = c.pos_mode == 0 ? l.batch * l.seq : 12;
    const Tensor x = c.four_d ? Random({l.batch, l.heads, l.seq, l.hd}, 90)
                              : Random({l.batch, l.seq, l.heads * l.hd}, 90);
    const std::vector<int64_t> cache_shape = c.pos_mode == 0
                                                 ? std::vector<int64_t>{l.batch, l.seq, l.half}
                                                 : std::vector<int64_t>{l.cache_rows, l.half};
    const Tensor cos = Random(cache_shape, 91), sin = Random(cache_shape, 92);
    std::vector<int64_t> ids;
    if (c.pos_mode == 1) {
      for (int64_t i = 0; i < l.batch * l.seq; ++i) ids.push_back((i * 5) % 12);
    } else if (c.pos_mode == 2) {
      ids = {3};
    }
    const Tensor pos = c.pos_mode == 1
                           ? testing::I64({l.batch, l.seq}, ids)
                           : testing::I64({1}, ids.empty() ? std::vector<int64_t>{0} : ids);
    OneOp o(23);
    o.Input("x", x);
    ir::Attributes attrs = {{"interleaved", int64_t{c.interleaved ? 1 : 0}}};
    if (c.rd != 0) attrs["rotary_embedding_dim"] = c.rd;
    if (!c.four_d) attrs["num_heads"] = l.heads;
    if (c.domain.empty()) {
      o.Input("cos", cos);
      o.Input("sin", sin);
      if (c.pos_mode == 1) o.Input("pos", pos);
    } else {
      o.Input("pos", pos);
      o.Input("cos", cos);
      o.Input("sin", sin);
      o.output_type = ir::TensorType(ir::DType::kF32, {});
    }
    auto want = o.TryRun("RotaryEmbedding", attrs, 1, c.domain);
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    std::vector<float> got(static_cast<size_t>(x.num_elements()));
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      REQUIRE(math::RotaryEmbeddingElement<FloatKind::kF32>(l, x.data<float>(), pos.data<int64_t>(),
                                                            cos.data<float>(), sin.data<float>(),
                                                            got.data(), i));
    }
    RequireClose(got, Floats((*want)[0]), 1e-6f);
  }
}

TEST_CASE(
    "onnxruntime's MultiHeadAttention masking, composed as the CUDA kernel does, equals "
    "the CPU kernel",
    "[runtime][device-math]") {
  // query [B, qs, H·hd], key/value [B, kv, H·hd] with a projection bias, a past of 2, the
  // padding mask [B, total], an attention bias [1, H, qs, total], unidirectional.
  const int64_t b = 2, heads = 2, qs = 3, kv = 3, hd = 4, past = 2, total = past + kv;
  const Tensor query = Random({b, qs, heads * hd}, 100), key = Random({b, kv, heads * hd}, 101),
               value = Random({b, kv, heads * hd}, 102), bias = Random({3 * heads * hd}, 103),
               pk = Random({b, heads, past, hd}, 104), pv = Random({b, heads, past, hd}, 105),
               attn_bias = Random({1, heads, qs, total}, 106);
  Tensor pad = Tensor::Allocate(ir::DType::kI32, {b, total});
  const int32_t pad_values[10] = {1, 1, 0, 1, 1, 1, 1, 1, 1, 0};
  std::copy(pad_values, pad_values + 10, pad.data<int32_t>());
  for (bool causal : {false, true}) {
    INFO("unidirectional " << causal);
    OneOp o;
    o.Input("q", query);
    o.Input("k", key);
    o.Input("v", value);
    o.Input("bias", bias);
    o.Input("pad", pad);
    o.Input("ab", attn_bias);
    o.Input("pk", pk);
    o.Input("pv", pv);
    o.output_type = ir::TensorType(ir::DType::kF32, {});
    auto want = o.TryRun("MultiHeadAttention",
                         {{"num_heads", heads}, {"unidirectional", int64_t{causal ? 1 : 0}}}, 3,
                         "com.microsoft");
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    math::SdpaLayout l;
    l.batch = b;
    l.hq = heads;
    l.qs = qs;
    l.total = total;
    l.past = past;
    l.causal = causal;
    l.ort = true;
    l.pad_mode = 1;
    l.mask = 2;
    l.mask_cols = total;
    const StridedView bv = math::BroadcastView({1, heads, qs, total}, {b, heads, qs, total});
    for (int d = 0; d < 4; ++d) l.mask_strides[d] = bv.strides[d];
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> y(static_cast<size_t>(b * qs * heads * hd));
    for (int64_t bb = 0; bb < b; ++bb) {
      for (int64_t h = 0; h < heads; ++h) {
        auto qv = [&](int64_t i, int64_t d) {
          return query.data<float>()[(bb * qs + i) * heads * hd + h * hd + d] +
                 bias.data<float>()[h * hd + d];
        };
        auto kvv = [&](const Tensor& past_t, const Tensor& new_t, int64_t off, int64_t j,
                       int64_t d) {
          return j < past ? past_t.data<float>()[((bb * heads + h) * past + j) * hd + d]
                          : new_t.data<float>()[(bb * kv + j - past) * heads * hd + h * hd + d] +
                                bias.data<float>()[off + h * hd + d];
        };
        for (int64_t i = 0; i < qs; ++i) {
          std::vector<float> sc(static_cast<size_t>(total));
          float mx = -INFINITY;
          for (int64_t j = 0; j < total; ++j) {
            float dot = 0;
            for (int64_t d = 0; d < hd; ++d) dot += qv(i, d) * kvv(pk, key, heads * hd, j, d);
            sc[static_cast<size_t>(j)] =
                scale * dot + math::SdpaBias<FloatKind::kF32>(l, attn_bias.raw(),
                                                              pad.data<int32_t>(), bb, h, i, j);
            mx = std::max(mx, sc[static_cast<size_t>(j)]);
          }
          float sum = 0;
          for (float x : sc) sum += math::SoftmaxTerm(x, mx);
          for (int64_t j = 0; j < total; ++j) {
            const float p = math::SoftmaxElement(sc[static_cast<size_t>(j)], mx, sum, false);
            for (int64_t d = 0; d < hd; ++d) {
              y[static_cast<size_t>((bb * qs + i) * heads * hd + h * hd + d)] +=
                  p * kvv(pv, value, 2 * heads * hd, j, d);
            }
          }
        }
      }
    }
    RequireClose(y, Floats((*want)[0]), 2e-5f);
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

// A row kernel's statistics as a block of `threads` threads gathers them: each thread
// folds every threads-th element, then the partial results combine pairwise.
template <typename T, typename Fold, typename Combine>
T BlockFold(int64_t len, int threads, T init, Fold fold, Combine combine) {
  std::vector<T> part(static_cast<size_t>(threads), init);
  for (int t = 0; t < threads; ++t) {
    for (int64_t j = t; j < len; j += threads)
      part[static_cast<size_t>(t)] = fold(part[static_cast<size_t>(t)], j);
  }
  for (int s = threads / 2; s > 0; s >>= 1) {
    for (int t = 0; t < s; ++t) {
      part[static_cast<size_t>(t)] =
          combine(part[static_cast<size_t>(t)], part[static_cast<size_t>(t + s)]);
    }
  }
  return part[0];
}

// The same fold as one warp's lanes do it: lane l folds elements l, l + 32, ..., then
// xor shuffles combine lanes (each lane combining its value with lane l ^ off's).
template <typename T, typename Fold, typename Combine>
T WarpFold(int64_t len, T init, Fold fold, Combine combine) {
  std::vector<T> lane(32, init);
  for (int l = 0; l < 32; ++l) {
    for (int64_t j = l; j < len; j += 32)
      lane[static_cast<size_t>(l)] = fold(lane[static_cast<size_t>(l)], j);
  }
  for (int off = 16; off > 0; off >>= 1) {
    std::vector<T> next(lane);
    for (int l = 0; l < 32; ++l) {
      next[static_cast<size_t>(l)] =
          combine(lane[static_cast<size_t>(l)], lane[static_cast<size_t>(l ^ off)]);
    }
    lane = next;
  }
  return lane[0];
}

TEST_CASE("Softmax and norm row math, folded as a thread block does, equals the CPU kernels",
          "[runtime][device-math]") {
  const Tensor x = Random({3, 300}, 5);
  const int threads = 256;
  for (bool log : {false, true}) {
    OneOp o;
    o.Input("x", x);
    const std::vector<float> want = Floats(o.Run(log ? "LogSoftmax" : "Softmax")[0]);
    std::vector<float> got(want.size());
    const math::RowLayout rl{3, 300, 1};
    for (int64_t r = 0; r < rl.rows(); ++r) {
      const float* row = x.data<float>() + rl.Start(r);
      const float mx = BlockFold(
          300, threads, -INFINITY, [&](float m, int64_t j) { return math::CombineMax(m, row[j]); },
          [](float a, float b) { return math::CombineMax(a, b); });
      const float sum = BlockFold(
          300, threads, 0.0f, [&](float s, int64_t j) { return s + math::SoftmaxTerm(row[j], mx); },
          [](float a, float b) { return a + b; });
      for (int64_t j = 0; j < 300; ++j)
        got[static_cast<size_t>(r * 300 + j)] = math::SoftmaxElement(row[j], mx, sum, log);
    }
    RequireClose(got, want, 1e-5f);
  }
  const Tensor scale = Random({300}, 6), bias = Random({300}, 7);
  OneOp o;
  o.Input("x", x);
  o.Input("s", scale);
  o.Input("b", bias);
  const std::vector<float> want = Floats(o.Run("LayerNormalization", {{"epsilon", 1e-5f}})[0]);
  std::vector<float> got(want.size());
  for (int64_t r = 0; r < 3; ++r) {
    const float* row = x.data<float>() + r * 300;
    const math::Moments m = BlockFold(
        300, threads, math::Moments{},
        [&](math::Moments acc, int64_t j) {
          acc.Add(row[j]);
          return acc;
        },
        [](const math::Moments& a, const math::Moments& b) {
          return math::Moments::Combine(a, b);
        });
    const float inv = math::InvStd(m.Variance(), 1e-5f);
    for (int64_t j = 0; j < 300; ++j) {
      got[static_cast<size_t>(r * 300 + j)] =
          math::NormElement(row[j], m.mean, inv, scale.data<float>()[j], bias.data<float>()[j]);
    }
  }
  RequireClose(got, want, 1e-5f);
}

TEST_CASE("Reduction row math equals the CPU kernels", "[runtime][device-math]") {
  const Tensor x = Random({4, 5, 6}, 8);
  const std::vector<std::pair<std::string, math::ReduceKind>> ops = {
      {"ReduceSum", math::ReduceKind::kSum},
      {"ReduceMean", math::ReduceKind::kMean},
      {"ReduceMax", math::ReduceKind::kMax},
      {"ReduceMin", math::ReduceKind::kMin}};
  for (const auto& [name, kind] : ops) {
    INFO(name);
    OneOp o;
    o.Input("x", x);
    o.Ints({1});
    const std::vector<float> want = Floats(o.Run(name, {{"keepdims", int64_t{0}}})[0]);
    const math::RowLayout rl{4, 5, 6};  // axis 1
    std::vector<float> got(static_cast<size_t>(rl.rows()));
    for (int64_t r = 0; r < rl.rows(); ++r) {
      const float* p = x.data<float>() + rl.Start(r);
      const float acc = BlockFold(
          5, 4, math::ReduceInit(kind),
          [&](float a, int64_t j) {
            return math::ReduceCombine(kind, a, math::ReduceTerm(kind, p[j * rl.stride()]));
          },
          [&](float a, float b) { return math::ReduceCombine(kind, a, b); });
      got[static_cast<size_t>(r)] = math::ReduceFinish(kind, acc, rl.len);
    }
    RequireClose(got, want, 1e-5f);
  }
}

TEST_CASE("The reduction across ranks of a collective on one GPU combines in rank order",
          "[runtime][device-math]") {
  const int n = 3;
  std::vector<Tensor> ins;
  for (int k = 0; k < n; ++k) ins.push_back(Random({40}, 20 + static_cast<uint32_t>(k)));
  for (int op = 0; op < 4; ++op) {  // sum, max, min, avg
    std::vector<std::vector<float>> outs(2, std::vector<float>(40));
    math::RankPointers p;
    p.n = n;
    for (int k = 0; k < n; ++k) p.in[k] = ins[static_cast<size_t>(k)].data<float>();
    p.n_out = 2;
    p.out[0] = outs[0].data();
    p.out[1] = outs[1].data();
    for (int64_t i = 0; i < 40; ++i) {
      math::ReduceRanksElement<FloatKind::kF32>(op == 3 ? 0 : op, op == 3, p, i);
    }
    for (int64_t i = 0; i < 40; ++i) {
      float want = ins[0].data<float>()[i];
      for (int k = 1; k < n; ++k) {
        const float v = ins[static_cast<size_t>(k)].data<float>()[i];
        want = op == 1 ? std::max(want, v) : op == 2 ? std::min(want, v) : want + v;
      }
      if (op == 3) want /= n;
      REQUIRE(outs[0][static_cast<size_t>(i)] == want);
      REQUIRE(outs[1][static_cast<size_t>(i)] == want);
    }
  }
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
