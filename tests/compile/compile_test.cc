// tpc::Compile, the pipeline as one call: the plan in memory equals the files tp-compile
// writes, the report is gathered once and rendered consistently, and bad options fail
// naming the flag.
#include <catch2/catch.hpp>
#include <filesystem>

#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tpc/compile/compile.h"
#include "tpc/compile/report.h"
#include "tpc/util/mapped_file.h"

namespace {

using tpc::testing::ReadFile;
using tpc::testing::SourcePath;
using tpc::testing::TempDir;

tpc::CompileOptions Tp(int64_t n) {
  tpc::CompileOptions o;
  o.tp = n;
  return o;
}

// The nodes and value names of a model, without its initializers' bytes.
std::string GraphText(const onnx::ModelProto& m) {
  std::string out;
  for (const auto& n : m.graph().node()) {
    out += n.name() + " " + n.op_type() + ":";
    for (const auto& i : n.input()) out += " " + i;
    out += " ->";
    for (const auto& o : n.output()) out += " " + o;
    out += "\n";
  }
  for (const auto& t : m.graph().initializer()) {
    out += t.name() + " [";
    for (int64_t d : t.dims()) out += std::to_string(d) + ",";
    out += "]\n";
  }
  return out;
}

}  // namespace

TEST_CASE("compile: the plan in memory is the plan Save writes", "[compile]") {
  auto plan = tpc::Compile(SourcePath("models/gpt2.onnx"), Tp(2));
  REQUIRE(plan.ok());
  const std::string dir = TempDir("compile_save") + "/plan";
  REQUIRE(plan->Save(dir).ok());
  for (int64_t r = 0; r < 2; ++r) {
    auto in_memory = plan->RankModel(r);
    REQUIRE(in_memory.ok());
    onnx::ModelProto saved;
    REQUIRE(saved.ParseFromString(ReadFile(dir + "/rank" + std::to_string(r) + ".onnx")));
    CHECK(GraphText(*in_memory) == GraphText(saved));
    // Inline, every initializer holds its bytes.
    for (const auto& t : in_memory->graph().initializer()) {
      CHECK(t.data_location() != onnx::TensorProto::EXTERNAL);
    }
    std::map<std::string, std::string> meta;
    for (const auto& p : in_memory->metadata_props()) meta[p.key()] = p.value();
    CHECK(meta["tpc.rank"] == std::to_string(r));
    CHECK(meta["tpc.tp"] == "2");
  }
  CHECK_FALSE(plan->RankModel(2).ok());
  // report.json and report.html are written with the plan, and the report's per-rank
  // bytes are the files'.
  const std::string json = ReadFile(dir + "/report.json");
  CHECK_THAT(json, Catch::Contains("\"weight_placements\""));
  CHECK_THAT(ReadFile(dir + "/report.html"), Catch::StartsWith("<!DOCTYPE html>"));
  REQUIRE(plan->report().per_rank_weight_bytes.size() == 2);
  // The file holds the external weights (aligned), the model the small inline ones.
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(dir + "/rank0.weights") +
                                               std::filesystem::file_size(dir + "/rank0.onnx"));
  CHECK(plan->report().per_rank_weight_bytes[0] > 0);
  CHECK(plan->report().per_rank_weight_bytes[0] <= file_bytes);
}

TEST_CASE("compile: a model in memory compiles as its file does", "[compile]") {
  const std::string path = SourcePath("models/llama.onnx");
  auto from_file = tpc::Compile(path, Tp(2));
  auto from_bytes = tpc::CompileBytes(tpc::MappedFile::FromBytes(ReadFile(path), "llama (bytes)"),
                                      "llama", SourcePath("models"), Tp(2));
  REQUIRE(from_file.ok());
  REQUIRE(from_bytes.ok());
  CHECK(tpc::compile::ReportJson(from_bytes->report()).find("\"model\": \"llama\"") !=
        std::string::npos);
  auto a = from_file->RankModel(1);
  auto b = from_bytes->RankModel(1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(GraphText(*a) == GraphText(*b));
  REQUIRE(a->graph().initializer_size() == b->graph().initializer_size());
  for (int i = 0; i < a->graph().initializer_size(); ++i) {
    CHECK(a->graph().initializer(i).raw_data() == b->graph().initializer(i).raw_data());
  }
}

TEST_CASE("compile: bad options fail naming the flag", "[compile]") {
  const std::string gpt2 = SourcePath("models/gpt2.onnx");
  auto expect = [&](tpc::CompileOptions o, const std::string& text) {
    auto plan = tpc::Compile(gpt2, o);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(plan.status().message()), Catch::Contains(text));
  };
  tpc::CompileOptions o = Tp(2);
  o.dims["bacth"] = 4;
  expect(o, "--dim 'bacth': the model has no such symbolic input dim");
  o = Tp(0);
  expect(o, "--tp must be a positive integer");
  o = Tp(2);
  o.dtype = "f8";
  expect(o, "--dtype f8: expected f32, f16 or bf16");
  o = Tp(2);
  o.memory_budget = "1GB";
  expect(o, "--memory-budget applies to --objective time");
  o = Tp(2);
  o.weight_slack = -1;
  expect(o, "--weight-slack");
  o = Tp(2);
  o.device_profile = "tpu";
  expect(o, "--device-profile tpu: expected one of");
  o = Tp(2);
  o.dims["seq"] = 7;
  o.sequence_parallel = true;
  expect(o, "--dim seq=7 is not divisible by --tp 2");
}

