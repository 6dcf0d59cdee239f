// The device math of the tiling, convolution, pool, pad, resize, loss and bool-output
// kernels (tpc/runtime/math: strided.h's TileViews, conv.h, pool.h, pad.h, resize.h, loss.h,
// logic.h), run on the host element by element as the kernels' threads do, against the CPU
// kernels.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/deform_conv.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/logic.h"
#include "tpc/runtime/math/loss.h"
#include "tpc/runtime/math/pad.h"
#include "tpc/runtime/math/pointwise.h"
#include "tpc/runtime/math/pool.h"
#include "tpc/runtime/math/resize.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using math::FloatKind;
using math::StridedView;
using testing::F32;
using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

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

// ConvTranspose as the CUDA kernel runs it: per image and group col = W_gᵀ · X_g, then the
// col2im gather (math::Col2ImElement) over the output, then the bias; against the CPU's
// scatter-add.
TEST_CASE("The transposed convolution by one GEMM and the col2im gather equals the CPU's",
          "[runtime][device-math]") {
  struct Case {
    std::vector<int64_t> x, w;  // w [C, M / group, kernel...]
    ir::Attributes attrs;
  };
  const std::vector<Case> cases = {
      {{1, 3, 4, 5}, {3, 2, 3, 3}, {{"strides", std::vector<int64_t>{2, 2}}}},
      {{2, 4, 3, 3},
       {4, 3, 2, 3},
       {{"group", int64_t{2}},
        {"strides", std::vector<int64_t>{2, 1}},
        {"pads", std::vector<int64_t>{1, 0, 0, 2}},
        {"output_padding", std::vector<int64_t>{1, 0}}}},
      {{1, 2, 6},
       {2, 3, 3},
       {{"dilations", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{3}}}},
      {{1, 2, 2, 3, 2}, {2, 2, 2, 2, 2}, {{"strides", std::vector<int64_t>{2, 1, 2}}}},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    const Tensor x = Random(c.x, 120 + static_cast<uint32_t>(ci));
    const Tensor w = Random(c.w, 140 + static_cast<uint32_t>(ci));
    const int64_t group = c.attrs.count("group") ? std::get<int64_t>(c.attrs.at("group")) : 1;
    const int64_t m = c.w[1] * group;
    const Tensor b = Random({m}, 160);
    OneOp o;
    o.Input("x", x);
    o.Input("w", w);
    o.Input("b", b);
    const Tensor y = o.Run("ConvTranspose", c.attrs)[0];
    const auto attr = [&](const char* name, int64_t def, int d) -> int64_t {
      auto it = c.attrs.find(name);
      if (it == c.attrs.end()) return def;
      return std::get<std::vector<int64_t>>(it->second)[static_cast<size_t>(d)];
    };
    // The convolution this one transposes: its input is y, its output positions x's.
    const int spatial = static_cast<int>(c.x.size()) - 2;
    math::ConvGeometry g;
    g.spatial = spatial;
    for (int d = 0; d < spatial; ++d) {
      g.in[d] = y.dim(d + 2);
      g.out[d] = c.x[static_cast<size_t>(d) + 2];
      g.kernel[d] = c.w[static_cast<size_t>(d) + 2];
      g.strides[d] = attr("strides", 1, d);
      g.dilations[d] = attr("dilations", 1, d);
      g.pad_begin[d] = attr("pads", 0, d);
      g.taps *= g.kernel[d];
      g.outs *= g.out[d];
      g.in_size *= g.in[d];
    }
    const int64_t n = c.x[0], ch = c.x[1], cg = ch / group, mg = m / group, rows = mg * g.taps;
    std::vector<float> col(static_cast<size_t>(rows * g.outs));
    std::vector<float> got(static_cast<size_t>(y.num_elements()));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t grp = 0; grp < group; ++grp) {
        for (int64_t r = 0; r < rows; ++r) {  // col = W_gᵀ · X_g
          for (int64_t p = 0; p < g.outs; ++p) {
            double acc = 0;
            for (int64_t q = 0; q < cg; ++q) {
              acc += static_cast<double>(w.data<float>()[(grp * cg + q) * rows + r]) *
                     x.data<float>()[((i * ch) + grp * cg + q) * g.outs + p];
            }
            col[static_cast<size_t>(r * g.outs + p)] = static_cast<float>(acc);
          }
        }
        float* yg = got.data() + (i * m + grp * mg) * g.in_size;
        for (int64_t e = 0; e < mg * g.in_size; ++e) {
          math::Col2ImElement<FloatKind::kF32>(g, col.data(), yg, e);
        }
      }
    }
    for (int64_t e = 0; e < y.num_elements(); ++e) {
      got[static_cast<size_t>(e)] += b.data<float>()[(e / g.in_size) % m];
    }
    RequireClose(got, Floats(y), 2e-5f);
  }
}

