// The fusion tests' graphs (each chain a pattern fuses, built as the exporters write it)
// and their runner: the same graph fused and unfused, outputs compared. Shared by
// fusion_test.cc (the CPU) and fusion_precision_test.cc (half types, the GPU).
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/plan/precision.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/fusion.h"
#include "tpc/util/half.h"

namespace tpc::runtime::fusion_testing {

using ir::Dim;
using ir::DType;

inline std::vector<float> Wave(int64_t n, float f, float amp = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = amp * std::sin(f * static_cast<float>(i) + 0.3f);
  return v;
}

inline Tensor Input(const std::vector<int64_t>& shape, float f) {
  Tensor t = Tensor::Allocate(DType::kF32, shape);
  const std::vector<float> v = Wave(t.num_elements(), f, 2.0f);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

inline ir::TensorType F32(std::vector<int64_t> dims) {
  std::vector<Dim> d;
  for (int64_t x : dims) d.emplace_back(x);
  return ir::TensorType(DType::kF32, d);
}

inline int CountOps(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->is_call() && node->op_type() == op;
  return n;
}

struct Case {
  std::function<void(ir::Graph&)> build;
  std::map<std::string, Tensor> inputs;
};

// `g` as a half-precision plan holds it (plan/precision.h), its constants converted.
inline void ToPrecision(ir::Graph& g, DType to) {
  if (to == DType::kF32) return;
  REQUIRE(plan::ConvertFloatPrecision(g, to).ok());
  for (ir::Node* n : g.NodeVector()) {
    if (n->kind() != ir::NodeKind::kConstant || n->output()->type().dtype != to ||
        n->tensor().dtype() != DType::kF32) {
      continue;
    }
    const ir::Tensor& t = n->tensor();
    std::string bytes(static_cast<size_t>(t.num_elements()) * 2, '\0');
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      float f;
      std::memcpy(&f, t.data() + i * 4, 4);
      const uint16_t h = to == DType::kF16 ? FloatToHalf(f) : FloatToBFloat16(f);
      std::memcpy(bytes.data() + i * 2, &h, 2);
    }
    n->set_tensor(ir::Tensor::FromBytes(to, t.shape(), std::move(bytes)));
  }
}

// Runs the graph `c` builds twice, fused and not (both in `precision`); returns the fused
// graph's stats and checks the outputs agree.
// `fused_on` (default: the CPU backend) runs the fused graph; the CPU runs the chain.
inline FusionStats RunBoth(const Case& c, int threads = 2, double tolerance = 2e-5,
                           DType precision = DType::kF32, Backend* fused_on = nullptr) {
  auto backend = MakeCpuBackend(threads);
  ir::Graph plain, fused;
  c.build(plain);
  c.build(fused);
  REQUIRE(onnx::InferShapes(plain).ok());
  REQUIRE(onnx::InferShapes(fused).ok());
  ToPrecision(plain, precision);
  ToPrecision(fused, precision);
  const std::string out_name = plain.outputs()[0]->name();
  Backend& fused_backend = fused_on != nullptr ? *fused_on : *backend;
  const FusionStats stats = FuseGraph(fused, fused_backend);
  CHECK(fused.outputs()[0]->name() == out_name);
  auto run = [&](const ir::Graph& g, Backend& on) {
    auto ex = Executor::Create(g, on, nullptr);
    REQUIRE(ex.ok());
    auto out = (*ex)->Run(c.inputs);
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    return std::move((*out)[0]);
  };
  const Tensor want = run(plain, *backend);
  const Tensor got = run(fused, fused_backend);
  REQUIRE(got.shape() == want.shape());
  double worst = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.data<float>()[i], g = got.data<float>()[i];
    if (std::isnan(w)) {
      CHECK(std::isnan(g));
      continue;
    }
    worst = std::max(worst, std::abs(w - g) / (1.0 + std::abs(w)));
  }
  INFO("worst relative difference " << worst);
  CHECK(worst < tolerance);
  return stats;
}

