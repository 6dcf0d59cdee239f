// Ops whose axes, split sizes or pads are graph inputs (known only at run time) after a
// column-parallel MatMul: the shard stage gives them no split on what it cannot see (they
// take their input whole), and the plan for 2 ranks computes what the unsharded graph does.
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/exporter.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime {
namespace {

using ir::DType;
using ir::TensorType;

Tensor AxesI64(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  Tensor t = Tensor::Allocate(DType::kI64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// x [4, 8] @ w [8, 16], then Slice, Split, Unsqueeze + Squeeze and Pad, each reading its
// axes (or sizes) from a graph input. Written to `dir`/model.onnx.
std::string WriteAxesModel(const std::string& dir) {
  ir::Graph g;
  g.opsets()[""] = 18;
  std::vector<float> w(8 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.0f;
  ir::Value* x = g.AddPlaceholder("x", TensorType(DType::kF32, {4, 8}));
  ir::Value* axes = g.AddPlaceholder("axes", TensorType(DType::kI64, {1}));
  ir::Value* sizes = g.AddPlaceholder("sizes", TensorType(DType::kI64, {2}));
  ir::Value* weight = g.AddConstant("w", ir::Tensor::FromFloat({8, 16}, w));
  auto ints = [&g](const std::string& name, std::vector<int64_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return g.AddConstant(name, ir::Tensor::FromInt64({n}, v));
  };
  auto call = [&g](const std::string& op, std::vector<ir::Value*> in, std::vector<std::string> outs,
                   ir::Attributes attrs = {}) {
    return g.AddCall("", op, std::move(in), std::move(outs), std::move(attrs), "/" + outs[0]);
  };
  ir::Value* h = call("MatMul", {x, weight}, {"h"})->output(0);
  ir::Value* sliced =
      call("Slice", {h, ints("starts", {1}), ints("ends", {3}), axes}, {"sliced"})->output(0);
  ir::Node* split = call("Split", {h, sizes}, {"part0", "part1"}, {{"axis", int64_t{1}}});
  ir::Value* unsqueezed = call("Unsqueeze", {h, axes}, {"unsqueezed"})->output(0);
  ir::Value* squeezed = call("Squeeze", {unsqueezed, axes}, {"squeezed"})->output(0);
  ir::Value* padded = call("Pad", {h, ints("pads", {2, 1}), nullptr, axes}, {"padded"})->output(0);
  g.SetOutputs({sliced, split->output(0), split->output(1), squeezed, padded});
  return tpc::testing::SaveModel(g, dir + "/model.onnx");
}

TEST_CASE("axes and split sizes given at run time: the ops take their input whole, sharded",
          "[runtime][equivalence]") {
  const std::string dir = tpc::testing::TempDir("runtime_axes");
  const std::string path = WriteAxesModel(dir);

  std::map<std::string, Tensor> inputs;
  Tensor x = Tensor::Allocate(DType::kF32, {4, 8});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(i % 5);
  inputs["x"] = x;
  inputs["sizes"] = AxesI64({2}, {5, 11});

  auto original = onnx::ImportModel(path);
  INFO(original.status().ToString());
  REQUIRE(original.ok());

  // The unsharded plan, then the 2-rank one (import → shard → partition → files).
  auto graph = onnx::ImportModel(path);
  REQUIRE(graph.ok());
  const shard::ShardOptions options = tpc::testing::TpOptions(2);
  const shard::ShardResult result = tpc::testing::ShardAndPartition(**graph, options);
  const std::string plan_dir = dir + "/plan";
  std::filesystem::create_directories(plan_dir);
  plan::PlanOptions po;
  po.tp = 2;
  po.source_model = path;
  auto files = plan::WriteRankFiles(**graph, plan_dir, po);
  INFO(files.status().ToString());
  REQUIRE(files.ok());
  REQUIRE(plan::WriteManifest(**graph, *files, plan_dir, po).ok());
  // The weight is split (column-parallel): the plan is not all replicated.
  CHECK(files->at(0).weight_bytes < 8 * 16 * 4);
  auto ranks = LoadPlan(plan_dir);
  INFO(ranks.status().ToString());
  REQUIRE(ranks.ok());
  std::vector<ir::Graph*> ptrs;
  for (const auto& r : *ranks) ptrs.push_back(r.get());

  for (int64_t axis : {0, 1, -1}) {
    INFO("axes [" << axis << "]");
    inputs["axes"] = AxesI64({1}, {axis});
    auto want = tpc::testing::RunRanks({original->get()}, inputs);
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    auto got = tpc::testing::RunRanks(ptrs, inputs);
    INFO(got.status().ToString());
    REQUIRE(got.ok());
    for (size_t r = 0; r < got->size(); ++r) {
      const std::vector<Tensor>& outs = (*got)[r];
      REQUIRE(outs.size() == (*want)[0].size());
      for (size_t k = 0; k < outs.size(); ++k) {
        INFO("rank " << r << " output " << k);
        const Tensor& a = outs[k];
        const Tensor& e = (*want)[0][k];
        REQUIRE(a.shape() == e.shape());
        for (int64_t i = 0; i < a.num_elements(); ++i) {
          REQUIRE(a.data<float>()[i] == e.data<float>()[i]);
        }
      }
    }
  }
  // Slice's rows 1..2 on axis 0: the unsharded run's shape is the one the axes pick.
  inputs["axes"] = AxesI64({1}, {0});
  auto rows = tpc::testing::RunRanks({original->get()}, inputs);
  REQUIRE(rows.ok());
  CHECK((*rows)[0][0].shape() == std::vector<int64_t>{2, 16});
  CHECK((*rows)[0][4].shape() == std::vector<int64_t>{7, 16});
  CHECK(result.decisions > 0);
}

// Dims known only at run time have no size for the cost model: a rank-6 value of such
// dims is not refused as too large (it was, priced at 512 per dim).
TEST_CASE("Values of dims known only at run time are not refused as too large",
          "[runtime][shard]") {
  ir::Graph g;
  g.opsets()[""] = 18;
  std::vector<float> w(8 * 16, 0.5f);
  ir::Value* x = g.AddPlaceholder("x", TensorType(DType::kF32, {4, 8}));
  ir::Value* axes = g.AddPlaceholder("axes", TensorType(DType::kI64, {4}));
  ir::Value* weight = g.AddConstant("w", ir::Tensor::FromFloat({8, 16}, w));
  ir::Value* h = g.AddCall("", "MatMul", {x, weight}, {"h"}, {}, "/h")->output(0);
  ir::Value* y = g.AddCall("", "Unsqueeze", {h, axes}, {"y"}, {}, "/y")->output(0);
  g.SetOutputs({y});
  REQUIRE(onnx::InferShapes(g).ok());
  REQUIRE(y->type().rank() == 6);
  auto r = shard::ShardGraph(g, tpc::testing::TpOptions(2));
  INFO(r.status().ToString());
  CHECK(r.ok());
}

}  // namespace
}  // namespace tpc::runtime
