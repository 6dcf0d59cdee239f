// The shard stage's answer is optimal under its cost model: on hundreds of random
// small DAGs of supported ops (at most 12 decisions), the variable-elimination solver
// finds the same cost as exhaustive search over every combination of placements and
// strategies. And the pass is deterministic: two imports of one model shard to
// byte-identical IR text.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/ir/printer.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/shard/min_sum.h"
#include "tpc/shard/shard_pass.h"

namespace {

using tpc::ir::DType;
using tpc::ir::Graph;
using tpc::ir::Tensor;
using tpc::ir::TensorType;
using tpc::ir::Value;

// Builds a random DAG of transformer-ish ops on static dims.
class RandomGraph {
 public:
  explicit RandomGraph(std::mt19937& rng) : rng_(rng) {
    graph_ = std::make_unique<Graph>();
    graph_->opsets()[""] = 20;
    b_ = Pick({2, 4});
    s_ = Pick({4, 8});
    h_ = Pick({8, 16});
    x_ = graph_->AddPlaceholder("x", TensorType(DType::kF32, {b_, s_, h_}));
    pool_.push_back(x_);
  }

  // Adds `ops` random calls (each typed by shape inference as it is added).
  void Grow(int ops) {
    for (int k = 0; k < ops; ++k) AddRandomOp();
    // Outputs: the last value, sometimes one more.
    std::vector<Value*> outs = {pool_.back()};
    if (pool_.size() > 2 && Coin(0.4)) {
      Value* other = pool_[Index(pool_.size() - 1)];
      if (other != outs[0] && other != x_) outs.push_back(other);
    }
    graph_->SetOutputs(outs);
  }

  Graph& graph() { return *graph_; }
  std::vector<std::string>& ops() { return ops_; }