// DeformConv as the CUDA kernel runs it: per image its sampled columns stored in the
// kernel's float type (math::DeformColElement), per group the GEMM with W, then the bias;
// two groups, two offset groups, a mask, strides, pads and dilations, offsets that move
// taps outside the image; against the CPU kernel.
TEST_CASE("DeformConv by sampled columns and a GEMM per group equals the CPU kernel",
          "[runtime][device-math]") {
  const int64_t n = 2, c = 4, h = 5, wd = 6, oc = 6, group = 2, og = 2, kh = 2, kw = 3;
  math::DeformGeometry g;
  g.c = c;
  g.h = h;
  g.w = wd;
  g.kh = kh;
  g.kw = kw;
  g.stride[0] = 2;
  g.pad[1] = 1;
  g.dilation[1] = 2;
  g.offset_group = og;
  g.oh = (h - kh) / 2 + 1;
  g.ow = (wd + 2 - (2 * (kw - 1) + 1)) + 1;
  const int64_t taps = kh * kw, plane = g.oh * g.ow, cg = c / group, ocg = oc / group;
  const Tensor x = Random({n, c, h, wd}, 201);
  const Tensor w = Random({oc, cg, kh, kw}, 202);
  const Tensor b = Random({oc}, 203);
  Tensor offset = Random({n, og * taps * 2, g.oh, g.ow}, 204);
  for (int64_t i = 0; i < offset.num_elements(); ++i) offset.data<float>()[i] *= 2.5f;
  const Tensor mask = Random({n, og * taps, g.oh, g.ow}, 205);
  OneOp o(19);
  o.Input("x", x);
  o.Input("w", w);
  o.Input("offset", offset);
  o.Input("b", b);
  o.Input("mask", mask);
  const Tensor want = o.Run("DeformConv", {{"group", group},
                                           {"offset_group", og},
                                           {"strides", std::vector<int64_t>{2, 1}},
                                           {"pads", std::vector<int64_t>{0, 1, 0, 1}},
                                           {"dilations", std::vector<int64_t>{1, 2}}})[0];
  REQUIRE(want.shape() == std::vector<int64_t>{n, oc, g.oh, g.ow});
  std::vector<float> got(static_cast<size_t>(want.num_elements())),
      col(static_cast<size_t>(c * taps * plane));
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x.data<float>() + i * c * h * wd;
    const float* oi = offset.data<float>() + i * og * taps * 2 * plane;
    const float* mi = mask.data<float>() + i * og * taps * plane;
    for (int64_t e = 0; e < static_cast<int64_t>(col.size()); ++e) {
      col[static_cast<size_t>(e)] = static_cast<float>(math::DeformColElement(
          g, e, true, [&](int64_t j) { return static_cast<double>(xi[j]); },
          [&](int64_t j) { return static_cast<double>(oi[j]); },
          [&](int64_t j) { return static_cast<double>(mi[j]); }));
    }
    for (int64_t grp = 0; grp < group; ++grp) {
      for (int64_t r = 0; r < ocg; ++r) {
        const int64_t out_c = grp * ocg + r;
        for (int64_t p = 0; p < plane; ++p) {
          double acc = b.data<float>()[out_c];
          for (int64_t q = 0; q < cg * taps; ++q) {
            acc += static_cast<double>(w.data<float>()[out_c * cg * taps + q]) *
                   col[static_cast<size_t>((grp * cg * taps + q) * plane + p)];
          }
          got[static_cast<size_t>((i * oc + out_c) * plane + p)] = static_cast<float>(acc);
        }
      }
    }
  }
  RequireClose(got, Floats(want), 2e-5f);
}