// Optimum's Qwen 3 MoE picks each expert's tokens with NonZero: their count is a dim only
// the data decides. Priced as the largest input's rows (batch × past+seq of the attention
// mask), each layer's experts cost one collective (Megatron's: every expert's inner dim
// split, the partial sums accumulated from zeros and reduced once); priced as one
// symbolic dim, the per-expert collectives look free and each expert gets its own.
TEST_CASE("compile: a dim the data sizes is priced as the largest input's rows", "[compile]") {
  const std::string moe = SourcePath("models/optimum/qwen3_moe/model.onnx");
  auto mlp_collectives = [](const tpc::compile::Report& r) {
    int n = 0;
    for (const auto& c : r.collectives) n += c.value.find("/mlp/") != std::string::npos;
    return n;
  };
  auto plan = tpc::Compile(moe, Tp(2));
  REQUIRE(plan.ok());
  REQUIRE(plan->report().data_sized_dim_size.has_value());
  CHECK(*plan->report().data_sized_dim_size == 512 * 1024);
  CHECK(mlp_collectives(plan->report()) == 2);  // 2 layers
  CHECK_THAT(tpc::compile::DimsPhrase(plan->report()),
             Catch::Contains("every dim the data sizes (?) = 524288"));
  tpc::CompileOptions o = Tp(2);
  o.dims["?"] = 512;
  auto small = tpc::Compile(moe, o);
  REQUIRE(small.ok());
  CHECK(*small->report().data_sized_dim_size == 512);
  CHECK(mlp_collectives(small->report()) > 2);
  auto gpt2 = tpc::Compile(SourcePath("models/gpt2.onnx"), Tp(2));
  REQUIRE(gpt2.ok());
  CHECK_FALSE(gpt2->report().data_sized_dim_size.has_value());
  // --dim ?=SIZE for a model with no such dim is refused, as a named dim it lacks.
  tpc::CompileOptions q = Tp(2);
  q.dims["?"] = 512;
  auto typo = tpc::Compile(SourcePath("models/gpt2.onnx"), q);
  REQUIRE_FALSE(typo.ok());
  CHECK_THAT(std::string(typo.status().message()), Catch::Contains("no dim sized by its data"));
}

TEST_CASE("compile: the explanations come back and go to the callback first", "[compile]") {
  tpc::CompileOptions o = Tp(2);
  o.explain = {"m.transformer.h.0.mlp.c_fc.weight"};
  std::vector<std::string> seen;
  o.explained = [&](const std::string& text) { seen.push_back(text); };
  auto plan = tpc::Compile(SourcePath("models/gpt2.onnx"), o);
  REQUIRE(plan.ok());
  REQUIRE(plan->explanations().size() == 1);
  CHECK(seen == plan->explanations());
  CHECK_THAT(seen[0], Catch::StartsWith("m.transformer.h.0.mlp.c_fc.weight: "));
  // A name the model lacks fails the compilation with a suggestion.
  o.explain = {"m.transformer.h.0.mlp.c_fc.wieght"};
  auto bad = tpc::Compile(SourcePath("models/gpt2.onnx"), o);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("did you mean"));
}

TEST_CASE("compile: LayerOf reads both naming schemes", "[compile]") {
  using tpc::compile::LayerOf;
  CHECK(LayerOf("/model/layers.3/mlp/down_proj/MatMul") == "layers.3");
  CHECK(LayerOf("m.transformer.h.0.attn.c_attn.weight") == "h.0");
  CHECK(LayerOf("/bert/encoder/layer.11/attention/Add") == "layer.11");
  CHECK(LayerOf("blocks.2.norm1.weight") == "blocks.2");
  CHECK(LayerOf("/model/embed_tokens/Gather") == "");
  CHECK(LayerOf("h.x.attn") == "");  // not an index
  CHECK(LayerOf("") == "");
}

TEST_CASE("compile: the report's renderings agree and escape names", "[compile]") {
  tpc::compile::Report r;
  r.model = "a<b>&\"c\".onnx";
  r.tp = 2;
  r.objective = "balanced";
  r.default_dim_size = 512;
  r.weight_bytes_total = 2048;
  r.weight_bytes_per_rank = 1024;
  r.per_rank_weight_bytes = {1024, 1024};
  r.collectives.push_back({"all-reduce", "sum", 4096, "/layers.0/x<y>", "/layers.0/Add", "P(sum)",
                           "R", false, "layers.0"});
  r.collectives.push_back({"all-gather", "", 1024, "z", "", "S(1)", "R", false, ""});
  r.collectives_per_forward = {{"all-reduce", 1, 4096}, {"all-gather", 1, 1024}};
  r.values.push_back(
      {"w<1>", "f32[4]", "S(0)", "constant", "", true, 16, "/layers.0/Add", "layers.0"});
  const std::string html = tpc::compile::ReportHtml(r);
  CHECK_THAT(html, Catch::Contains("a&lt;b&gt;&amp;&quot;c&quot;.onnx"));
  CHECK_THAT(html, Catch::Contains("/layers.0/x&lt;y&gt;"));
  CHECK_THAT(html, Catch::Contains("w&lt;1&gt;"));
  CHECK(html.find("x<y>") == std::string::npos);
  CHECK(html.find("http") == std::string::npos);  // nothing fetched
  CHECK_THAT(html, Catch::Contains("1 all-reduce"));
  const std::string json = tpc::compile::ReportJson(r);
  CHECK_THAT(json, Catch::Contains("\"layer\": \"layers.0\""));
  CHECK_THAT(json, Catch::Contains("\"used_by\": \"/layers.0/Add\""));
  const std::string summary = tpc::compile::ReportSummary(r, "out");
  CHECK_THAT(summary, Catch::Contains("every symbolic dim = 512 (set them with --dim)"));
  CHECK_THAT(summary, Catch::Contains("1 all-reduce (4.0 KiB) 1 all-gather"));
}
