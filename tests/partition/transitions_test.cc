// Placements the solver may choose that the partition stage once could not write, given
// here by hand (a ShardResult of our own) so that each path is taken whatever the cost
// model prefers:
//  - a Slice of a value split in blocks, S(1/2), along another dim: its bounds stay as they
//    are (falcon's grouped QKV at N = 4 stopped tp-compile with "bounds of the split axis
//    unknown"); so do a Split's sizes along another dim (they were divided by N);
//  - S(d) → P(sum) of a dim known only at run time: the zero padding takes its size from
//    the value's shape (it stopped tp-compile with "needs a static, unblocked split dim").
// Each rank's program runs alone on its part of the inputs and must give its part of the
// unsharded outputs. And every conversion the cost model calls possible (TransitionPossible)
// is one the partition stage writes, and it keeps the values.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/exporter.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/runtime/placement_io.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/shard/cost_model.h"

namespace tpc::partition {
namespace {

using ir::DType;
using ir::Placement;
using ir::TensorType;
using runtime::Tensor;

// xb [4, 16] → Slice rows 1..2 → y, and Split in rows [1, 3] → top, rest; x [seq, 8] →
// Neg → nx. Written to `dir`/model.onnx.
std::string WriteTransitionsModel(const std::string& dir) {
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* xb = g.AddPlaceholder("xb", TensorType(DType::kF32, {4, 16}));
  ir::Value* x = g.AddPlaceholder("x", TensorType(DType::kF32, {ir::Dim::Symbol("seq"), 8}));
  auto ints = [&g](const std::string& name, std::vector<int64_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return g.AddConstant(name, ir::Tensor::FromInt64({n}, v));
  };
  ir::Value* y =
      g.AddCall("", "Slice", {xb, ints("starts", {1}), ints("ends", {3}), ints("axes", {0})}, {"y"},
                {}, "slice")
          ->output(0);
  ir::Node* split = g.AddCall("", "Split", {xb, ints("sizes", {1, 3})}, {"top", "rest"},
                              {{"axis", int64_t{0}}}, "split");
  ir::Value* nx = g.AddCall("", "Neg", {x}, {"nx"}, {}, "neg")->output(0);
  g.SetOutputs({y, nx, split->output(0), split->output(1)});
  REQUIRE(onnx::InferShapes(g).ok());
  const std::string path = dir + "/model.onnx";
  const absl::Status s = onnx::ExportModel(g, path);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return path;
}

ir::Node* NodeNamed(ir::Graph& g, const std::string& name) {
  for (ir::Node* n : g.nodes()) {
    if (n->name() == name) return n;
  }
  FAIL("no node " << name);
  return nullptr;
}

ir::Value* ValueNamed(ir::Graph& g, const std::string& name) {
  for (ir::Node* n : g.nodes()) {
    for (ir::Value* v : n->outputs()) {
      if (v->name() == name) return v;
    }
  }
  FAIL("no value " << name);
  return nullptr;
}

// The partitioned `g` (of the model at `path`) written as a plan of `n` ranks and read
// back: each rank's program.
std::vector<std::unique_ptr<ir::Graph>> WriteAndLoad(ir::Graph& g, const std::string& path, int n) {
  const std::string plan_dir = tpc::testing::TempDir("transitions_plan");
  plan::PlanOptions po;
  po.tp = n;
  po.source_model = path;
  auto files = plan::WriteRankFiles(g, plan_dir, po);
  INFO(files.status().ToString());
  REQUIRE(files.ok());
  REQUIRE(plan::WriteManifest(g, *files, plan_dir, po).ok());
  auto ranks = runtime::LoadPlan(plan_dir);
  INFO(ranks.status().ToString());
  REQUIRE(ranks.ok());
  return std::move(*ranks);
}

Tensor Iota(std::vector<int64_t> shape) {
  Tensor t = Tensor::Allocate(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(i + 1);
  return t;
}

TEST_CASE("partition writes a blocked Slice on another dim and a symbolic zero padding",
          "[partition]") {
  const int n = 2;
  const std::string dir = tpc::testing::TempDir("transitions");
  const std::string path = WriteTransitionsModel(dir);
  auto graph = onnx::ImportModel(path);
  INFO(graph.status().ToString());
  REQUIRE(graph.ok());
  ir::Graph& g = **graph;

  const Placement blocked = Placement::Shard(1, 2);
  const Placement rows = Placement::Shard(0);
  const Placement partial = Placement::Partial(ir::ReduceOp::kSum);
  ValueNamed(g, "xb")->set_sharding(ir::Sharding{{blocked}});
  ValueNamed(g, "x")->set_sharding(ir::Sharding{{rows}});
  ValueNamed(g, "y")->set_sharding(ir::Sharding{{blocked}});
  ValueNamed(g, "nx")->set_sharding(ir::Sharding{{partial}});
  shard::ShardResult result;
  shard::Strategy slice;
  slice.inputs = {blocked, std::nullopt, std::nullopt, std::nullopt};
  slice.outputs = {blocked};
  result.strategies[NodeNamed(g, "slice")] = slice;
  shard::Strategy neg;
  neg.inputs = {partial};
  neg.outputs = {partial};
  result.strategies[NodeNamed(g, "neg")] = neg;
  shard::Strategy split;
  split.inputs = {blocked, std::nullopt};
  split.outputs = {blocked, blocked};
  result.strategies[NodeNamed(g, "split")] = split;
  for (const char* part : {"top", "rest"}) {
    ValueNamed(g, part)->set_sharding(ir::Sharding{{blocked}});
    result.output_placements[part] = blocked;
  }
  result.output_placements["y"] = blocked;
  result.output_placements["nx"] = partial;
  const shard::ShardOptions options = tpc::testing::TpOptions(n);
  auto stats = PartitionGraph(g, result, options);
  INFO(stats.status().ToString());
  REQUIRE(stats.ok());
  CHECK(stats->collectives == 0);
  const std::vector<std::unique_ptr<ir::Graph>> ranks = WriteAndLoad(g, path, n);

  const int64_t seq = 6;
  const Tensor xb = Iota({4, 16});
  const Tensor x = Iota({seq, 8});
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    std::map<std::string, Tensor> inputs;
    inputs["xb"] = *runtime::SliceForRank("xb", xb, blocked, r, n);
    inputs["x"] = *runtime::SliceForRank("x", x, rows, r, n);
    auto out = tpc::testing::RunRanks({ranks[static_cast<size_t>(r)].get()}, inputs);
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    const Tensor& y = (*out)[0][0];
    const Tensor& nx = (*out)[0][1];
    // y: rows 1 and 2 of this rank's columns of both blocks (4r..4r+3 and 8+4r..8+4r+3).
    REQUIRE(y.shape() == std::vector<int64_t>{2, 8});
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t column = (j / 4) * 8 + r * 4 + j % 4;
        CHECK(y.data<float>()[i * 8 + j] == xb.data<float>()[(i + 1) * 16 + column]);
      }
    }
    // top and rest: rows 0 and 1..3 of the same columns.
    for (int k : {2, 3}) {
      const Tensor& part = (*out)[0][static_cast<size_t>(k)];
      const int64_t first = k == 2 ? 0 : 1, count = k == 2 ? 1 : 3;
      REQUIRE(part.shape() == std::vector<int64_t>{count, 8});
      for (int64_t i = 0; i < count; ++i) {
        for (int64_t j = 0; j < 8; ++j) {
          const int64_t column = (j / 4) * 8 + r * 4 + j % 4;
          CHECK(part.data<float>()[i * 8 + j] == xb.data<float>()[(first + i) * 16 + column]);
        }
      }
    }
    // nx: the whole -x on this rank's rows, zeros elsewhere (its share of the sum).
    REQUIRE(nx.shape() == std::vector<int64_t>{seq, 8});
    for (int64_t i = 0; i < seq; ++i) {
      const bool mine = i / (seq / n) == r;
      for (int64_t j = 0; j < 8; ++j) {
        CHECK(nx.data<float>()[i * 8 + j] == (mine ? -x.data<float>()[i * 8 + j] : 0.0f));
      }
    }
  }
}

