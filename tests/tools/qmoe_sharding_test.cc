// QMoE split as Megatron splits each expert's MLP: FC1's codes and scales by rows, FC2's
// codes by whole bytes and its scales by whole blocks (or, one scale per row, whole on
// every rank), FC2's bias partial. Per-row 4-bit and block-wise 8-bit experts (the
// committed int4 LFM2-MoE covers block-wise 4-bit) at N = 2 give the unsharded outputs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"

namespace {

using tpc::ir::DType;
using tpc::ir::TensorType;

constexpr int64_t kExperts = 4, kHidden = 32, kInter = 32;

// Deterministic codes (every value of the width) and positive scales.
tpc::ir::Tensor Codes(int64_t rows, int64_t bytes) {
  std::string b(static_cast<size_t>(kExperts * rows * bytes), '\0');
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>((i * 37 + 11) % 256);
  return tpc::ir::Tensor::FromBytes(DType::kU8, {kExperts, rows, bytes}, b);
}
tpc::ir::Tensor Floats(std::vector<int64_t> shape, float base, float step) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + step * static_cast<float>(i % 7);
  return tpc::ir::Tensor::FromFloat(std::move(shape), v);
}

// x [tokens, 32], router [tokens, 4] -> QMoE (relu, top 2) with `bits`-bit experts of inner
// size 32, in blocks of `block` (0: one scale per row).
std::string WriteQMoeModel(const std::string& dir, int bits, int64_t block) {
  tpc::ir::Graph g;
  g.opsets()[""] = 18;
  g.opsets()["com.microsoft"] = 1;
  const tpc::ir::Dim t = tpc::ir::Dim::Symbol("tokens");
  tpc::ir::Value* x = g.AddPlaceholder("x", TensorType(DType::kF32, {t, kHidden}));
  tpc::ir::Value* router = g.AddPlaceholder("router", TensorType(DType::kF32, {t, kExperts}));
  auto scales = [&](int64_t rows, int64_t cols) {
    return block > 0 ? Floats({kExperts, rows, cols / block}, 0.01f, 0.003f)
                     : Floats({kExperts, rows}, 0.01f, 0.003f);
  };
  std::vector<tpc::ir::Value*> in = {
      x,
      router,
      g.AddConstant("w1", Codes(kInter, kHidden * bits / 8)),
      g.AddConstant("s1", scales(kInter, kHidden)),
      g.AddConstant("b1", Floats({kExperts, kInter}, -0.1f, 0.05f)),
      g.AddConstant("w2", Codes(kHidden, kInter * bits / 8)),
      g.AddConstant("s2", scales(kHidden, kInter)),
      g.AddConstant("b2", Floats({kExperts, kHidden}, -0.2f, 0.07f))};
  tpc::ir::Attributes attrs = {{"k", int64_t{2}},
                               {"normalize_routing_weights", int64_t{1}},
                               {"expert_weight_bits", int64_t{bits}}};
  if (block > 0) attrs["block_size"] = block;
  tpc::ir::Value* y =
      g.AddCall("com.microsoft", "QMoE", std::move(in), {"y"}, std::move(attrs), "/moe")->output(0);
  g.SetOutputs({y});
  return tpc::testing::SaveModel(g, dir + "/model.onnx");
}

}  // namespace

TEST_CASE("QMoE runs split by each expert's inner dim, per-row 4-bit and block-wise 8-bit",
          "[tools][quantize]") {
  for (const auto& [bits, block] : std::vector<std::pair<int, int64_t>>{{4, 0}, {8, 16}}) {
    DYNAMIC_SECTION(bits << "-bit, block " << block) {
      const std::string dir = tpc::testing::TempDir("qmoe_sharding");
      const std::string model = WriteQMoeModel(dir, bits, block);
      const std::string plan = dir + "/plan";
      const tpc::testing::CommandResult compiled =
          tpc::testing::RunTpCompile(model + " --tp 2 --objective memory --force -o " + plan);
      INFO(compiled.output);
      REQUIRE(compiled.exit_code == 0);
      const std::string report = tpc::testing::ReadFile(plan + "/report.json");
      INFO(report.substr(0, 2000));
      CHECK(report.find("\"w1\": \"S(1)\"") != std::string::npos);
      CHECK(report.find("\"w2\": \"S(2)\"") != std::string::npos);
      // Per-row scales stay whole; block scales split with the blocks.
      CHECK(report.find(block > 0 ? "\"s2\": \"S(2)\"" : "\"s2\": \"R\"") != std::string::npos);
      const tpc::testing::CommandResult ran =
          tpc::testing::RunTpRun(plan + " --ranks threads --dim tokens=6 --check-against " + model);
      INFO(ran.output);
      CHECK(ran.exit_code == 0);
      CHECK(ran.output.find("PASS: every output within tolerance") != std::string::npos);
    }
  }
}