// x [2, 5, 24] · W [24, 40] (+ b [40]) → activation.
inline Case MatMulCase(const std::string& act, bool bias, bool bias_first = false) {
  Case c;
  c.build = [=](ir::Graph& g) {
    g.opsets()[""] = 20;
    ir::Value* x = g.AddPlaceholder("x", F32({2, 5, 24}));
    ir::Value* w = g.AddConstant("w", ir::Tensor::FromFloat({24, 40}, Wave(24 * 40, 0.37f, 0.3f)));
    ir::Value* y = g.AddCall("", "MatMul", {x, w}, {"mm"})->output();
    if (bias) {
      ir::Value* b = g.AddConstant("b", ir::Tensor::FromFloat({40}, Wave(40, 0.9f)));
      y = g.AddCall("", "Add", bias_first ? std::vector<ir::Value*>{b, y} : std::vector{y, b},
                    {"biased"})
              ->output();
    }
    if (act == "SiLU") {
      ir::Value* s = g.AddCall("", "Sigmoid", {y}, {"sig"})->output();
      y = g.AddCall("", "Mul", {s, y}, {"silu"})->output();
    } else if (act == "GeluTanh") {
      y = g.AddCall("", "Gelu", {y}, {"act"}, {{"approximate", std::string("tanh")}})->output();
    } else if (!act.empty()) {
      y = g.AddCall("", act, {y}, {"act"})->output();
    }
    g.SetOutputs({y});
  };
  c.inputs = {{"x", Input({2, 5, 24}, 0.21f)}};
  return c;
}

struct AttentionShape {
  std::vector<int64_t> q, k, v, mask;  // mask empty: none
  bool k_via_transpose = true;
  std::string scale_op = "Div";  // Div, Mul or none
  bool masked_out = false;       // a causal mask: `closed` above the diagonal
  float closed = -std::numeric_limits<float>::infinity();
  int64_t left_pad = 0;     // also close the first left_pad keys of every row (left padding)
  int64_t closed_row = -1;  // close every key of this query row
  float open_shift = 0;     // added to the mask's open values
  // GQA as torch exports repeat_kv: K and V (and only K when v_repeated is false) are
  // inputs of k[-3] / kv_repeat heads, each repeated kv_repeat times by Unsqueeze, Expand
  // and Reshape; batch_symbol: their batch dim is the symbol `batch` in the graph.
  int64_t kv_repeat = 1;
  bool v_repeated = true;
  bool batch_symbol = false;
  bool k_also_output = false;  // the (repeated) K is a graph output too
  bool v_is_k = false;         // V is K's value itself
};

// `shape` with its dim -3 (the heads) divided by `n`.
inline std::vector<int64_t> FewerHeads(std::vector<int64_t> shape, int64_t n) {
  shape[shape.size() - 3] /= n;
  return shape;
}

// The input `name` of `shape` with kv_repeat > 1: x [b, h, t, d] → Unsqueeze(x, 2) →
// Expand to [b, h, n, t, d] (a constant shape whose batch dim is 1) → Reshape to [b, h·n,
// t, d] (0: the batch dim kept).
inline ir::Value* RepeatedHeadsInput(ir::Graph& g, const std::string& name,
                                     std::vector<int64_t> shape, int64_t n, bool batch_symbol) {
  const std::vector<int64_t> own = FewerHeads(shape, n);
  std::vector<Dim> dims(own.begin(), own.end());
  if (batch_symbol) dims[0] = Dim::Symbol("batch");
  ir::Value* x = g.AddPlaceholder(name, ir::TensorType(DType::kF32, dims));
  auto ints = [&](const std::string& what, std::vector<int64_t> v) {
    return g.AddConstant(name + what, ir::Tensor::FromInt64({static_cast<int64_t>(v.size())}, v));
  };
  ir::Value* u = g.AddCall("", "Unsqueeze", {x, ints("_axes", {2})}, {name + "_u"})->output();
  ir::Value* e =
      g.AddCall("", "Expand", {u, ints("_expand", {1, own[1], n, own[2], own[3]})}, {name + "_e"})
          ->output();
  return g
      .AddCall("", "Reshape", {e, ints("_shape", {0, shape[1], shape[2], shape[3]})}, {name + "_r"})
      ->output();
}

