// A fused projection whose unequal parts run through a channel-wise op before their Split
// (Qwen 3.5's Gated DeltaNet: [q | k | v] of 2, 2 and 4 heads through a causal
// convolution with a state): split in unequal blocks S(d/1:1:2), from the weight's
// columns through the convolution, its weight, bias and state, to the Split, which hands
// each rank its part of each. No collective, and the unsharded outputs, at N = 2 and 4.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"

namespace {

using tpc::ir::DType;
using tpc::ir::TensorType;

constexpr int64_t kModel = 16, kQCols = 8, kKCols = 8, kVCols = 16,
                  kConvChannels = kQCols + kKCols + kVCols, kConvTaps = 3;

tpc::ir::Tensor PatternFloats(std::vector<int64_t> shape, float scale) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = scale * static_cast<float>(static_cast<int64_t>((i * 37 + 5) % 17) - 8);
  }
  return tpc::ir::Tensor::FromFloat(std::move(shape), v);
}

// x [b, s, 16] -> MatMul [16, 32] -> Transpose -> CausalConvWithState (past [b, 32, 2])
// -> Transpose -> Split [8, 8, 16] -> q, k, v (and the present state).
std::string WriteFusedConvModel(const std::string& dir) {
  tpc::ir::Graph g;
  g.opsets()[""] = 18;
  g.opsets()["com.microsoft"] = 1;
  const tpc::ir::Dim b = tpc::ir::Dim::Symbol("b"), s = tpc::ir::Dim::Symbol("s");
  tpc::ir::Value* x = g.AddPlaceholder("x", TensorType(DType::kF32, {b, s, kModel}));
  tpc::ir::Value* past = g.AddPlaceholder(
      "past.conv",
      TensorType(DType::kF32, {b, tpc::ir::Dim(kConvChannels), tpc::ir::Dim(kConvTaps - 1)}));
  tpc::ir::Value* w = g.AddConstant("qkv.weight", PatternFloats({kModel, kConvChannels}, 0.05f));
  tpc::ir::Value* proj = g.AddCall("", "MatMul", {x, w}, {"qkv"})->output(0);
  tpc::ir::Value* channels =
      g.AddCall("", "Transpose", {proj}, {"qkv_t"}, {{"perm", std::vector<int64_t>{0, 2, 1}}})
          ->output(0);
  auto* conv = g.AddCall(
      "com.microsoft", "CausalConvWithState",
      {channels, g.AddConstant("conv.weight", PatternFloats({kConvChannels, 1, kConvTaps}, 0.1f)),
       g.AddConstant("conv.bias", PatternFloats({kConvChannels}, 0.02f)), past},
      {"conv", "present.conv"}, {{"ndim", int64_t{1}}, {"activation", std::string("silu")}},
      "/conv");
  tpc::ir::Value* back = g.AddCall("", "Transpose", {conv->output(0)}, {"conv_t"},
                                   {{"perm", std::vector<int64_t>{0, 2, 1}}})
                             ->output(0);
  tpc::ir::Value* sizes = g.AddConstant(
      "sizes", tpc::ir::Tensor::FromInt64({3}, std::vector<int64_t>{kQCols, kKCols, kVCols}));
  auto* split = g.AddCall("", "Split", {back, sizes}, {"q", "k", "v"}, {{"axis", int64_t{-1}}});
  g.SetOutputs({split->output(0), split->output(1), split->output(2), conv->output(1)});
  return tpc::testing::SaveModel(g, dir + "/model.onnx");
}

}  // namespace

TEST_CASE("a fused projection of unequal parts splits in unequal blocks through a convolution",
          "[tools][unequal_blocks]") {
  const std::string dir = tpc::testing::TempDir("unequal_blocks");
  const std::string model = WriteFusedConvModel(dir);
  for (int n : {2, 4}) {
    DYNAMIC_SECTION("N = " << n) {
      const std::string plan = dir + "/plan" + std::to_string(n);
      const tpc::testing::CommandResult compiled = tpc::testing::RunTpCompile(
          model + " --tp " + std::to_string(n) + " --force -o " + plan +
          " --output-placement 'q=S(2)' --output-placement 'k=S(2)' --output-placement 'v=S(2)'");
      INFO(compiled.output);
      REQUIRE(compiled.exit_code == 0);
      const std::string report = tpc::testing::ReadFile(plan + "/report.json");
      INFO(report.substr(0, 3000));
      CHECK(report.find("\"collectives\": []") != std::string::npos);
      // The state in and out each rank's channels of each part (plan.json's placements).
      std::string compact;  // plan.json without its whitespace
      for (char c : tpc::testing::ReadFile(plan + "/plan.json")) {
        if (c != ' ' && c != '\n') compact += c;
      }
      INFO(compact.substr(0, 3000));
      for (const char* state : {"past.conv", "present.conv"}) {
        INFO(state);
        const std::string want = std::string("\"value\":\"") + state +
                                 "\",\"placements\":[{\"kind\":\"SHARD\",\"dim\":\"1\","
                                 "\"reduce\":\"\",\"groups\":\"0\",\"blocks\":\"3\","
                                 "\"block_weights\":[\"1\",\"1\",\"2\"]}]";
        CHECK(compact.find(want) != std::string::npos);
      }
      const tpc::testing::CommandResult ran = tpc::testing::RunTpRun(
          plan + " --ranks threads --dim b=2 --dim s=5 --check-against " + model);
      INFO(ran.output);
      CHECK(ran.exit_code == 0);
      CHECK(ran.output.find("PASS: every output within tolerance") != std::string::npos);
    }
  }
}