// Col2Im as the CUDA kernel runs it: the images' columns read as N · C channels of one
// col2im gather (math::Col2ImElement), against the CPU's scatter-add; strides, dilations
// and pads.
TEST_CASE("Col2Im as one gather over every image equals the CPU kernel", "[runtime][device-math]") {
  const int64_t n = 2, c = 3;
  const std::vector<int64_t> image = {5, 6}, block = {2, 3}, strides = {1, 2}, dilations = {2, 1},
                             pads = {1, 0, 0, 1};
  math::ConvGeometry g;
  g.spatial = 2;
  for (int d = 0; d < 2; ++d) {
    const auto u = static_cast<size_t>(d);
    g.in[d] = image[u];
    g.kernel[d] = block[u];
    g.strides[d] = strides[u];
    g.dilations[d] = dilations[u];
    g.pad_begin[d] = pads[u];
    g.pad_end[d] = pads[u + 2];
    g.out[d] =
        (image[u] + pads[u] + pads[u + 2] - dilations[u] * (block[u] - 1) - 1) / strides[u] + 1;
    g.taps *= g.kernel[d];
    g.outs *= g.out[d];
    g.in_size *= g.in[d];
  }
  const Tensor x = Random({n, c * g.taps, g.outs}, 171);
  OneOp o;
  o.Input("x", x);
  o.Ints(image);
  o.Ints(block);
  const Tensor want =
      o.Run("Col2Im", {{"strides", strides}, {"dilations", dilations}, {"pads", pads}})[0];
  std::vector<float> got(static_cast<size_t>(want.num_elements()));
  for (int64_t e = 0; e < n * c * g.in_size; ++e) {
    math::Col2ImElement<FloatKind::kF32>(g, x.data<float>(), got.data(), e);
  }
  RequireClose(got, Floats(want), 2e-6f);
}