inline Case AttentionCase(const AttentionShape& a) {
  Case c;
  c.build = [a](ir::Graph& g) {
    g.opsets()[""] = 18;
    ir::Value* q = g.AddPlaceholder("q", F32(a.q));
    ir::Value* k = a.kv_repeat > 1 ? RepeatedHeadsInput(g, "k", a.k, a.kv_repeat, a.batch_symbol)
                                   : g.AddPlaceholder("k", F32(a.k));
    ir::Value* v = a.v_is_k ? k
                   : a.kv_repeat > 1 && a.v_repeated
                       ? RepeatedHeadsInput(g, "v", a.v, a.kv_repeat, a.batch_symbol)
                       : g.AddPlaceholder("v", F32(a.v));
    ir::Value* kt = k;
    if (a.k_via_transpose) {
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < static_cast<int64_t>(a.k.size()); ++i) perm.push_back(i);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      kt = g.AddCall("", "Transpose", {k}, {"kt"}, {{"perm", perm}})->output();
    }
    ir::Value* s = g.AddCall("", "MatMul", {q, kt}, {"scores"})->output();
    if (a.scale_op != "none") {
      ir::Value* c8 = g.AddConstant("scale", ir::Tensor::FromFloat({}, {8.0f}));
      s = g.AddCall("", a.scale_op, {s, c8}, {"scaled"})->output();
    }
    if (!a.mask.empty()) {
      ir::Value* m = g.AddPlaceholder("mask", F32(a.mask));
      s = g.AddCall("", "Add", {s, m}, {"masked"})->output();
    }
    ir::Value* p = g.AddCall("", "Softmax", {s}, {"probs"}, {{"axis", int64_t{-1}}})->output();
    ir::Value* attn = g.AddCall("", "MatMul", {p, v}, {"attn"})->output();
    g.SetOutputs(a.k_also_output ? std::vector<ir::Value*>{attn, k} : std::vector{attn});
  };
  const int64_t nk = a.kv_repeat, nv = a.v_repeated ? a.kv_repeat : 1;
  c.inputs = {{"q", Input(a.q, 0.13f)}, {"k", Input(nk > 1 ? FewerHeads(a.k, nk) : a.k, 0.29f)}};
  if (!a.v_is_k) c.inputs["v"] = Input(nv > 1 ? FewerHeads(a.v, nv) : a.v, 0.41f);
  if (!a.mask.empty()) {
    Tensor m = Input(a.mask, 0.07f);
    if (a.masked_out) {
      // Causal over the last two axes (as a decoder's mask), after left padding.
      const int64_t t = a.mask.back(), s = a.mask[a.mask.size() - 2];
      for (int64_t i = 0; i < m.num_elements(); ++i) {
        const int64_t row = (i / t) % s, col = i % t;
        float& x = m.data<float>()[i];
        x = col > row || col < a.left_pad || row == a.closed_row ? a.closed : x + a.open_shift;
      }
    }
    c.inputs["mask"] = m;
  }
  return c;
}

constexpr float kLowest = std::numeric_limits<float>::lowest();

// [batch, 2 heads, s, d] queries, t keys, a [1, 1, s, t] causal mask closing with `closed`.
inline AttentionShape Causal(int64_t s, int64_t t, int64_t d, std::string scale_op, float closed,
                             int64_t left_pad = 0, int64_t closed_row = -1, int64_t batch = 1) {
  AttentionShape a{{batch, 2, s, d}, {batch, 2, t, d}, {batch, 2, t, d}, {1, 1, s, t}};
  a.scale_op = std::move(scale_op);
  a.masked_out = true;
  a.closed = closed;
  a.left_pad = left_pad;
  a.closed_row = closed_row;
  return a;
}

// `a` with K and V repeated n times over their heads, as repeat_kv writes it.
inline AttentionShape Gqa(AttentionShape a, int64_t n, bool v_repeated = true,
                          bool symbol = false) {
  a.kv_repeat = n;
  a.v_repeated = v_repeated;
  a.batch_symbol = symbol;
  return a;
}

