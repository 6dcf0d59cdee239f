// Numerical equivalence (DESIGN §8): every committed model, compiled in-process for
// N ∈ {1, 2, 4} ranks with and without sequence parallelism (import → shard →
// partition → plan files in a temporary folder), run on its test_data_set_0 inputs by
// the plan runner, equals the same model run unsharded (fp32: rtol 1e-5, atol 1e-5)
// on every rank. The unsharded run against torch's outputs is in executor_test.cc.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/tensor.h"
#include "tpc/runtime/tensor_io.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"

namespace tpc::runtime {
namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-5;

std::string ModelPath(const std::string& model) {
  return tpc::testing::SourcePath("models/" + model + ".onnx");
}

// The test_data_set_0 inputs of `model`, by name.
std::map<std::string, Tensor> TestInputs(const std::string& model) {
  const std::string data = tpc::testing::SourcePath("models/" + model + "/test_data_set_0");
  std::map<std::string, Tensor> inputs;
  for (int k = 0; std::filesystem::exists(data + "/input_" + std::to_string(k) + ".pb"); ++k) {
    auto t = ReadTensorProtoFile(data + "/input_" + std::to_string(k) + ".pb");
    if (!t.ok()) FAIL(t.status().ToString());
    inputs[t->name] = t->tensor;
  }
  REQUIRE(!inputs.empty());
  return inputs;
}

struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<Tensor>> per_rank;  // [rank][output]
};

// Runs `graphs` (one per rank) on `inputs`; the outputs of every rank, by name.
absl::StatusOr<Outputs> RunRanks(const std::vector<ir::Graph*>& graphs,
                                 const std::map<std::string, Tensor>& inputs) {
  auto out = tpc::testing::RunRanks(graphs, inputs);
  if (!out.ok()) return out.status();
  Outputs result;
  for (const ir::Value* v : graphs[0]->outputs()) result.names.push_back(v->name());
  result.per_rank = *std::move(out);
  return result;
}

double Element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case ir::DType::kF32:
      return t.data<float>()[i];
    case ir::DType::kF64:
      return t.data<double>()[i];
    case ir::DType::kI64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case ir::DType::kI32:
      return t.data<int32_t>()[i];
    case ir::DType::kBool:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    default: {
      Tensor one(t.dtype(), {1}, t.raw() + i * ir::DTypeSize(t.dtype()));
      return ConvertFloats(one, ir::DType::kF32).data<float>()[0];
    }
  }
}

// "" when `actual` equals `expected` within tolerance (numpy.allclose), else why not.
std::string Compare(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  std::ostringstream why;
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    why << "type " << actual.TypeString() << ", expected " << expected.TypeString();
    return why.str();
  }
  double max_abs = 0, max_rel = 0;
  int64_t bad = 0, first_bad = -1, nan_mismatch = 0;
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    const double a = Element(actual, i), e = Element(expected, i);
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e)) ++nan_mismatch;
      continue;
    }
    const double err = std::abs(a - e);
    max_abs = std::max(max_abs, err);
    if (std::abs(e) > atol) max_rel = std::max(max_rel, err / std::abs(e));
    if (err > atol + rtol * std::abs(e)) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  if (bad == 0 && nan_mismatch == 0) return "";
  why << actual.TypeString() << ": max abs err " << max_abs << ", max rel err " << max_rel << ", "
      << bad << " of " << actual.num_elements() << " elements above tolerance";
  if (first_bad >= 0) {
    why << " (first: element " << first_bad << " = " << Element(actual, first_bad) << ", expected "
        << Element(expected, first_bad) << ")";
  }
  if (nan_mismatch > 0) why << ", " << nan_mismatch << " NaN mismatches";
  return why.str();
}

struct Compiled {
  std::string dir;
  partition::PartitionStats stats;
  int64_t weight_bytes_per_rank = 0;
  std::vector<std::unique_ptr<ir::Graph>> ranks;  // the plan as the runtime loads it
  int weights_in_groups = 0;                      // constants placed S(d@g)
};

