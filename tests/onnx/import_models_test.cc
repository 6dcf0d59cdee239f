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
      {"gpt2",
       {{"Add", 11},
        {"Cast", 4},
        {"Concat", 27},
        {"ConstantOfShape", 1},
        {"Equal", 1},
        {"Expand", 1},
        {"Gather", 33},
        {"Gemm", 8},
        {"LayerNormalization", 5},
        {"LessOrEqual", 1},
        {"MatMul", 5},
        {"Mul", 11},
        {"Pow", 2},
        {"Range", 1},
        {"Reshape", 27},
        {"Shape", 41},
        {"Slice", 9},
        {"Softmax", 2},
        {"Split", 2},
        {"Squeeze", 9},
        {"Tanh", 2},
        {"Transpose", 8},
        {"Unsqueeze", 50},
        {"Where", 2}}},
      {"gpt2_dynamo", {{"Add", 11},        {"Concat", 7},  {"Expand", 1},
                       {"Gather", 2},      {"Gemm", 8},    {"LayerNormalization", 5},
                       {"LessOrEqual", 1}, {"MatMul", 5},  {"Mul", 10},
                       {"Pow", 2},         {"Range", 1},   {"Reshape", 24},
                       {"Shape", 2},       {"Softmax", 2}, {"Split", 2},
                       {"Squeeze", 1},     {"Tanh", 2},    {"Transpose", 9},
                       {"Unsqueeze", 4},   {"Where", 1}}},
      {"gpt2_loss",
       {{"Add", 11},
        {"Cast", 7},
        {"Concat", 28},
        {"ConstantOfShape", 2},
        {"Equal", 1},
        {"Expand", 1},
        {"Gather", 33},
        {"Gemm", 8},
        {"LayerNormalization", 5},
        {"LessOrEqual", 1},
        {"MatMul", 5},
        {"Mul", 11},
        {"Pad", 1},
        {"Pow", 2},
        {"Range", 1},
        {"Reshape", 31},
        {"Shape", 41},
        {"Slice", 11},
        {"Softmax", 2},
        {"SoftmaxCrossEntropyLoss", 1},
        {"Split", 2},
        {"Squeeze", 9},
        {"Tanh", 2},
        {"Transpose", 9},
        {"Unsqueeze", 50},
        {"Where", 2}}},
      {"llama", {{"Add", 15},       {"Cast", 26},       {"Concat", 22}, {"ConstantOfShape", 5},
                 {"Cos", 1},        {"Div", 9},         {"Equal", 5},   {"Expand", 5},
                 {"Gather", 27},    {"LessOrEqual", 1}, {"MatMul", 19}, {"Mul", 36},
                 {"Neg", 4},        {"Pow", 5},         {"Range", 1},   {"ReduceMean", 5},
                 {"Reshape", 17},   {"Shape", 31},      {"Sigmoid", 2}, {"Sin", 1},
                 {"Slice", 8},      {"Softmax", 2},     {"Sqrt", 5},    {"Transpose", 10},
                 {"Unsqueeze", 70}, {"Where", 6}}},
      {"mistral", {{"Add", 15},
                   {"And", 2},
                   {"Cast", 28},
                   {"Concat", 22},
                   {"ConstantOfShape", 6},
                   {"Cos", 1},
                   {"Div", 9},
                   {"Equal", 5},
                   {"Expand", 5},
                   {"Gather", 27},
                   {"Greater", 1},
                   {"LessOrEqual", 1},
                   {"MatMul", 19},
                   {"Mul", 36},
                   {"Neg", 4},
                   {"Pow", 5},
                   {"Range", 1},
                   {"ReduceMean", 5},
                   {"Reshape", 17},
                   {"Shape", 31},
                   {"Sigmoid", 2},
                   {"Sin", 1},
                   {"Slice", 8},
                   {"Softmax", 2},
                   {"Sqrt", 5},
                   {"Sub", 1},
                   {"Transpose", 10},
                   {"Unsqueeze", 70},
                   {"Where", 6}}},
      {"bert",
       {{"Add", 23},
        {"And", 2},
        {"Cast", 6},
        {"Concat", 12},
        {"ConstantOfShape", 4},
        {"Div", 2},
        {"Equal", 3},
        {"Erf", 2},
        {"Expand", 3},
        {"Flatten", 1},
        {"Gather", 14},
        {"GatherElements", 1},
        {"Gemm", 1},
        {"GreaterOrEqual", 1},
        {"LayerNormalization", 5},
        {"MatMul", 16},
        {"Mul", 10},
        {"Range", 3},
        {"Reshape", 13},
        {"Shape", 13},
        {"Slice", 1},
        {"Softmax", 2},
        {"Tanh", 1},
        {"Transpose", 8},
        {"Unsqueeze", 32},
        {"Where", 4}}},
  };
  return *table;
}

const char* kModels[] = {"mlp",       "mlp_dynamo", "gpt2",    "gpt2_dynamo",
                         "gpt2_loss", "llama",      "mistral", "bert"};

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
      // The same counts, derived independently from the file's nodes.
      OpCounts from_file;
      for (const auto& node : file->proto.graph().node()) {
        if (node.op_type() != "Constant" && node.op_type() != "Identity")
          ++from_file[node.op_type()];
      }
      CHECK(Format(CountOps(**graph)) == Format(from_file));
      auto expected = ExpectedCounts().find(name);
      REQUIRE(expected != ExpectedCounts().end());
      CHECK(Format(CountOps(**graph)) == Format(expected->second));
    }
  }
}

TEST_CASE("export then re-import gives the same IR", "[onnx][models]") {
  for (const char* name : kModels) {
    DYNAMIC_SECTION(name) {
      auto graph =
          tpc::onnx::ImportModel(tpc::testing::SourcePath(std::string("models/") + name + ".onnx"));
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