 private:
  int64_t Pick(std::initializer_list<int64_t> xs) {
    std::vector<int64_t> v(xs);
    return v[Index(v.size())];
  }
  size_t Index(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool Coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::string Fresh(const std::string& base) {
    return graph_->UniqueName(base + std::to_string(counter_++));
  }

  std::vector<int64_t> Shape(const Value* v) const {
    std::vector<int64_t> out;
    for (const auto& d : *v->type().shape) out.push_back(d.value());
    return out;
  }
  Value* Weight(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> data(static_cast<size_t>(n));
    std::normal_distribution<float> normal(0, 1);
    for (float& f : data) f = normal(rng_);
    return graph_->AddConstant(Fresh("w"), Tensor::FromFloat(std::move(shape), data));
  }
  Value* Ints(std::vector<int64_t> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return graph_->AddConstant(Fresh("c"), Tensor::FromInt64({n}, values));
  }
  // A float value of the pool, preferring recent ones.
  Value* Operand() {
    const size_t n = pool_.size();
    return pool_[Coin(0.6) ? n - 1 : Index(n)];
  }
  Value* Call(const std::string& op, std::vector<Value*> inputs, tpc::ir::Attributes attrs = {},
              int outputs = 1) {
    std::vector<std::string> names;
    for (int k = 0; k < outputs; ++k) names.push_back(Fresh(op));
    auto* node =
        graph_->AddCall("", op, std::move(inputs), names, std::move(attrs), Fresh("/" + op));
    auto st = tpc::onnx::InferShapes(*graph_);
    INFO(op << ": " << st.ToString());
    REQUIRE(st.ok());
    for (int k = 0; k < outputs; ++k) pool_.push_back(node->output(k));
    ops_.push_back(op);
    return node->output(0);
  }

  void AddRandomOp() {
    Value* a = Operand();
    const std::vector<int64_t> sa = Shape(a);
    const int64_t last = sa.back();
    switch (Index(14)) {
      case 0:
      case 1: {  // a linear layer (sometimes with a bias)
        Value* y = Call("MatMul", {a, Weight({last, Pick({8, 16})})});
        if (Coin(0.4)) Call("Add", {y, Weight({Shape(y).back()})});
        break;
      }
      case 2: {  // elementwise binary on equal shapes, or with a broadcast constant
        Value* other = nullptr;
        for (Value* v : pool_) {
          if (v != a && Shape(v) == sa && Coin(0.7)) other = v;
        }
        if (other == nullptr) other = Weight({last});
        Call(Coin(0.5) ? "Add" : "Mul", {a, other});
        break;
      }
      case 3:
        Call(Pick({0, 1, 2}) == 0 ? "Relu" : (Coin(0.5) ? "Tanh" : "Gelu"), {a});
        break;
      case 4:
        Call("Softmax", {a}, {{"axis", int64_t{-1}}});
        break;
      case 5: {
        std::vector<int64_t> perm;
        for (int64_t d = static_cast<int64_t>(sa.size()) - 1; d >= 0; --d) perm.push_back(d);
        if (sa.size() == 3) perm = {0, 2, 1};
        Call("Transpose", {a}, {{"perm", perm}});
        break;
      }
      case 6: {  // split the last dim into heads, or merge the last two
        std::vector<int64_t> to = sa;
        if (sa.size() == 3 && last % 2 == 0) {
          to = {sa[0], sa[1], 2, last / 2};
        } else if (sa.size() == 4) {
          to = {sa[0], sa[1], sa[2] * sa[3]};
        }  // else: a reshape to the same shape
        Call("Reshape", {a, Ints(to)});
        break;
      }
      case 7:
        Call("ReduceSum",
             {a, Ints({static_cast<int64_t>(sa.size()) - 1 - static_cast<int64_t>(Index(2))})},
             {{"keepdims", int64_t{1}}});
        break;
      case 8:
        Call("LayerNormalization", {a, Weight({last}), Weight({last})}, {{"axis", int64_t{-1}}});
        break;
      case 9: {  // an embedding lookup
        Value* ids = graph_->AddPlaceholder(Fresh("ids"), TensorType(DType::kI64, {b_, s_}));
        Value* table = Weight({Pick({8, 16, 12}), h_});
        Value* e = Call("Gather", {table, ids});
        if (Coin(0.6)) Call("Add", {e, x_});
        break;
      }
      case 10: {
        Value* b = a;
        for (Value* v : pool_) {
          if (v->type().rank() == a->type().rank() && v != a && Coin(0.5)) b = v;
        }
        std::vector<int64_t> sb = Shape(b);
        sb.back() = last;
        if (sb != sa) b = a;  // Concat needs every other dim equal
        Call("Concat", {a, b}, {{"axis", int64_t{-1}}});
        break;
      }
      case 11:
        if (last % 2 == 0) {
          Call("Split", {a}, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{2}}}, 2);
        } else {
          Call("Relu", {a});
        }
        break;
      case 12: {  // attention scores: a · bᵀ of two projections
        Value* src = x_;
        for (Value* v : pool_) {
          if (Shape(v) == Shape(x_) && Coin(0.5)) src = v;
        }
        Value* q = Call("MatMul", {src, Weight({h_, 8})});
        Value* k = Call("MatMul", {x_, Weight({h_, 8})});
        Value* kt = Call("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
        Call("MatMul", {q, kt});
        break;
      }
      default: {  // an MLP block: up, activation, down
        if (sa.size() != 3) {
          Call("Tanh", {a});
          break;
        }
        Value* up = Call("MatMul", {a, Weight({last, 16})});
        Value* act = Call("Relu", {up});
        Call("MatMul", {act, Weight({16, last})});
        break;
      }
    }
  }

  std::mt19937& rng_;
  std::unique_ptr<Graph> graph_;
  int64_t b_, s_, h_;
  Value* x_;
  std::vector<Value*> pool_;
  std::vector<std::string> ops_;
  int counter_ = 0;
};

}  // namespace