// form 0: x / rms; 1: as torch exports an f32 Llama's: Cast(x, f32), x · Div(1, rms),
// Cast(.., f32); 2: Reciprocal(rms) · x.
inline Case RmsNormCase(bool axes_as_input, bool weight_first, int form = 0) {
  Case c;
  c.build = [=](ir::Graph& g) {
    g.opsets()[""] = axes_as_input ? 18 : 17;
    ir::Value* x = g.AddPlaceholder("x", F32({2, 7, 48}));
    const ir::Attributes to_f32 = {{"to", int64_t{1}}};
    if (form == 1) x = g.AddCall("", "Cast", {x}, {"x_f32"}, to_f32)->output();
    ir::Value* two = g.AddConstant("two", ir::Tensor::FromFloat({}, {2.0f}));
    ir::Value* p = g.AddCall("", "Pow", {x, two}, {"sq"})->output();
    ir::Value* m;
    if (axes_as_input) {
      ir::Value* axes = g.AddConstant("axes", ir::Tensor::FromInt64({1}, {-1}));
      m = g.AddCall("", "ReduceMean", {p, axes}, {"ms"})->output();
    } else {
      m = g.AddCall("", "ReduceMean", {p}, {"ms"}, {{"axes", std::vector<int64_t>{-1}}})->output();
    }
    ir::Value* eps = g.AddConstant("eps", ir::Tensor::FromFloat({}, {1e-6f}));
    ir::Value* a = g.AddCall("", "Add", {m, eps}, {"mse"})->output();
    ir::Value* r = g.AddCall("", "Sqrt", {a}, {"rms"})->output();
    ir::Value* d;
    if (form == 0) {
      d = g.AddCall("", "Div", {x, r}, {"normed"})->output();
    } else if (form == 1) {
      ir::Value* one = g.AddConstant("one", ir::Tensor::FromFloat({}, {1.0f}));
      ir::Value* inv = g.AddCall("", "Div", {one, r}, {"inv"})->output();
      d = g.AddCall("", "Mul", {x, inv}, {"normed"})->output();
      d = g.AddCall("", "Cast", {d}, {"normed_f32"}, to_f32)->output();
    } else {
      ir::Value* inv = g.AddCall("", "Reciprocal", {r}, {"inv"})->output();
      d = g.AddCall("", "Mul", {inv, x}, {"normed"})->output();
    }
    ir::Value* w = g.AddConstant("w", ir::Tensor::FromFloat({48}, Wave(48, 0.5f)));
    g.SetOutputs(
        {g.AddCall("", "Mul",
                   weight_first ? std::vector<ir::Value*>{w, d} : std::vector<ir::Value*>{d, w},
                   {"y"})
             ->output()});
  };
  c.inputs = {{"x", Input({2, 7, 48}, 0.17f)}};
  return c;
}

// GPT-2's NewGELU as torch exports it: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// The tail both written-out GELUs share: `one` (1 + f(x)) times 0.5·x, as (0.5·x)·one when
// `half` (0.5·x) is given, else as x·one·0.5.
inline ir::Value* TimesHalfX(ir::Graph& g, ir::Value* x, ir::Value* half, ir::Value* one) {
  if (half != nullptr) return g.AddCall("", "Mul", {half, one}, {"y"})->output();
  ir::Value* p = g.AddCall("", "Mul", {x, one}, {"xp"})->output();
  ir::Value* h = g.AddConstant("half", ir::Tensor::FromFloat({}, {0.5f}));
  return g.AddCall("", "Mul", {p, h}, {"y"})->output();
}

inline Case GeluTanhCase(bool half_first) {
  Case c;
  c.build = [=](ir::Graph& g) {
    g.opsets()[""] = 17;
    ir::Value* x = g.AddPlaceholder("x", F32({3, 40}));
    auto k = [&](const char* name, float v) {
      return g.AddConstant(name, ir::Tensor::FromFloat({}, {v}));
    };
    ir::Value* half =
        half_first ? g.AddCall("", "Mul", {x, k("half", 0.5f)}, {"hx"})->output() : nullptr;
    ir::Value* cube = g.AddCall("", "Pow", {x, k("three", 3.0f)}, {"x3"})->output();
    ir::Value* a = g.AddCall("", "Mul", {cube, k("c", 0.044715f)}, {"cx3"})->output();
    ir::Value* b = g.AddCall("", "Add", {x, a}, {"inner"})->output();
    ir::Value* s = g.AddCall("", "Mul", {b, k("s", 0.7978845608f)}, {"scaled"})->output();
    ir::Value* t = g.AddCall("", "Tanh", {s}, {"t"})->output();
    ir::Value* one = g.AddCall("", "Add", {t, k("one", 1.0f)}, {"t1"})->output();
    g.SetOutputs({TimesHalfX(g, x, half, one)});
  };
  c.inputs = {{"x", Input({3, 40}, 0.23f)}};
  return c;
}