// MaxPool (its Indices row- and column-major), AveragePool (with and without the padding
// in the divisor) and LpPool over 1-D, 2-D and 3-D windows with strides, dilations, pads
// and ceil_mode, one output element at a time as pool.cu's threads compute them.
TEST_CASE("Windowed pool element math equals the CPU kernels", "[runtime][device-math]") {
  struct PoolCase {
    std::string op;
    std::vector<int64_t> x, kernel, strides, dilations, pads;
    ir::Attributes extra;
    math::PoolParams pp;
  };
  const auto params = [](math::PoolOp op, bool include_pad = false, float p = 2.0f,
                         bool column_major = false) {
    math::PoolParams pp;
    pp.op = op;
    pp.count_include_pad = include_pad;
    pp.p = p;
    pp.column_major = column_major;
    return pp;
  };
  using P = math::PoolOp;
  const std::vector<PoolCase> cases = {
      {"MaxPool", {2, 3, 7, 6}, {3, 2}, {2, 1}, {1, 2}, {1, 0, 1, 1}, {}, params(P::kMax)},
      {"MaxPool",
       {1, 2, 7, 6},
       {3, 3},
       {2, 2},
       {1, 1},
       {1, 1, 1, 1},
       {{"storage_order", int64_t{1}}, {"ceil_mode", int64_t{1}}},
       params(P::kMax, false, 2.0f, true)},
      {"MaxPool", {1, 2, 9}, {4}, {3}, {1}, {2, 2}, {}, params(P::kMax)},
      {"AveragePool", {2, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {}, params(P::kAverage)},
      {"AveragePool",
       {2, 3, 7, 6},
       {3, 3},
       {2, 2},
       {1, 1},
       {1, 1, 1, 1},
       {{"count_include_pad", int64_t{1}}},
       params(P::kAverage, true)},
      {"AveragePool",
       {1, 2, 4, 5, 6},
       {2, 3, 2},
       {1, 2, 2},
       {1, 1, 1},
       {0, 1, 0, 1, 1, 1},
       {},
       params(P::kAverage)},
      {"LpPool", {2, 3, 7, 6}, {2, 2}, {1, 2}, {1, 1}, {0, 0, 0, 0}, {}, params(P::kLp)},
      {"LpPool",
       {2, 3, 7, 6},
       {3, 2},
       {2, 1},
       {1, 1},
       {1, 0, 1, 0},
       {{"p", int64_t{3}}},
       params(P::kLp, false, 3.0f)},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const PoolCase& pc = cases[c];
    INFO("case " << c << ": " << pc.op);
    const Tensor x = Random(pc.x, 41 + static_cast<uint32_t>(c));
    OneOp o;
    o.Input("x", x);
    ir::Attributes attrs = pc.extra;
    attrs["kernel_shape"] = pc.kernel;
    attrs["strides"] = pc.strides;
    attrs["pads"] = pc.pads;
    if (pc.op != "AveragePool" && pc.op != "LpPool") attrs["dilations"] = pc.dilations;
    const bool indices = pc.op == "MaxPool";
    const std::vector<Tensor> want = o.Run(pc.op, attrs, indices ? 2 : 1);
    const size_t s = pc.kernel.size();
    math::ConvGeometry g;
    g.spatial = static_cast<int>(s);
    for (size_t d = 0; d < s; ++d) {
      g.in[d] = pc.x[d + 2];
      g.kernel[d] = pc.kernel[d];
      g.strides[d] = pc.strides[d];
      g.dilations[d] = pc.dilations[d];
      g.pad_begin[d] = pc.pads[d];
      g.pad_end[d] = pc.pads[d + s];
      g.out[d] = want[0].dim(static_cast<int64_t>(d) + 2);  // the CPU's output size
      g.taps *= g.kernel[d];
      g.outs *= g.out[d];
      g.in_size *= g.in[d];
    }
    const int64_t n = want[0].num_elements();
    REQUIRE(n == pc.x[0] * pc.x[1] * g.outs);
    std::vector<float> got(static_cast<size_t>(n));
    std::vector<int64_t> index(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      math::PoolElement<FloatKind::kF32>(g, pc.pp, x.data<float>(), got.data(),
                                         indices ? index.data() : nullptr, i);
    }
    RequireClose(got, Floats(want[0]), 2e-6f);
    if (indices) {
      CHECK(index == std::vector<int64_t>(want[1].data<int64_t>(), want[1].data<int64_t>() + n));
    }
  }
}

// GlobalLpPool with p other than 1 and 2 (those are ReduceL1/L2 rows): the whole plane as
// one window (math::WholePlaneWindow), against the CPU kernel.
TEST_CASE("GlobalLpPool as one whole-plane window equals the CPU kernel",
          "[runtime][device-math]") {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2, 3, 4, 5}, std::vector<int64_t>{1, 2, 7},
        std::vector<int64_t>{1, 2, 2, 3, 2}}) {
    INFO("rank " << shape.size());
    const Tensor x = Random(shape, 57);
    OneOp o;
    o.Input("x", x);
    const Tensor want = o.Run("GlobalLpPool", {{"p", int64_t{3}}})[0];
    const math::ConvGeometry g =
        math::WholePlaneWindow(shape.data() + 2, static_cast<int>(shape.size() - 2));
    math::PoolParams pp;
    pp.op = math::PoolOp::kLp;
    pp.p = 3.0f;
    std::vector<float> got(static_cast<size_t>(shape[0] * shape[1]));
    for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
      math::PoolElement<FloatKind::kF32>(g, pp, x.data<float>(), got.data(), nullptr, i);
    }
    RequireClose(got, Floats(want), 2e-6f);
  }
}

