// Every committed model imports with every value typed, its op counts as expected, and
// survives export → re-import unchanged.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "test_util.h"
#include "tpc/ir/printer.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/exporter.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/model_file.h"

namespace {

using OpCounts = std::map<std::string, int>;

OpCounts CountOps(const tpc::ir::Graph& g) {
  OpCounts counts;
  for (tpc::ir::Node* n : g.nodes()) {
    if (n->is_call()) ++counts[n->op_type()];
  }
  return counts;
}

std::string Format(const OpCounts& counts) {
  std::string out;
  for (const auto& [op, n] : counts) out += op + "=" + std::to_string(n) + " ";
  return out;
}

// Counts after import: `Constant` nodes become constants and `Identity` forwards its
// input (both disappear as calls). The ONNX files' own counts are in models/README.md.
const std::map<std::string, OpCounts>& ExpectedCounts() {
  static const auto* table = new std::map<std::string, OpCounts>{
      {"mlp", {{"Add", 3}, {"Div", 1}, {"Erf", 1}, {"MatMul", 2}, {"Mul", 2}}},
      {"mlp_dynamo", {{"Add", 3}, {"Div", 1}, {"Erf", 1}, {"MatMul", 2}, {"Mul", 2}}},
  };
  return *table;
}

const char* kModels[] = {"mlp",  "mlp_dynamo", "gpt2",    "gpt2_dynamo",
                         "gpt2_loss", "llama", "mistral", "bert"};

}  // namespace

TEST_CASE("committed models import fully typed", "[onnx][models]") {
  for (const char* name : kModels) {
    DYNAMIC_SECTION(name) {
      const std::string path = tpc::testing::SourcePath(std::string("models/") + name + ".onnx");
      auto graph = tpc::onnx::ImportModel(path);
      REQUIRE(graph.ok());
      REQUIRE(tpc::ir::VerifyGraph(**graph).ok());
      for (tpc::ir::Node* n : (*graph)->nodes()) {
        for (int i = 0; i < n->num_outputs(); ++i) {
          const tpc::ir::Value* v = n->output(i);
          INFO(v->name() << ": " << v->type().ToString());
          CHECK(v->type().dtype != tpc::ir::DType::kUndefined);
          REQUIRE(v->type().has_rank());
          // Only the model's own symbolic dims (and expressions of them) remain.
          for (const tpc::ir::Dim& d : *v->type().shape) CHECK_FALSE(d.is_unknown());
        }
      }
      // Initializers (the weights) are views of the mapped file, not copies.
      auto file = tpc::onnx::ReadModelFile(path);
      REQUIRE(file.ok());
      int mapped = 0;
      for (const auto& init : file->proto.graph().initializer()) {
        const tpc::ir::Value* v = (*graph)->FindValue(init.name());
        REQUIRE(v != nullptr);
        INFO(init.name());
        CHECK(v->producer()->tensor().is_mapped());
        ++mapped;
      }
      CHECK(mapped > 0);
      auto expected = ExpectedCounts().find(name);
      if (expected != ExpectedCounts().end()) {
        CHECK(Format(CountOps(**graph)) == Format(expected->second));
      }
    }
  }
}

TEST_CASE("export then re-import gives the same IR", "[onnx][models]") {
  for (const char* name : kModels) {
    DYNAMIC_SECTION(name) {
      auto graph = tpc::onnx::ImportModel(tpc::testing::SourcePath(std::string("models/") + name + ".onnx"));
      REQUIRE(graph.ok());
      std::string dir = tpc::testing::TempDir(std::string("rt_") + name);
      tpc::onnx::ExportOptions options;
      options.weights_file = "rank0.weights";
      REQUIRE(tpc::onnx::ExportModel(**graph, dir + "/rank0.onnx", options).ok());
      auto again = tpc::onnx::ImportModel(dir + "/rank0.onnx");
      REQUIRE(again.ok());
      CHECK(tpc::ir::PrintGraph(**again) == tpc::ir::PrintGraph(**graph));
    }
  }
}