// GELU's erf form as torch exports nn.GELU() and BERT's gelu: x / √2 (or x · 1/√2, the
// constant first or second) → Erf → + 1 → times 0.5·x (half_first) or x then 0.5. With
// `matmul`, x is MatMul(x0, W) + b (BERT's intermediate dense), which the GEMM then absorbs.
inline Case GeluErfCase(bool divide, bool half_first, bool constant_first = false,
                        bool matmul = false) {
  Case c;
  c.build = [=](ir::Graph& g) {
    g.opsets()[""] = 17;
    auto k = [&](const char* name, float v) {
      return g.AddConstant(name, ir::Tensor::FromFloat({}, {v}));
    };
    ir::Value* x = g.AddPlaceholder("x", F32({3, matmul ? 24 : 40}));
    if (matmul) {
      ir::Value* w =
          g.AddConstant("w", ir::Tensor::FromFloat({24, 40}, Wave(24 * 40, 0.37f, 0.3f)));
      ir::Value* b = g.AddConstant("b", ir::Tensor::FromFloat({40}, Wave(40, 0.9f)));
      ir::Value* mm = g.AddCall("", "MatMul", {x, w}, {"mm"})->output();
      x = g.AddCall("", "Add", {b, mm}, {"dense"})->output();
    }
    ir::Value* half =
        half_first ? g.AddCall("", "Mul", {x, k("half", 0.5f)}, {"hx"})->output() : nullptr;
    ir::Value* scaled;
    if (divide) {
      scaled = g.AddCall("", "Div", {x, k("sqrt2", 1.4142135f)}, {"xs"})->output();
    } else {
      ir::Value* r = k("rsqrt2", 0.70710678f);
      scaled = g.AddCall("", "Mul", constant_first ? std::vector{r, x} : std::vector{x, r}, {"xs"})
                   ->output();
    }
    ir::Value* e = g.AddCall("", "Erf", {scaled}, {"e"})->output();
    ir::Value* one = g.AddCall("", "Add", {e, k("one", 1.0f)}, {"e1"})->output();
    g.SetOutputs({TimesHalfX(g, x, half, one)});
  };
  c.inputs = {{"x", Input({3, matmul ? 24 : 40}, 0.23f)}};
  return c;
}

// Llama's rotary embedding as torch exports it: x·cos + Concat(-x2, x1)·sin, x1 and x2 the
// halves of the last axis, cos and sin [1, 1, s, d] broadcast over batch and heads.
// computed_half: the halves meet at Unsqueeze(Shape(x)[3] / 2), as torch exports
// Llama's rotate_half, which shape inference evaluates to 4.
inline Case RotaryCase(bool sin_first, int64_t end, int64_t high_start = 4,
                       bool computed_half = false) {
  Case c;
  c.build = [=](ir::Graph& g) {
    g.opsets()[""] = 17;
    ir::Value* x = g.AddPlaceholder("x", F32({2, 3, 5, 8}));
    ir::Value* cos = g.AddPlaceholder("cos", F32({1, 1, 5, 8}));
    ir::Value* sin = g.AddPlaceholder("sin", F32({1, 1, 5, 8}));
    auto ints = [&](const char* name, int64_t v) {
      return g.AddConstant(name, ir::Tensor::FromInt64({1}, {v}));
    };
    ir::Value* axis = ints("axis", 3);
    ir::Value* half = ints("half", 4);
    ir::Value* half2 = ints("half2", high_start);
    if (computed_half) {
      ir::Value* shape = g.AddCall("", "Shape", {x}, {"x_shape"})->output();
      ir::Value* three = g.AddConstant("three", ir::Tensor::FromInt64({}, {3}));
      ir::Value* d =
          g.AddCall("", "Gather", {shape, three}, {"d"}, {{"axis", int64_t{0}}})->output();
      ir::Value* two = g.AddConstant("two", ir::Tensor::FromInt64({}, {2}));
      ir::Value* h = g.AddCall("", "Div", {d, two}, {"h"})->output();
      half = half2 = g.AddCall("", "Unsqueeze", {h, ints("axis0", 0)}, {"h1"})->output();
    }
    ir::Value* x1 = g.AddCall("", "Slice", {x, ints("zero", 0), half, axis}, {"x1"})->output();
    ir::Value* x2 = g.AddCall("", "Slice", {x, half2, ints("end", end), axis}, {"x2"})->output();
    ir::Value* n = g.AddCall("", "Neg", {x2}, {"nx2"})->output();
    ir::Value* rot = g.AddCall("", "Concat", {n, x1}, {"rot"}, {{"axis", int64_t{-1}}})->output();
    ir::Value* a = g.AddCall("", "Mul", {x, cos}, {"xc"})->output();
    ir::Value* b =
        g.AddCall("", "Mul",
                  sin_first ? std::vector<ir::Value*>{sin, rot} : std::vector<ir::Value*>{rot, sin},
                  {"rs"})
            ->output();
    g.SetOutputs({g.AddCall("", "Add", {a, b}, {"y"})->output()});
  };
  c.inputs = {{"x", Input({2, 3, 5, 8}, 0.31f)},
              {"cos", Input({1, 1, 5, 8}, 0.11f)},
              {"sin", Input({1, 1, 5, 8}, 0.19f)}};
  return c;
}

}  // namespace tpc::runtime::fusion_testing
