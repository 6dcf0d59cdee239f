// The fusion pass (runtime/fusion.h): every pattern fused equals the same graph run
// unfused (within float rounding), the chain's nodes are gone and the last value keeps
// its name; chains whose inner values are read elsewhere, or that differ in an axis or a
// dtype, are left alone.
#include "tpc/runtime/fusion.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "fusion_cases.h"

namespace tpc::runtime {
namespace {

using namespace fusion_testing;  // NOLINT(google-build-using-namespace): the cases' builders
using ir::Dim;
using ir::DType;

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