// Pad in each mode (negative pads cropping, axes), element by element as pad.cu's threads
// compute it (math::PadLayout), against the CPU kernel.
TEST_CASE("Pad element math equals the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({2, 3, 4}, 61);
  struct PadCase {
    std::string mode;
    std::vector<int64_t> pads, axes;  // axes empty: every dim
    math::PadMode m;
  };
  const std::vector<PadCase> cases = {
      {"constant", {0, 1, 2, 1, 0, 3}, {}, math::PadMode::kConstant},
      {"edge", {1, 2, 0, 0, 3, 2}, {}, math::PadMode::kEdge},
      {"reflect", {0, 2, 3, 0, 1, 3}, {}, math::PadMode::kReflect},
      {"wrap", {1, 2, 5, 1, 0, 2}, {}, math::PadMode::kWrap},
      {"constant", {-1, 2, 1, -2}, {1, -1}, math::PadMode::kConstant},
      {"reflect", {2, -1}, {2}, math::PadMode::kReflect},
  };
  for (const PadCase& c : cases) {
    INFO(c.mode << " with " << c.pads.size() << " pads");
    OneOp o;
    o.Input("x", x);
    o.Ints(c.pads);
    o.Input("value", F32({}, {0.75f}));
    if (!c.axes.empty()) o.Ints(c.axes);
    const Tensor want = o.Run("Pad", {{"mode", c.mode}})[0];
    math::PadLayout l;
    l.rank = 3;
    l.mode = c.m;
    const std::vector<int64_t> strides = {12, 4, 1};
    std::vector<int64_t> axes = c.axes;
    if (axes.empty()) axes = {0, 1, 2};
    for (int d = 0; d < 3; ++d) {
      l.in[d] = x.dim(d);
      l.out[d] = want.dim(d);
      l.in_strides[d] = strides[static_cast<size_t>(d)];
    }
    for (size_t i = 0; i < axes.size(); ++i) l.before[(axes[i] + 3) % 3] = c.pads[i];
    std::vector<float> got(static_cast<size_t>(want.num_elements()));
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      math::PadElement(l, x.data<float>(), 0.75f, got.data(), i);
    }
    RequireClose(got, Floats(want), 0.0f);
  }
}

