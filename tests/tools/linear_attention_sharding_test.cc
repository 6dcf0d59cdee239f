// LinearAttention split by heads when there are fewer query (or value) heads than ranks:
// each of those heads on its group of ranks (S(d@g)), the others split N ways, at N = 4.
// Qwen 3.5's inverse GQA (2 query/key heads, 4 value heads; the committed exports cover
// it through the solver's choice) and GQA (4 query heads, 2 key/value heads), placed
// here by hand, give the unsharded outputs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"

namespace {

using tpc::ir::DType;
using tpc::ir::TensorType;

constexpr int64_t kKeySize = 8, kValueSize = 4;

// query [b, s, hq · 8], key [b, s, min(hq, hv) · 8], value [b, s, hv · 4], past [b, hv, 8,
// 4], decay and beta [b, s, hv] -> LinearAttention (gated_delta) -> (output, present).
std::string WriteLinearAttentionModel(const std::string& dir, int64_t hq, int64_t hv) {
  tpc::ir::Graph g;
  g.opsets()[""] = 18;
  g.opsets()["com.microsoft"] = 1;
  const tpc::ir::Dim b = tpc::ir::Dim::Symbol("b"), s = tpc::ir::Dim::Symbol("s");
  const int64_t hk = std::min(hq, hv);
  auto input = [&](const char* name, std::vector<tpc::ir::Dim> dims) {
    return g.AddPlaceholder(name, TensorType(DType::kF32, std::move(dims)));
  };
  std::vector<tpc::ir::Value*> in = {input("query", {b, s, hq * kKeySize}),
                                     input("key", {b, s, hk * kKeySize}),
                                     input("value", {b, s, hv * kValueSize}),
                                     input("past_state", {b, hv, kKeySize, kValueSize}),
                                     input("decay", {b, s, hv}),
                                     input("beta", {b, s, hv})};
  tpc::ir::Attributes attrs = {{"q_num_heads", hq},
                               {"kv_num_heads", hv},
                               {"update_rule", std::string("gated_delta")},
                               {"scale", 0.5f}};
  auto* node = g.AddCall("com.microsoft", "LinearAttention", std::move(in),
                         {"output", "present_state"}, std::move(attrs), "/linear");
  g.SetOutputs({node->output(0), node->output(1)});
  return tpc::testing::SaveModel(g, dir + "/model.onnx");
}

}  // namespace

TEST_CASE("LinearAttention splits by heads with the fewer heads on groups of ranks",
          "[tools][linear_attention]") {
  struct Case {
    int64_t hq, hv;
    std::string placements;
  };
  for (const Case& c : std::vector<Case>{
           // Inverse GQA: value heads split 4 ways, query and key heads each on 2 ranks.
           {2, 4,
            "--input-placement 'query=S(2@2)' --input-placement 'key=S(2@2)' "
            "--input-placement 'value=S(2)' --input-placement 'past_state=S(1)' "
            "--input-placement 'decay=S(2)' --input-placement 'beta=S(2)' "
            "--output-placement 'output=S(2)' --output-placement 'present_state=S(1)'"},
           // GQA: query heads split 4 ways, key/value heads and their states on 2 ranks each.
           {4, 2,
            "--input-placement 'query=S(2)' --input-placement 'key=S(2@2)' "
            "--input-placement 'value=S(2@2)' --input-placement 'past_state=S(1@2)' "
            "--input-placement 'decay=S(2@2)' --input-placement 'beta=S(2@2)' "
            "--output-placement 'output=S(2)' --output-placement 'present_state=S(1@2)'"}}) {
    DYNAMIC_SECTION(c.hq << " query heads, " << c.hv << " value heads") {
      const std::string dir = tpc::testing::TempDir("linear_attention_sharding");
      const std::string model = WriteLinearAttentionModel(dir, c.hq, c.hv);
      const std::string plan = dir + "/plan";
      const tpc::testing::CommandResult compiled =
          tpc::testing::RunTpCompile(model + " --tp 4 --force -o " + plan + " " + c.placements);
      INFO(compiled.output);
      REQUIRE(compiled.exit_code == 0);
      // No collective: each rank's heads read each other's.
      const std::string report = tpc::testing::ReadFile(plan + "/report.json");
      INFO(report.substr(0, 3000));
      CHECK(report.find("\"collectives\": []") != std::string::npos);
      const tpc::testing::CommandResult ran = tpc::testing::RunTpRun(
          plan + " --ranks threads --dim b=2 --dim s=5 --check-against " + model);
      INFO(ran.output);
      CHECK(ran.exit_code == 0);
      CHECK(ran.output.find("PASS: every output within tolerance") != std::string::npos);
    }
  }
}