// tp-compile in-process: import → shard → partition → rank files + manifest.
// `weight_slack`: the balanced objective's (default: the default objective).
absl::StatusOr<Compiled> Compile(const std::string& model, int64_t n, bool sp,
                                 std::optional<double> weight_slack = std::nullopt) {
  Compiled c;
  auto graph = onnx::ImportModel(ModelPath(model));
  if (!graph.ok()) return graph.status();
  shard::ShardOptions options;
  options.mesh = shard::Mesh::Tp(n);
  options.sequence_parallel = sp;
  if (weight_slack) {
    options.objective = shard::Objective::kBalanced;
    options.weight_slack = *weight_slack;
  }
  auto sharded = shard::ShardGraph(**graph, options);
  if (!sharded.ok()) return sharded.status();
  auto stats = partition::PartitionGraph(**graph, *sharded, options);
  if (!stats.ok()) return stats.status();
  c.stats = *stats;
  if (auto s = ir::VerifyGraph(**graph); !s.ok()) return s;
  for (const ir::Node* node : (*graph)->nodes()) {
    if (node->kind() != ir::NodeKind::kConstant) continue;
    const ir::Value* v = node->output(0);
    c.weights_in_groups += v->sharding() && v->sharding()->placements[0].has_groups();
  }
  c.dir = tpc::testing::TempDir(model + "_tp" + std::to_string(n) + (sp ? "_sp" : ""));
  plan::PlanOptions po;
  po.tp = n;
  po.source_model = ModelPath(model);
  auto files = plan::WriteRankFiles(**graph, c.dir, po);
  if (!files.ok()) return files.status();
  c.weight_bytes_per_rank = files->at(0).weight_bytes;
  if (auto s = plan::WriteManifest(**graph, *files, c.dir, po); !s.ok()) return s;
  auto ranks = LoadPlan(c.dir);
  if (!ranks.ok()) return ranks.status();
  c.ranks = *std::move(ranks);
  return c;
}

// Compiles `model` for every N and SP, runs each plan and compares every rank's outputs
// with the unsharded run. One failure message per bad combination / output. With
// `kv_groups`: at N=4 and a 25% weight slack, the 2 K/V heads of each of the 2 layers
// must sit on their groups of 2 ranks (K and V weights S(1@2)).
void CheckModel(const std::string& model, bool kv_groups = false) {
  const std::map<std::string, Tensor> inputs = TestInputs(model);
  auto original = onnx::ImportModel(ModelPath(model));
  if (!original.ok()) FAIL(model << ": import failed: " << original.status().ToString());
  auto reference = RunRanks({original->get()}, inputs);
  if (!reference.ok()) FAIL(model << " unsharded: run failed: " << reference.status().ToString());
  const std::vector<Tensor>& want = reference->per_rank[0];

  int64_t unsharded_weight_bytes = 0;
  for (int64_t n : kv_groups ? std::vector<int64_t>{4} : std::vector<int64_t>{1, 2, 4}) {
    for (bool sp : {false, true}) {
      std::ostringstream label;
      label << model << " N=" << n << " SP=" << (sp ? "on" : "off");
      auto compiled =
          kv_groups ? Compile(model, n, sp, /*weight_slack=*/0.25) : Compile(model, n, sp);
      if (!compiled.ok()) {
        FAIL_CHECK(label.str() << ": compile failed: " << compiled.status().ToString());
        continue;
      }
      if (static_cast<int64_t>(compiled->ranks.size()) != n) {
        FAIL_CHECK(label.str() << ": the plan has " << compiled->ranks.size() << " ranks");
        continue;
      }
      if (kv_groups) {
        CHECK(compiled->weights_in_groups == 4);
      } else if (n == 1) {
        // For N > 1 the plan must really be split: less weight per rank than unsharded.
        unsharded_weight_bytes = compiled->weight_bytes_per_rank;
      } else if (compiled->weight_bytes_per_rank >= unsharded_weight_bytes) {
        FAIL_CHECK(label.str() << ": " << compiled->weight_bytes_per_rank
                               << " weight bytes per rank, unsharded " << unsharded_weight_bytes);
      }
      std::vector<ir::Graph*> ptrs;
      for (const auto& g : compiled->ranks) ptrs.push_back(g.get());
      auto got = RunRanks(ptrs, inputs);
      if (!got.ok()) {
        FAIL_CHECK(label.str() << ": run failed: " << got.status().ToString());
        continue;
      }
      if (got->names != reference->names) {
        FAIL_CHECK(label.str() << ": outputs differ in names or number from the original's");
        continue;
      }
      bool all = true;
      for (int64_t r = 0; r < n; ++r) {
        const std::vector<Tensor>& outs = got->per_rank[static_cast<size_t>(r)];
        for (size_t k = 0; k < want.size(); ++k) {
          const std::string why = Compare(outs[k], want[k], kRtol, kAtol);
          if (!why.empty()) {
            all = false;
            FAIL_CHECK(label.str()
                       << " rank " << r << " output '" << got->names[k] << "': " << why);
          }
        }
      }
      CHECK(all);
    }
  }
}

