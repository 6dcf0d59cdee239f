// The fusion pass in half precision and on the GPU: every pattern's chain in f16 and bf16
// fused (the kernel in f32 between half inputs and output) agrees with the chain rounding
// after every op; on a GPU every fused kernel equals the CPU's unfused chain.
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "fusion_cases.h"

namespace tpc::runtime {
namespace {

using namespace fusion_testing;  // NOLINT(google-build-using-namespace): the cases' builders
using ir::DType;

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

TEST_CASE("fusion: a half GEMM's Cast to f32 stays out of FusedMatMul, which rounds to half",
          "[runtime][fusion]") {
  // A half-precision plan keeps the model's f32 logits behind a Cast: the fused GEMM writes
  // half, as the chain does and as a plan whose collective stands between the GEMM and the
  // Cast computes it (the GEMM writing f32 itself made the unsharded run differ from the
  // sharded one by up to half an ulp: a false alarm of --check-against).
  for (const DType precision : {DType::kF16, DType::kBF16}) {
    for (const auto& [act, bias] : {std::pair{"", false}, std::pair{"SiLU", false},
                                    std::pair{"Gelu", false}, std::pair{"", true}}) {
      INFO((precision == DType::kF16 ? "f16" : "bf16")
           << " activation '" << act << "' bias " << bias);
      const Case c = MatMulCase(act, bias);
      ir::Graph g;
      c.build(g);
      REQUIRE(onnx::InferShapes(g).ok());
      ToPrecision(g, precision);
      REQUIRE(CountOps(g, "Cast") == 2);  // x to half, the result back to f32
      auto cpu = MakeCpuBackend(1);
      const FusionStats stats = FuseGraph(g, *cpu);
      CHECK(stats.fused.count("FusedMatMul") == (act[0] != 0 || bias ? 1 : 0));
      CHECK(CountOps(g, "Cast") == 2);
      CHECK(g.outputs()[0]->type().dtype == DType::kF32);
      CHECK(g.outputs()[0]->producer()->op_type() == "Cast");
    }
  }
}

}  // namespace
}  // namespace tpc::runtime

namespace tpc::runtime {
namespace {

using namespace fusion_testing;  // NOLINT(google-build-using-namespace): the cases' builders
using ir::DType;

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