// Trilu (upper and lower, k of both signs) and CumSum (exclusive, reversed, an inner axis)
// as their device threads compute them.
TEST_CASE("Trilu and CumSum element math equals the CPU kernels", "[runtime][device-math]") {
  const Tensor x = Random({2, 4, 5}, 62);
  for (const bool upper : {true, false}) {
    for (const int64_t k : {-1, 0, 2}) {
      INFO("Trilu upper " << upper << " k " << k);
      OneOp o;
      o.Input("x", x);
      o.Input("k", testing::I64({}, {k}));
      const Tensor want = o.Run("Trilu", {{"upper", int64_t{upper ? 1 : 0}}})[0];
      std::vector<float> got(40);
      for (int64_t i = 0; i < 40; ++i) {
        math::TriluElement(x.data<float>(), got.data(), 4, 5, upper, k, i);
      }
      RequireClose(got, Floats(want), 0.0f);
    }
  }
  for (const int64_t axis : {0, 1, 2}) {
    for (const int64_t exclusive : {0, 1}) {
      for (const int64_t reverse : {0, 1}) {
        INFO("CumSum axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
        OneOp o;
        o.Input("x", x);
        o.Input("axis", testing::I64({}, {axis}));
        const Tensor want = o.Run("CumSum", {{"exclusive", exclusive}, {"reverse", reverse}})[0];
        math::RowLayout l;
        for (int64_t i = 0; i < 3; ++i) {
          (i < axis ? l.outer : (i == axis ? l.len : l.inner)) *= x.dim(i);
        }
        std::vector<float> got(40, -1.0f);
        for (int64_t r = 0; r < l.rows(); ++r) {
          math::CumSumLine(
              l, r, exclusive != 0, reverse != 0, [&](int64_t at) { return x.data<float>()[at]; },
              [&](int64_t at, float v) { got[static_cast<size_t>(at)] = v; });
        }
        RequireClose(got, Floats(want), 1e-6f);
      }
    }
  }
}

// Resize as resize.cu runs it: one pass per resized dim, each output element from its
// taps (math::ResizeAxisElement), f32 between passes; against the CPU kernel, in each mode.
TEST_CASE("Resize axis passes equal the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({1, 2, 5, 6}, 71);
  struct ResizeCase {
    ir::Attributes attrs;
    std::vector<float> scales;  // of the two image dims
    std::vector<float> roi;     // empty: none
    math::ResizeOptions opt;
  };
  using math::ResizeCoord;
  using math::ResizeMode;
  const auto options = [](ResizeMode mode, ResizeCoord coord) {
    math::ResizeOptions o;
    o.mode = mode;
    o.coord = coord;
    return o;
  };
  std::vector<ResizeCase> cases = {
      {{{"mode", std::string("nearest")}},
       {2.0f, 1.5f},
       {},
       options(ResizeMode::kNearest, ResizeCoord::kHalfPixel)},
      {{{"mode", std::string("nearest")},
        {"nearest_mode", std::string("floor")},
        {"coordinate_transformation_mode", std::string("asymmetric")}},
       {1.6f, 0.5f},
       {},
       options(ResizeMode::kNearest, ResizeCoord::kAsymmetric)},
      {{{"mode", std::string("linear")}},
       {1.7f, 2.0f},
       {},
       options(ResizeMode::kLinear, ResizeCoord::kHalfPixel)},
      {{{"mode", std::string("linear")},
        {"coordinate_transformation_mode", std::string("align_corners")}},
       {0.6f, 1.5f},
       {},
       options(ResizeMode::kLinear, ResizeCoord::kAlignCorners)},
      {{{"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}},
       {1.5f, 0.8f},
       {},
       options(ResizeMode::kCubic, ResizeCoord::kHalfPixel)},
      {{{"mode", std::string("linear")}, {"antialias", int64_t{1}}},
       {0.4f, 0.5f},
       {},
       options(ResizeMode::kLinear, ResizeCoord::kHalfPixel)},
      {{{"mode", std::string("linear")},
        {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
        {"extrapolation_value", 2.5f}},
       {1.4f, 1.2f},
       {0.2f, -0.3f, 0.9f, 1.2f},
       options(ResizeMode::kLinear, ResizeCoord::kTfCropAndResize)},
  };
  cases[1].opt.nearest = math::ResizeNearest::kFloor;
  cases[4].opt.exclude_outside = true;
  cases[5].opt.antialias = true;
  cases[6].opt.extrapolation = 2.5;
  for (size_t c = 0; c < cases.size(); ++c) {
    const ResizeCase& rc = cases[c];
    INFO("case " << c);
    OneOp o;
    o.Input("x", x);
    if (rc.roi.empty()) {
      o.None();
    } else {
      o.Input("roi", F32({8}, {0, 0, rc.roi[0], rc.roi[1], 1, 1, rc.roi[2], rc.roi[3]}));
    }
    o.Input("scales", F32({4}, {1.0f, 1.0f, rc.scales[0], rc.scales[1]}));
    const Tensor want = o.Run("Resize", rc.attrs)[0];
    // The device's passes: dim 2 (f32 out), then dim 3.
    std::vector<float> cur(x.data<float>(), x.data<float>() + x.num_elements());
    std::vector<int64_t> shape = x.shape();
    for (int d = 2; d < 4; ++d) {
      math::ResizeAxisGeometry a;
      a.in = shape[static_cast<size_t>(d)];
      a.scale = rc.scales[static_cast<size_t>(d - 2)];
      a.out = static_cast<int64_t>(std::floor(a.scale * static_cast<double>(a.in)));
      if (!rc.roi.empty()) {
        a.roi_start = rc.roi[static_cast<size_t>(d - 2)];
        a.roi_end = rc.roi[static_cast<size_t>(d)];
      }
      REQUIRE(a.out == want.dim(d));
      const int64_t outer = d == 2 ? 2 : 2 * shape[2], inner = d == 2 ? shape[3] : 1;
      std::vector<float> next(static_cast<size_t>(outer * a.out * inner));
      for (int64_t i = 0; i < static_cast<int64_t>(next.size()); ++i) {
        next[static_cast<size_t>(i)] = static_cast<float>(math::ResizeAxisElement(
            rc.opt, a, inner, i, [&](int64_t at) { return cur[static_cast<size_t>(at)]; }));
      }
      cur.swap(next);
      shape[static_cast<size_t>(d)] = a.out;
    }
    RequireClose(cur, Floats(want), 1e-6f);
  }
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
}  // namespace
}  // namespace tpc::runtime
