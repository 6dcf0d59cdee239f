// Index semantics through the vocab-parallel lowerings: every id the unsplit op accepts
// gives the same result sharded (negative embedding ids wrap as Gather's do), and every
// id it refuses gives the same error, naming the same node (tpc::CheckIndices).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

struct Model {
  std::unique_ptr<ir::Graph> unsharded;
  std::vector<std::unique_ptr<ir::Graph>> ranks;
  std::map<std::string, Tensor> inputs;  // test_data_set_0
};

// `name` compiled by tp-compile for `n` ranks, loaded back, with its test inputs.
Model Load(const std::string& name, int n) {
  Model m;
  m.unsharded = tpc::testing::ImportCommitted(name);
  const std::string dir = tpc::testing::TempDir(name + "_ids");
  const std::string model = tpc::testing::SourcePath("models/" + name + ".onnx");
  tpc::testing::CommandResult r = tpc::testing::RunTpCompile(model + " --tp " + std::to_string(n) +
                                                             " --quiet -o " + dir + "/plan");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto ranks = LoadPlan(dir + "/plan");
  INFO(ranks.status().ToString());
  REQUIRE(ranks.ok());
  m.ranks = std::move(*ranks);
  const std::string data = tpc::testing::SourcePath("models/" + name + "/test_data_set_0/");
  for (const char* file : {"input_0.pb", "input_1.pb"}) {
    auto t = ReadTensorProtoFile(data + file);
    if (t.ok()) m.inputs[t->name] = t->tensor;
  }
  REQUIRE(!m.inputs.empty());
  return m;
}

// Rank 0's outputs (every rank's are checked equal elsewhere), or the error.
absl::StatusOr<std::vector<Tensor>> Run(const std::vector<ir::Graph*>& graphs,
                                        const std::map<std::string, Tensor>& inputs) {
  auto out = tpc::testing::RunRanks(graphs, inputs);
  if (!out.ok()) return out.status();
  return (*out)[0];
}

std::vector<ir::Graph*> Ptrs(const std::vector<std::unique_ptr<ir::Graph>>& graphs) {
  std::vector<ir::Graph*> out;
  for (const auto& g : graphs) out.push_back(g.get());
  return out;
}

// A copy of the i64 tensor `t` whose first elements are `ids`.
Tensor WithIds(const Tensor& t, const std::vector<int64_t>& ids) {
  Tensor out = Tensor::Allocate(t.dtype(), t.shape());
  REQUIRE(t.dtype() == ir::DType::kI64);
  REQUIRE(t.num_elements() >= static_cast<int64_t>(ids.size()));
  std::copy(t.data<int64_t>(), t.data<int64_t>() + t.num_elements(), out.data<int64_t>());
  std::copy(ids.begin(), ids.end(), out.data<int64_t>());
  return out;
}

}  // namespace

TEST_CASE("negative embedding ids wrap as Gather's do, sharded as unsharded", "[runtime][ids]") {
  Model m = Load("gpt2", 2);
  std::map<std::string, Tensor> inputs = m.inputs;
  const int64_t vocab = 512;  // gpt2.onnx: wte is [512, 64]
  inputs["input_ids"] = WithIds(inputs["input_ids"], {-1, -vocab, 5, -7});
  auto want = Run({m.unsharded.get()}, inputs);
  auto got = Run(Ptrs(m.ranks), inputs);
  INFO(want.status().ToString() << " / " << got.status().ToString());
  REQUIRE(want.ok());
  REQUIRE(got.ok());
  REQUIRE(want->size() == got->size());
  const Tensor& a = (*want)[0];
  const Tensor& b = (*got)[0];
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    worst = std::max(worst, std::abs(double{a.data<float>()[i]} - double{b.data<float>()[i]}));
  }
  CHECK(worst <= 1e-4);
}

TEST_CASE("out-of-range ids fail sharded with the unsharded error", "[runtime][ids]") {
  struct Case {
    const char* model;
    const char* input;
    int64_t id;
  };
  for (const Case& c : {Case{"gpt2", "input_ids", 512}, Case{"gpt2", "input_ids", -513},
                        Case{"gpt2_loss", "labels", 600}, Case{"gpt2_loss", "labels", -5}}) {
    INFO(c.model << " " << c.input << " = " << c.id);
    Model m = Load(c.model, 2);
    std::map<std::string, Tensor> inputs = m.inputs;
    // Every element (gpt2_loss shifts its labels: the first one is never read).
    const Tensor& t = inputs[c.input];
    inputs[c.input] = WithIds(t, std::vector<int64_t>(static_cast<size_t>(t.num_elements()), c.id));
    auto want = Run({m.unsharded.get()}, inputs);
    auto got = Run(Ptrs(m.ranks), inputs);
    REQUIRE_FALSE(want.ok());
    REQUIRE_FALSE(got.ok());
    // The unsharded message, from the node it names on, is in the sharded one.
    std::string message(want.status().message());
    REQUIRE(message.find("node '") != std::string::npos);
    message = message.substr(message.find("node '"));
    CHECK_THAT(std::string(got.status().message()), Catch::Contains(message));
    CHECK_THAT(message, Catch::Contains(std::to_string(c.id)));
  }
}

}  // namespace tpc::runtime
