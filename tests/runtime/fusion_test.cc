// The fusion pass (runtime/fusion.h): every pattern fused equals the same graph run
// unfused (within float rounding), the chain's nodes are gone and the last value keeps
// its name; chains whose inner values are read elsewhere, or that differ in an axis or a
// dtype, are left alone.
#include "tpc/runtime/fusion.h"

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
#include "tpc/util/half.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;

std::vector<float> Wave(int64_t n, float f, float amp = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = amp * std::sin(f * static_cast<float>(i) + 0.3f);
  return v;
}

Tensor Input(const std::vector<int64_t>& shape, float f) {
  Tensor t = Tensor::Allocate(DType::kF32, shape);
  const std::vector<float> v = Wave(t.num_elements(), f, 2.0f);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

ir::TensorType F32(std::vector<int64_t> dims) {
  std::vector<Dim> d;
  for (int64_t x : dims) d.emplace_back(x);
  return ir::TensorType(DType::kF32, d);
}

int CountOps(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->is_call() && node->op_type() == op;
  return n;
}

struct Case {
  std::function<void(ir::Graph&)> build;
  std::map<std::string, Tensor> inputs;
};

// `g` as a half-precision plan holds it (plan/precision.h), its constants converted.
void ToPrecision(ir::Graph& g, DType to) {
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
FusionStats RunBoth(const Case& c, int threads = 2, double tolerance = 2e-5,
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
Case MatMulCase(const std::string& act, bool bias, bool bias_first = false) {
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

TEST_CASE("fusion: MatMul with bias and activation equals the chain", "[runtime][fusion]") {
  const auto [act, bias] = GENERATE(
      std::pair<std::string, bool>{"", true}, std::pair<std::string, bool>{"Gelu", true},
      std::pair<std::string, bool>{"GeluTanh", true}, std::pair<std::string, bool>{"Relu", true},
      std::pair<std::string, bool>{"Tanh", false}, std::pair<std::string, bool>{"SiLU", false},
      std::pair<std::string, bool>{"SiLU", true});
  INFO("activation '" << act << "', bias " << bias);
  for (int threads : {1, 2, 3}) {
    const FusionStats stats = RunBoth(MatMulCase(act, bias), threads);
    CHECK(stats.fused.at("FusedMatMul") == 1);
    CHECK(stats.nodes_removed == 1 + bias + (act == "SiLU" ? 2 : !act.empty()));
  }
}

TEST_CASE("fusion: bias as Add's first operand, and a bare MatMul is left", "[runtime][fusion]") {
  CHECK(RunBoth(MatMulCase("Gelu", true, /*bias_first=*/true)).fused.at("FusedMatMul") == 1);
  CHECK(RunBoth(MatMulCase("", false)).fused.empty());
}

TEST_CASE("fusion: a chain whose inner value is read elsewhere is not fused", "[runtime][fusion]") {
  Case c = MatMulCase("Gelu", true);
  auto inner = c.build;
  c.build = [inner](ir::Graph& g) {
    inner(g);
    // The biased value is a second graph output: the Add must stay.
    std::vector<ir::Value*> outs = g.outputs();
    outs.push_back(g.FindValue("biased"));
    g.Erase(g.output_node());
    g.SetOutputs(outs);
  };
  ir::Graph g;
  c.build(g);
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(1);
  const FusionStats stats = FuseGraph(g, *backend);
  // MatMul + Add are still fusable (the Add's output is the chain's end); Gelu is not
  // folded into them, because then `biased` would vanish.
  CHECK(CountOps(g, "Gelu") == 1);
  CHECK(g.FindValue("biased") != nullptr);
  CHECK(stats.fused.count("FusedMatMul") == 1);
  CHECK(RunBoth(c).fused.count("FusedMatMul") == 1);
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
std::vector<int64_t> FewerHeads(std::vector<int64_t> shape, int64_t n) {
  shape[shape.size() - 3] /= n;
  return shape;
}

// The input `name` of `shape` with kv_repeat > 1: x [b, h, t, d] → Unsqueeze(x, 2) →
// Expand to [b, h, n, t, d] (a constant shape whose batch dim is 1) → Reshape to [b, h·n,
// t, d] (0: the batch dim kept).
ir::Value* RepeatedHeadsInput(ir::Graph& g, const std::string& name, std::vector<int64_t> shape,
                              int64_t n, bool batch_symbol) {
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

Case AttentionCase(const AttentionShape& a) {
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
AttentionShape Causal(int64_t s, int64_t t, int64_t d, std::string scale_op, float closed,
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
AttentionShape Gqa(AttentionShape a, int64_t n, bool v_repeated = true, bool symbol = false) {
  a.kv_repeat = n;
  a.v_repeated = v_repeated;
  a.batch_symbol = symbol;
  return a;
}

TEST_CASE("fusion: the attention core equals MatMul, scale, mask, Softmax, MatMul",
          "[runtime][fusion]") {
  std::vector<AttentionShape> shapes = {
      // GPT-2's: K transposed by a Transpose, ÷ scale, a [1, 1, s, t] causal mask.
      {{2, 3, 70, 16}, {2, 3, 70, 16}, {2, 3, 70, 16}, {1, 1, 70, 70}, true, "Div", true},
      // Kᵀ given, · scale, a padding mask [b, 1, 1, t].
      {{2, 3, 9, 8}, {2, 3, 8, 11}, {2, 3, 11, 5}, {2, 1, 1, 11}, false, "Mul", false},
      // No scale, no mask; K/V heads broadcast over the query heads (GQA-like batch dims).
      {{2, 4, 6, 8}, {2, 1, 6, 8}, {2, 1, 6, 8}, {}, true, "none", false},
      // Rank 3 and a mask of rank 2.
      {{5, 130, 8}, {5, 130, 8}, {5, 130, 4}, {130, 130}, true, "Div", true},
      // torch's exporters close keys with float's lowest: the blocks of query rows then
      // compute only the keys they see. With left padding, a query row that sees no key
      // (its softmax is over the scores as they are); -1e9 (closed too), and -1e4, which
      // is not large enough to count as closed.
      Causal(200, 200, 16, "Div", kLowest),
      Causal(150, 150, 8, "Mul", kLowest, 70, 100, 2),
      Causal(150, 150, 8, "Div", -1e9f, 30),
      Causal(150, 150, 8, "Div", -1e4f, 30),
      // No keys, no queries, and heads of no dims (every score 0: V's mean).
      {{1, 2, 5, 8}, {1, 2, 0, 8}, {1, 2, 0, 8}, {}, true, "Div", false},
      {{1, 2, 0, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, {}, true, "Div", false},
      {{1, 2, 5, 0}, {1, 2, 6, 0}, {1, 2, 6, 8}, {}, true, "Div", false},
      // Every value of the mask is about -1e8, closed ones 8 to 16 lower: their exponentials
      // are not 0, and no key may be skipped.
      [] {
        AttentionShape a = Causal(150, 150, 8, "Div", -1e8f);
        a.open_shift = -0.9999999e8f;
        return a;
      }(),
  };
  for (size_t i = 0; i < shapes.size(); ++i) {
    INFO("shape case " << i);
    for (int threads : {1, 2}) {
      const FusionStats stats = RunBoth(AttentionCase(shapes[i]), threads);
      CHECK(stats.fused.at("AttentionCore") == 1);
    }
  }
}

// GQA's repeated K and V heads: the core reads each K and V head for its group of query
// heads, and the Unsqueeze, Expand and Reshape of repeat_kv are gone. Where Q's heads are
// not the repeated ones (a 1 broadcasting), or only K is repeated, the core is fused
// without them.
TEST_CASE("fusion: the attention core reads GQA's K and V heads for their group of queries",
          "[runtime][fusion]") {
  struct GqaCase {
    AttentionShape a;
    bool grouped;
  };
  const std::vector<GqaCase> cases = {
      // Llama's: K through a Transpose, ÷ scale, a padding mask [b, 1, s, t].
      {Gqa({{2, 4, 6, 8}, {2, 4, 7, 8}, {2, 4, 7, 5}, {2, 1, 6, 7}, true, "Div", false}, 2), true},
      // Kᵀ given (the repeat on its heads all the same), a mask of every head, · scale.
      {Gqa({{2, 6, 5, 8}, {2, 6, 8, 9}, {2, 6, 9, 4}, {1, 6, 5, 9}, false, "Mul", false}, 3), true},
      // One K and V head for all (MQA), causal, the batch dim a symbol.
      {Gqa(Causal(70, 70, 16, "Div", kLowest, 0, -1, 2), 2, true, true), true},
      // Q with one head broadcasting over K's repeated four: not a grouping.
      {Gqa({{2, 1, 6, 8}, {2, 4, 6, 8}, {2, 4, 6, 8}, {}, true, "Div", false}, 2), false},
      // Only K repeated.
      {Gqa({{2, 4, 6, 8}, {2, 4, 6, 8}, {2, 4, 6, 8}, {}, true, "Div", false}, 2, false), false},
      // The repeated K read elsewhere (a graph output): the core fuses without grouping.
      {[] {
         AttentionShape a =
             Gqa({{2, 4, 6, 8}, {2, 4, 6, 8}, {2, 4, 6, 8}, {}, true, "Div", false}, 2);
         a.k_also_output = true;
         return a;
       }(),
       false},
      // V is the repeated K itself: one chain, read twice; not grouped.
      {[] {
         AttentionShape a =
             Gqa({{2, 4, 6, 8}, {2, 4, 6, 8}, {2, 4, 6, 8}, {}, true, "Div", false}, 2);
         a.v_is_k = true;
         return a;
       }(),
       false},
  };
  auto backend = MakeCpuBackend(2);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const Case c = AttentionCase(cases[i].a);
    CHECK(RunBoth(c).fused.at("AttentionCore") == 1);
    ir::Graph g;
    c.build(g);
    REQUIRE(onnx::InferShapes(g).ok());
    const int expands = CountOps(g, "Expand");
    REQUIRE(FuseGraph(g, *backend).fused.at("AttentionCore") == 1);
    CHECK(CountOps(g, "Expand") == (cases[i].grouped ? 0 : expands));
    int grouped = 0;
    for (const ir::Node* n : g.nodes()) {
      grouped += n->is_call() && n->op_type() == "AttentionCore" && n->attr_int("kv_grouped", 0);
    }
    CHECK(grouped == (cases[i].grouped ? 1 : 0));
  }
}

TEST_CASE("fusion: the attention core does not read keys that every query row's mask closes",
          "[runtime][fusion]") {
  // 100 query rows, 101 keys, causal: key 100 is closed to every row. A NaN there reaches
  // every row of the unfused chain (0 · NaN in P·V); the fused core must not compute it,
  // and equal the chain run with that key's K and V zeroed.
  const int64_t s = 100, t = 101, d = 8;
  const AttentionShape shape = Causal(s, t, d, "Div", kLowest);
  Case nan_case = AttentionCase(shape);
  Case zero_case = AttentionCase(shape);
  for (const char* name : {"k", "v"}) {
    float* nan_kv = nan_case.inputs.at(name).data<float>();
    float* zero_kv = zero_case.inputs.at(name).data<float>();
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t j = 0; j < d; ++j) {
        nan_kv[(h * t + t - 1) * d + j] = std::numeric_limits<float>::quiet_NaN();
        zero_kv[(h * t + t - 1) * d + j] = 0.0f;
      }
    }
  }
  auto backend = MakeCpuBackend(2);
  auto run = [&](const Case& c, bool fuse) {
    ir::Graph g;
    c.build(g);
    REQUIRE(onnx::InferShapes(g).ok());
    if (fuse) REQUIRE(FuseGraph(g, *backend).fused.at("AttentionCore") == 1);
    auto ex = Executor::Create(g, *backend, nullptr);
    REQUIRE(ex.ok());
    auto out = (*ex)->Run(c.inputs);
    REQUIRE(out.ok());
    return std::move((*out)[0]);
  };
  const Tensor unfused = run(nan_case, false);
  CHECK(std::isnan(unfused.data<float>()[0]));  // the chain does read it
  const Tensor got = run(nan_case, true);
  const Tensor want = run(zero_case, false);
  REQUIRE(got.num_elements() == want.num_elements());
  int64_t bad = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    bad += !(std::abs(g - w) <= 2e-5f * (1.0f + std::abs(w)));
  }
  CHECK(bad == 0);
}

TEST_CASE("fusion: Casts to their input's type are removed, other Casts stay",
          "[runtime][fusion]") {
  // Softmax → Cast(to) → Cast(f32) → MatMul; torch exports an f32 model's attention with
  // to = f32.
  auto with_casts = [](int64_t to, bool cast_is_output) {
    Case c = AttentionCase({{2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, {}, true, "Div", false});
    auto inner = c.build;
    c.build = [inner, to, cast_is_output](ir::Graph& g) {
      inner(g);
      ir::Node* pv = g.FindValue("attn")->producer();
      ir::Value* p = pv->input(0);
      ir::Value* c1 = g.InsertCallBefore(pv, "", "Cast", {p}, {"p1"}, {{"to", to}})->output();
      ir::Value* c2 =
          g.InsertCallBefore(pv, "", "Cast", {c1}, {"p2"}, {{"to", int64_t{1}}})->output();
      pv->SetInput(0, c2);
      if (cast_is_output) g.SetOutputs({g.FindValue("attn"), c2});
    };
    return c;
  };
  const FusionStats same = RunBoth(with_casts(1, false));
  CHECK(same.fused.at("AttentionCore") == 1);
  CHECK(same.nodes_removed == 2 + 5);
  // A Cast that a graph output reads as its value stays, and so does the chain it splits.
  CHECK(RunBoth(with_casts(1, true)).fused.count("AttentionCore") == 0);
  // f32 → f16 rounds: not an identity (the Cast back to f32 after it is one only when its
  // input is f32 already, which it is not).
  const FusionStats rounding = RunBoth(with_casts(10, false), 2, 1e-2);
  CHECK(rounding.fused.count("AttentionCore") == 0);
  CHECK(rounding.nodes_removed == 0);
}

TEST_CASE("fusion: Softmax over another axis is not an attention core", "[runtime][fusion]") {
  Case c = AttentionCase({{2, 5, 8}, {2, 5, 8}, {2, 5, 8}, {}, true, "Div", false});
  auto inner = c.build;
  c.build = [inner](ir::Graph& g) {
    inner(g);
    for (ir::Node* n : g.nodes()) {
      if (n->is_call() && n->op_type() == "Softmax") n->attrs()["axis"] = int64_t{1};
    }
  };
  CHECK(RunBoth(c).fused.count("AttentionCore") == 0);
}

// form 0: x / rms; 1: as torch exports an f32 Llama's: Cast(x, f32), x · Div(1, rms),
// Cast(.., f32); 2: Reciprocal(rms) · x.
Case RmsNormCase(bool axes_as_input, bool weight_first, int form = 0) {
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

TEST_CASE("fusion: Llama's RMSNorm chain becomes SimplifiedLayerNormalization",
          "[runtime][fusion]") {
  for (bool axes_as_input : {false, true}) {
    for (bool weight_first : {false, true}) {
      INFO("axes as input " << axes_as_input << ", weight first " << weight_first);
      const FusionStats stats = RunBoth(RmsNormCase(axes_as_input, weight_first));
      CHECK(stats.fused.at("SimplifiedLayerNormalization") == 1);
      CHECK(stats.nodes_removed == 6);
    }
  }
  // torch's x · rsqrt(..), with the Casts of an f32 model around it (removed first), and
  // with Reciprocal.
  const FusionStats torch_form = RunBoth(RmsNormCase(true, true, 1));
  CHECK(torch_form.fused.at("SimplifiedLayerNormalization") == 1);
  CHECK(torch_form.nodes_removed == 9);
  CHECK(RunBoth(RmsNormCase(false, false, 2)).fused.at("SimplifiedLayerNormalization") == 1);
  // Another exponent is not a mean square.
  Case c = RmsNormCase(false, false);
  auto inner = c.build;
  c.build = [inner](ir::Graph& g) {
    inner(g);
    ir::Node* two = g.FindValue("two")->producer();
    two->set_tensor(ir::Tensor::FromFloat({}, {3.0f}));
  };
  CHECK(RunBoth(c).fused.empty());
}

// GPT-2's NewGELU as torch exports it: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// The tail both written-out GELUs share: `one` (1 + f(x)) times 0.5·x, as (0.5·x)·one when
// `half` (0.5·x) is given, else as x·one·0.5.
ir::Value* TimesHalfX(ir::Graph& g, ir::Value* x, ir::Value* half, ir::Value* one) {
  if (half != nullptr) return g.AddCall("", "Mul", {half, one}, {"y"})->output();
  ir::Value* p = g.AddCall("", "Mul", {x, one}, {"xp"})->output();
  ir::Value* h = g.AddConstant("half", ir::Tensor::FromFloat({}, {0.5f}));
  return g.AddCall("", "Mul", {p, h}, {"y"})->output();
}

Case GeluTanhCase(bool half_first) {
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

TEST_CASE("fusion: GELU's tanh form written out becomes Gelu", "[runtime][fusion]") {
  for (bool half_first : {true, false}) {
    INFO("0.5 on x first: " << half_first);
    const FusionStats stats = RunBoth(GeluTanhCase(half_first), 2, 1e-6);
    CHECK(stats.fused.at("Gelu") == 1);
    CHECK(stats.nodes_removed == 8);
  }
  // Another coefficient is another function.
  Case c = GeluTanhCase(true);
  auto inner = c.build;
  c.build = [inner](ir::Graph& g) {
    inner(g);
    g.FindValue("c")->producer()->set_tensor(ir::Tensor::FromFloat({}, {0.05f}));
  };
  CHECK(RunBoth(c).fused.empty());
}

// GELU's erf form as torch exports nn.GELU() and BERT's gelu: x / √2 (or x · 1/√2, the
// constant first or second) → Erf → + 1 → times 0.5·x (half_first) or x then 0.5. With
// `matmul`, x is MatMul(x0, W) + b (BERT's intermediate dense), which the GEMM then absorbs.
Case GeluErfCase(bool divide, bool half_first, bool constant_first = false, bool matmul = false) {
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

TEST_CASE("fusion: GELU's erf form written out becomes Gelu", "[runtime][fusion]") {
  for (const auto& [divide, half_first, constant_first] :
       {std::tuple{true, false, false}, std::tuple{true, true, false},
        std::tuple{false, false, true}, std::tuple{false, true, false}}) {
    INFO("divide " << divide << ", 0.5 on x first " << half_first << ", constant first "
                   << constant_first);
    const FusionStats stats = RunBoth(GeluErfCase(divide, half_first, constant_first), 2, 1e-6);
    CHECK(stats.fused.at("Gelu") == 1);
    CHECK(stats.nodes_removed == 5);
  }
  // BERT's intermediate dense: MatMul, bias first, erf GELU: one FusedMatMul.
  const FusionStats stats = RunBoth(GeluErfCase(true, false, false, true));
  CHECK(stats.fused.at("FusedMatMul") == 1);
  CHECK(stats.fused.at("Gelu") == 1);  // made in the first phase, then absorbed
  // Another constant is another function.
  Case c = GeluErfCase(true, false);
  auto inner = c.build;
  c.build = [inner](ir::Graph& g) {
    inner(g);
    g.FindValue("sqrt2")->producer()->set_tensor(ir::Tensor::FromFloat({}, {2.0f}));
  };
  CHECK(RunBoth(c).fused.empty());
}

// Llama's rotary embedding as torch exports it: x·cos + Concat(-x2, x1)·sin, x1 and x2 the
// halves of the last axis, cos and sin [1, 1, s, d] broadcast over batch and heads.
// computed_half: the halves meet at Unsqueeze(Shape(x)[3] / 2), as torch exports
// Llama's rotate_half, which shape inference evaluates to 4.
Case RotaryCase(bool sin_first, int64_t end, int64_t high_start = 4, bool computed_half = false) {
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

TEST_CASE("fusion: rotate_half rotary embedding becomes RotaryHalf", "[runtime][fusion]") {
  for (bool sin_first : {false, true}) {
    for (int64_t end : {int64_t{8}, std::numeric_limits<int64_t>::max()}) {
      INFO("sin first " << sin_first << ", end " << end);
      const FusionStats stats = RunBoth(RotaryCase(sin_first, end), 2, 1e-6);
      CHECK(stats.fused.at("RotaryHalf") == 1);
      CHECK(stats.nodes_removed == 7);
    }
  }
  // Halves at a shape computation that shape inference evaluated.
  CHECK(RunBoth(RotaryCase(false, 8, 4, true), 2, 1e-6).fused.at("RotaryHalf") == 1);
  // Halves that do not meet in the middle are not rotate_half.
  CHECK(RunBoth(RotaryCase(false, 7, 3)).fused.empty());
}

// A backend that, as the CUDA backend does for what it lacks, offers the CPU's kernels
// as host kernels: all of them, or (f32_only) those of nodes with f16/bf16 outputs, its
// own kernels taking f32 only.
class HostFallbackBackend final : public Backend {
 public:
  explicit HostFallbackBackend(bool f32_only = false)
      : cpu_(MakeCpuBackend(1)), f32_only_(f32_only) {}
  std::string name() const override { return "fallback"; }
  const Kernel* FindKernel(std::string_view domain, std::string_view op_type) const override {
    const Kernel* k = cpu_->FindKernel(domain, op_type);
    if (k == nullptr || f32_only_) return k;
    return AsHost(*k);
  }
  const Kernel* FindKernelFor(const ir::Node& node) const override {
    const Kernel* k = FindKernel(node.domain(), node.op_type());
    bool half = false;
    for (const ir::Value* v : node.outputs()) half = half || IsHalfType(v->type().dtype);
    return k != nullptr && half ? AsHost(*k) : k;
  }
  void* Allocate(size_t bytes) override { return cpu_->Allocate(bytes); }
  void Free(void* p) override { cpu_->Free(p); }
  void CopyFromHost(void* d, const void* s, size_t n) override { cpu_->CopyFromHost(d, s, n); }
  void CopyToHost(void* d, const void* s, size_t n) override { cpu_->CopyToHost(d, s, n); }
  void Copy(void* d, const void* s, size_t n) override { cpu_->Copy(d, s, n); }
  ThreadPool& pool() override { return cpu_->pool(); }

 private:
  const Kernel* AsHost(const Kernel& k) const {
    host_ = k;
    host_.host = true;
    return &host_;
  }
  std::unique_ptr<Backend> cpu_;
  bool f32_only_;
  mutable Kernel host_;
};

TEST_CASE("fusion: nothing is fused into a backend's host kernels", "[runtime][fusion]") {
  ir::Graph g;
  MatMulCase("Gelu", true).build(g);
  REQUIRE(onnx::InferShapes(g).ok());
  HostFallbackBackend backend;
  CHECK(FuseGraph(g, backend).fused.empty());
  CHECK(CountOps(g, "Gelu") == 1);
  // The same graph on the CPU backend is fused.
  CHECK(FuseGraph(g, *MakeCpuBackend(1)).fused.at("FusedMatMul") == 1);
}

TEST_CASE("fusion: a chain of a type the backend's fused kernel does not take is left",
          "[runtime][fusion]") {
  HostFallbackBackend backend(/*f32_only=*/true);
  for (DType precision : {DType::kF32, DType::kF16}) {
    ir::Graph g;
    MatMulCase("Gelu", true).build(g);
    REQUIRE(onnx::InferShapes(g).ok());
    ToPrecision(g, precision);
    const size_t nodes = g.NodeVector().size();
    const FusionStats stats = FuseGraph(g, backend);
    if (precision == DType::kF32) {
      CHECK(stats.fused.at("FusedMatMul") == 1);
    } else {
      // Looked at and given up: the graph is as it was, with no fused node left in it.
      CHECK(stats.fused.empty());
      CHECK(g.NodeVector().size() == nodes);
      CHECK(CountOps(g, "FusedMatMul") == 0);
      CHECK(CountOps(g, "Gelu") == 1);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime

namespace tpc::runtime {
namespace {

TEST_CASE("fusion: f16 and bf16 chains fuse, and agree with the chain within its rounding",
          "[runtime][fusion]") {
  // A half-precision plan's chain rounds to f16/bf16 after every op; the fused kernel
  // computes in f32 between its half inputs and its half output. They agree within a few
  // of the half type's ulps (bf16: 2^-8, f16: 2^-11 relative).
  const std::vector<std::pair<std::string, Case>> cases = {
      {"FusedMatMul", MatMulCase("SiLU", true)},
      {"FusedMatMul", MatMulCase("GeluTanh", true)},
      {"AttentionCore", AttentionCase({{2, 3, 70, 16},
                                       {2, 3, 70, 16},
                                       {2, 3, 70, 16},
                                       {1, 1, 70, 70},
                                       true,
                                       "Div",
                                       true,
                                       kLowest})},
      {"SimplifiedLayerNormalization", RmsNormCase(true, false)},
      {"Gelu", GeluTanhCase(true)},
      {"Gelu", GeluErfCase(true, false)},
      {"RotaryHalf", RotaryCase(false, 8)},
  };
  for (const auto& [precision, tolerance] :
       {std::pair{DType::kF16, 4e-3}, std::pair{DType::kBF16, 3e-2}}) {
    for (const auto& [op, c] : cases) {
      INFO(op << " in " << (precision == DType::kF16 ? "f16" : "bf16"));
      CHECK(RunBoth(c, 2, tolerance, precision).fused.count(op) == 1);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime

namespace tpc::runtime {
namespace {

TEST_CASE("fusion on the GPU: every fused kernel equals the CPU's chain",
          "[runtime][fusion][cuda]") {
  if (!CudaBuiltIn() || GpuCount() == 0) {
    WARN("skipped: no CUDA backend or no GPU here (tools/gpu_check.sh runs this on a GPU)");
    return;
  }
  auto cuda = MakeBackend({.name = "cuda", .threads = 1});
  REQUIRE(cuda.ok());
  // {fused op, case, also in f16 and bf16}. A half-precision chain rounds its scores to the
  // half type before the softmax; where the scores are large (multiplied by 8, or d = 8
  // unscaled) that rounding alone moves the chain's probabilities by more than the
  // tolerances below, so those cases are checked in f32 only.
  struct GpuCase {
    std::string op;
    Case c;
    bool half;
  };
  std::vector<GpuCase> cases;
  for (const char* act : {"", "Gelu", "GeluTanh", "Relu", "Tanh", "SiLU"}) {
    cases.push_back({"FusedMatMul", MatMulCase(act, true), true});
  }
  cases.push_back({"FusedMatMul", MatMulCase("SiLU", false), true});
  const std::vector<std::pair<AttentionShape, bool>> attention = {
      {{{2, 3, 70, 16}, {2, 3, 70, 16}, {2, 3, 70, 16}, {1, 1, 70, 70}, true, "Div", true}, true},
      {{{2, 3, 9, 8}, {2, 3, 8, 11}, {2, 3, 11, 5}, {2, 1, 1, 11}, false, "Mul", false}, false},
      {{{2, 4, 6, 8}, {2, 1, 6, 8}, {2, 1, 6, 8}, {}, true, "none", false}, false},
      {{{5, 130, 8}, {5, 130, 8}, {5, 130, 4}, {130, 130}, true, "Div", true}, true},
      // 1100 keys: rows too long for a warp's registers take the block kernel.
      {{{1, 2, 20, 16}, {1, 2, 1100, 16}, {1, 2, 1100, 8}, {1, 1, 20, 1100}, true, "Div", false},
       true},
      {Causal(150, 150, 8, "Mul", kLowest, 70, 100, 2), false},
      {Causal(150, 150, 8, "Div", -1e9f, 30), true},
      {{{1, 2, 5, 8}, {1, 2, 0, 8}, {1, 2, 0, 8}, {}, true, "Div", false}, true},
      {{{1, 2, 0, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, {}, true, "Div", false}, true},
      {{{1, 2, 5, 0}, {1, 2, 6, 0}, {1, 2, 6, 8}, {1, 1, 5, 6}, true, "Div", true}, true},
      // GQA (GEMMs of a group's query rows stacked against one K and V head), and MQA.
      {Gqa({{2, 4, 6, 8}, {2, 4, 7, 8}, {2, 4, 7, 5}, {2, 1, 6, 7}, true, "Div", false}, 2), true},
      {Gqa({{2, 6, 5, 8}, {2, 6, 8, 9}, {2, 6, 9, 4}, {1, 6, 5, 9}, false, "Mul", false}, 3),
       false},
      {Gqa(Causal(70, 70, 16, "Div", kLowest, 0, -1, 2), 2, true, true), true}};
  for (const auto& [a, half] : attention)
    cases.push_back({"AttentionCore", AttentionCase(a), half});
  cases.push_back({"SimplifiedLayerNormalization", RmsNormCase(true, false), true});
  cases.push_back({"Gelu", GeluTanhCase(true), true});
  cases.push_back({"Gelu", GeluErfCase(false, true), true});
  cases.push_back({"FusedMatMul", GeluErfCase(true, false, false, true), true});
  cases.push_back({"RotaryHalf", RotaryCase(false, 8), true});
  cases.push_back({"RotaryHalf", RotaryCase(true, 8), true});
  // f32 without TF32: cuBLAS sums in another order than OpenBLAS. Half types: the
  // tolerances of the CPU's half-precision fusion test above.
  for (const auto& [precision, tolerance] :
       {std::pair{DType::kF32, 1e-4}, std::pair{DType::kF16, 4e-3},
        std::pair{DType::kBF16, 3e-2}}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (precision != DType::kF32 && !cases[i].half) continue;
      INFO("case " << i << ": " << cases[i].op << " in " << ir::DTypeName(precision));
      CHECK(RunBoth(cases[i].c, 1, tolerance, precision, cuda->get()).fused.count(cases[i].op) ==
            1);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