TEST_CASE("optimality: the solver's cost equals exhaustive search on random small graphs",
          "[shard][optimality]") {
  std::mt19937 rng(12345);
  int compared = 0;
  int skipped = 0;
  int nontrivial = 0;  // problems where some weight or value ended up split
  double largest_space = 0;
  for (int draw = 0; draw < 4000 && compared < 400; ++draw) {
    RandomGraph rg(rng);
    rg.Grow(std::uniform_int_distribution<int>(1, 4)(rng));
    tpc::shard::ShardOptions options;
    options.mesh = tpc::shard::Mesh::Tp(std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 4 : 2);
    options.objective = std::uniform_int_distribution<int>(0, 2)(rng) == 0
                            ? tpc::shard::Objective::kTime
                            : tpc::shard::Objective::kMemory;
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      options.profile = tpc::shard::DeviceProfile::Pcie4();
    }
    if (options.objective == tpc::shard::Objective::kTime &&
        std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      options.memory_budget_bytes = 1024;
    }
    options.sequence_parallel = std::uniform_int_distribution<int>(0, 4)(rng) == 0;
    if (std::uniform_int_distribution<int>(0, 4)(rng) == 0) {
      // The data arrives split on the batch dim when that divides.
      const auto& dims = *rg.graph().FindValue("x")->type().shape;
      if (dims[0].value() % options.mesh.tp() == 0) {
        options.input_placements["x"] = tpc::ir::Placement::Shard(0);
      }
    }
    std::string ops;
    for (const auto& op : rg.ops()) ops += op + " ";
    INFO("draw " << draw << ": " << ops << "\n" << tpc::ir::PrintGraph(rg.graph()));
    auto problem = tpc::shard::BuildShardProblem(rg.graph(), options);
    REQUIRE(problem.ok());
    double space = 1;
    for (int v = 0; v < problem->num_variables(); ++v) space *= problem->domain_size(v);
    if (problem->num_variables() > 12 || space > 2e6) {
      ++skipped;
      continue;
    }
    largest_space = std::max(largest_space, space);
    auto solved = tpc::shard::SolveMinSum(*problem);
    REQUIRE(solved.ok());
    const tpc::shard::MinSumSolution brute = tpc::shard::SolveByEnumeration(*problem);
    INFO(problem->num_variables() << " decisions, " << space << " combinations; elimination "
                                  << solved->cost.ToString() << ", enumeration "
                                  << brute.cost.ToString());
    REQUIRE(solved->cost.ApproxEqual(brute.cost));
    REQUIRE(problem->Evaluate(solved->assignment).ApproxEqual(brute.cost));
    // No constraints: a plan always exists (everything replicated).
    REQUIRE_FALSE(brute.cost.is_infinite());
    // The shard pass itself writes a placement on every value, consistent with it.
    auto result = tpc::shard::ShardGraph(rg.graph(), options);
    INFO(result.status().ToString());
    if (!result.ok() && options.memory_budget_bytes) {
      // A budget no plan meets is refused by the pass (the problem above only
      // minimises under it).
      CHECK_THAT(std::string(result.status().message()), Catch::Contains("--memory-budget"));
      ++compared;
      continue;
    }
    REQUIRE(result.ok());
    bool split = false;
    for (tpc::ir::Node* n : rg.graph().nodes()) {
      for (const Value* v : n->outputs()) {
        REQUIRE(v->sharding().has_value());
        split = split || v->sharding()->placements[0].kind != tpc::ir::Placement::Kind::kReplicate;
      }
    }
    nontrivial += split ? 1 : 0;
    ++compared;
  }
  INFO("compared " << compared << ", skipped " << skipped << ", largest " << largest_space);
  CHECK(compared >= 200);
  CHECK(nontrivial >= compared / 3);
  CHECK(largest_space > 1000);
}

TEST_CASE("optimality: sharding is deterministic across separate imports", "[shard][optimality]") {
  for (const char* model : {"gpt2", "llama"}) {
    DYNAMIC_SECTION(model) {
      const std::string path = tpc::testing::SourcePath(std::string("models/") + model + ".onnx");
      std::string text[2];
      for (std::string& t : text) {
        auto graph = tpc::onnx::ImportModel(path);
        REQUIRE(graph.ok());
        tpc::shard::ShardOptions options;
        options.mesh = tpc::shard::Mesh::Tp(4);
        auto result = tpc::shard::ShardGraph(**graph, options);
        REQUIRE(result.ok());
        t = tpc::ir::PrintGraph(**graph);
      }
      CHECK(text[0].size() > 1000);
      CHECK(text[0] == text[1]);
    }
  }
}
