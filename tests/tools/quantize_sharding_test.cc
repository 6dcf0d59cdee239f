// QuantizeLinear and DequantizeLinear split: a per-tensor scale stays whole, a per-axis
// scale and zero point are sliced with the axis. Outputs asked split (so the ops run on
// each rank's columns), the 2- and 4-rank plans give the unsharded outputs exactly.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"

namespace {

using tpc::ir::DType;
using tpc::ir::TensorType;

// x [batch, 8] @ W [8, 16] → Quantize (scalar scale) → Dequantize (per column), and
// Quantize (per column) → Dequantize (scalar): outputs y and y2.
std::string WriteQuantizeModel(const std::string& dir) {
  tpc::ir::Graph g;
  g.opsets()[""] = 19;
  std::vector<float> w(8 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 11) * 0.37f - 1.7f;
  std::vector<float> col_scale(16);
  for (size_t i = 0; i < col_scale.size(); ++i)
    col_scale[i] = 0.02f + 0.01f * static_cast<float>(i);
  std::vector<double> col_zero(16);
  for (size_t i = 0; i < col_zero.size(); ++i) col_zero[i] = static_cast<double>(i % 5) - 2;
  tpc::ir::Value* x = g.AddPlaceholder(
      "x", TensorType(DType::kF32, {tpc::ir::Dim::Symbol("batch"), tpc::ir::Dim(8)}));
  tpc::ir::Value* weight = g.AddConstant("W", tpc::ir::Tensor::FromFloat({8, 16}, w));
  tpc::ir::Value* s = g.AddConstant("s", tpc::ir::Tensor::FromFloat({}, {0.05f}));
  tpc::ir::Value* zp = g.AddConstant("zp", tpc::ir::Tensor::FromDoubles(DType::kI8, {}, {3}));
  tpc::ir::Value* s2 = g.AddConstant("s2", tpc::ir::Tensor::FromFloat({16}, col_scale));
  tpc::ir::Value* zp2 =
      g.AddConstant("zp2", tpc::ir::Tensor::FromDoubles(DType::kI8, {16}, col_zero));
  auto call = [&g](const std::string& op, std::vector<tpc::ir::Value*> in, const std::string& out,
                   tpc::ir::Attributes attrs = {}) {
    return g.AddCall("", op, std::move(in), {out}, std::move(attrs), "/" + out)->output(0);
  };
  tpc::ir::Value* h = call("MatMul", {x, weight}, "h");
  tpc::ir::Value* q = call("QuantizeLinear", {h, s, zp}, "q");
  tpc::ir::Value* y = call("DequantizeLinear", {q, s2, zp2}, "y", {{"axis", int64_t{1}}});
  tpc::ir::Value* q2 = call("QuantizeLinear", {h, s2, zp2}, "q2", {{"axis", int64_t{1}}});
  tpc::ir::Value* y2 = call("DequantizeLinear", {q2, s, zp}, "y2");
  g.SetOutputs({y, y2});
  return tpc::testing::SaveModel(g, dir + "/model.onnx");
}

}  // namespace

TEST_CASE("QuantizeLinear and DequantizeLinear run split with per-axis scales sliced",
          "[tools][quantize]") {
  const std::string dir = tpc::testing::TempDir("quantize_sharding");
  const std::string model = WriteQuantizeModel(dir);
  for (int n : {2, 4}) {
    DYNAMIC_SECTION("N=" << n) {
      const std::string plan = dir + "/plan" + std::to_string(n);
      const tpc::testing::CommandResult compiled = tpc::testing::RunTpCompile(
          model + " --tp " + std::to_string(n) +
          " --objective memory --output-placement 'y=S(1)' --output-placement 'y2=S(1)' --force "
          "-o " +
          plan);
      INFO(compiled.output);
      REQUIRE(compiled.exit_code == 0);
      // No collective: the quantize ops run on each rank's columns.
      CHECK(compiled.output.find("collectives per forward") != std::string::npos);
      CHECK(compiled.output.find(": none") != std::string::npos);
      const std::string report = tpc::testing::ReadFile(plan + "/report.json");
      for (const char* v : {"q", "y", "q2", "y2"}) {
        INFO(v);
        CHECK(report.find("\"" + std::string(v) + "\": \"S(1)\"") != std::string::npos);
      }
      CHECK(report.find("\"s2\": \"S(0)\"") != std::string::npos);
      const tpc::testing::CommandResult ran =
          tpc::testing::RunTpRun(plan + " --ranks threads --dim batch=3 --check-against " + model);
      INFO(ran.output);
      CHECK(ran.exit_code == 0);
      CHECK(ran.output.find("PASS: every output within tolerance") != std::string::npos);
    }
  }
}