TEST_CASE("sharded == unsharded: mlp", "[equivalence]") { CheckModel("mlp"); }
TEST_CASE("sharded == unsharded: mlp_dynamo", "[equivalence]") { CheckModel("mlp_dynamo"); }
TEST_CASE("sharded == unsharded: gpt2", "[equivalence]") { CheckModel("gpt2"); }
TEST_CASE("sharded == unsharded: gpt2_dynamo", "[equivalence]") { CheckModel("gpt2_dynamo"); }
TEST_CASE("sharded == unsharded: gpt2_loss", "[equivalence]") { CheckModel("gpt2_loss"); }
TEST_CASE("sharded == unsharded: llama", "[equivalence]") { CheckModel("llama"); }
TEST_CASE("sharded == unsharded: mistral", "[equivalence]") { CheckModel("mistral"); }
TEST_CASE("sharded == unsharded: bert", "[equivalence]") { CheckModel("bert"); }
TEST_CASE("sharded == unsharded: phi3", "[equivalence]") { CheckModel("phi3"); }
TEST_CASE("sharded == unsharded: phi3_dynamo", "[equivalence]") { CheckModel("phi3_dynamo"); }
TEST_CASE("sharded == unsharded: phi3_gqa", "[equivalence]") { CheckModel("phi3_gqa"); }
TEST_CASE("sharded == unsharded: phi3_gqa_dynamo", "[equivalence]") {
  CheckModel("phi3_gqa_dynamo");
}
TEST_CASE("sharded == unsharded: vit", "[equivalence]") { CheckModel("vit"); }
// Fewer K/V heads than ranks: each K/V head on its group of ranks, as Megatron does.
TEST_CASE("sharded == unsharded: K/V heads on groups of ranks", "[equivalence]") {
  for (const char* model : {"llama", "mistral", "phi3_gqa", "phi3_gqa_dynamo"}) {
    DYNAMIC_SECTION(model) { CheckModel(model, /*kv_groups=*/true); }
  }
}
TEST_CASE("sharded == unsharded: vit_dynamo", "[equivalence]") { CheckModel("vit_dynamo"); }

// The loss model's plan for N > 1 really is vocab-parallel: the loss op is lowered
// (no SoftmaxCrossEntropyLoss left in what rank 0 runs, tpc AllReduce ops instead), and
// its loss equals the unsharded loss.
TEST_CASE("gpt2_loss: the vocab-parallel loss equals the unsharded loss", "[equivalence]") {
  const std::map<std::string, Tensor> inputs = TestInputs("gpt2_loss");
  auto original = onnx::ImportModel(ModelPath("gpt2_loss"));
  REQUIRE(original.ok());
  int original_losses = 0;
  for (const ir::Node* node : (*original)->nodes()) {
    original_losses += node->is_call() && node->op_type() == "SoftmaxCrossEntropyLoss" ? 1 : 0;
  }
  REQUIRE(original_losses == 1);
  auto reference = RunRanks({original->get()}, inputs);
  INFO(reference.status().ToString());
  REQUIRE(reference.ok());
  REQUIRE(reference->names == std::vector<std::string>{"loss"});
  const Tensor& want = reference->per_rank[0][0];
  REQUIRE(want.num_elements() == 1);

  for (int64_t n : {2, 4}) {
    for (bool sp : {false, true}) {
      INFO("gpt2_loss N=" << n << " SP=" << (sp ? "on" : "off"));
      auto compiled = Compile("gpt2_loss", n, sp);
      INFO(compiled.status().ToString());
      REQUIRE(compiled.ok());
      CHECK(compiled->stats.lowered_ops > 0);
      int losses = 0, all_reduces = 0;
      for (const ir::Node* node : compiled->ranks[0]->nodes()) {
        if (!node->is_call()) continue;
        losses += node->op_type() == "SoftmaxCrossEntropyLoss" ? 1 : 0;
        all_reduces += node->domain() == "tpc" && node->op_type() == "AllReduce" ? 1 : 0;
      }
      CHECK(losses == 0);
      CHECK(all_reduces > 0);

      std::vector<ir::Graph*> ptrs;
      for (const auto& g : compiled->ranks) ptrs.push_back(g.get());
      auto got = RunRanks(ptrs, inputs);
      INFO(got.status().ToString());
      REQUIRE(got.ok());
      for (int64_t r = 0; r < n; ++r) {
        const Tensor& loss = got->per_rank[static_cast<size_t>(r)][0];
        INFO("rank " << r << ": loss " << Element(loss, 0) << ", unsharded " << Element(want, 0));
        CHECK(Compare(loss, want, kRtol, kAtol).empty());
      }
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