// x [seq, 12] → Neg (a) → Neg (b) → output, each Neg given its placement (the import
// drops Identity). Neg of a P(max) value is not max's: the P(max) values here come from R
// as equal copies, which it keeps equal.
std::string WriteChain(const std::string& dir) {
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder("x", TensorType(DType::kF32, {ir::Dim::Symbol("seq"), 12}));
  ir::Value* a = g.AddCall("", "Neg", {x}, {"a"}, {}, "first")->output(0);
  ir::Value* b = g.AddCall("", "Neg", {a}, {"b"}, {}, "second")->output(0);
  g.SetOutputs({b});
  REQUIRE(onnx::InferShapes(g).ok());
  const std::string path = dir + "/chain.onnx";
  REQUIRE(onnx::ExportModel(g, path).ok());
  return path;
}

TEST_CASE("every conversion the cost model allows is written, and keeps the values",
          "[partition]") {
  const int n = 4;
  const std::vector<Placement> all = {Placement::Replicate(),
                                      Placement::Shard(0),
                                      Placement::Shard(1),
                                      Placement::Shard(1, 3),
                                      Placement::Shard(0, 2),
                                      Placement::ShardInGroups(0, 2),
                                      Placement::ShardInGroups(1, 2),
                                      Placement::Partial(ir::ReduceOp::kSum),
                                      Placement::Partial(ir::ReduceOp::kMax)};
  const std::string dir = tpc::testing::TempDir("conversions");
  const std::string path = WriteChain(dir);
  const Tensor x = Iota({16, 12});
  shard::ShardOptions options = tpc::testing::TpOptions(n);
  options.divisible.insert("seq");
  int checked = 0;
  for (const Placement& from : all) {
    for (const Placement& to : all) {
      if (!shard::TransitionPossible(Placement::Replicate(), from) ||
          !shard::TransitionPossible(from, to) ||
          !shard::TransitionPossible(to, Placement::Replicate())) {
        continue;
      }
      INFO(from.ToString() << " -> " << to.ToString());
      auto graph = onnx::ImportModel(path);
      REQUIRE(graph.ok());
      ir::Graph& g = **graph;
      ValueNamed(g, "a")->set_sharding(ir::Sharding{{from}});
      ValueNamed(g, "b")->set_sharding(ir::Sharding{{to}});
      shard::ShardResult result;
      shard::Strategy first, second;
      first.inputs = {from};
      first.outputs = {from};
      second.inputs = {to};
      second.outputs = {to};
      result.strategies[NodeNamed(g, "first")] = first;
      result.strategies[NodeNamed(g, "second")] = second;
      auto stats = PartitionGraph(g, result, options);
      INFO(stats.status().ToString());
      REQUIRE(stats.ok());
      const std::vector<std::unique_ptr<ir::Graph>> ranks = WriteAndLoad(g, path, n);
      std::vector<ir::Graph*> graphs;
      for (const auto& r : ranks) graphs.push_back(r.get());
      auto out = tpc::testing::RunRanks(graphs, {{"x", x}});
      INFO(out.status().ToString());
      REQUIRE(out.ok());
      for (const std::vector<Tensor>& outputs : *out) {
        REQUIRE(outputs[0].shape() == x.shape());
        CHECK(std::equal(x.data<float>(), x.data<float>() + x.num_elements(),
                         outputs[0].data<float>()));
      }
      ++checked;
    }
  }
  CHECK(checked >= 60);
}

}  // namespace
}  // namespace tpc::partition
