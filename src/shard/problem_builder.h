// Internal to the shard stage: turns a graph, its options and constraints into a
// min-sum problem, and reads placements back from a solution.
//
// Variables: one per weight that can split (its placement), one per op that touches a
// weight or a split value (its strategy), and one per value with several consumers
// (the form it is materialized in once, so that two consumers needing the same
// gathered value pay for one collective). Costs, compared lexicographically:
//   memory:   [matrix weight bytes, collective ps, sequence-parallel misses, collectives,
//              vector bytes]
//   balanced: [compute + collective ps + price * weight bytes, sequence-parallel misses,
//              collectives, weight bytes, compute + collective ps]
//   time:     [compute + collective ps (+ price * weight bytes), weight bytes, collectives,
//              sequence-parallel misses, 0]
// Sequence parallelism thus only ever takes plans that move no more bytes (a
// reduce-scatter + all-gather instead of an all-reduce), and between equal plans the one
// with fewer collectives wins.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "tpc/ir/graph.h"
#include "tpc/shard/min_sum.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/shard/strategy.h"

namespace tpc::shard::internal {

// One decision: a weight's placement, a cache input's placement, a call's strategy, or
// the materialized form of a value with several consumers.
struct Decision {
  enum class Kind { kConstant, kInput, kCall, kMaterialize };
  Kind kind = Kind::kCall;
  const ir::Node* node = nullptr;         // constant or call
  const ir::Value* value = nullptr;       // materialize
  std::vector<ir::Placement> placements;  // constants, materialize: the candidates
  std::vector<Strategy> strategies;       // calls: the candidates
  int size() const {
    return static_cast<int>(kind == Kind::kCall ? strategies.size() : placements.size());
  }
  const ir::Placement& OutputPlacement(int choice, int output) const {
    return kind == Kind::kCall
               ? strategies[static_cast<size_t>(choice)].outputs[static_cast<size_t>(output)]
               : placements[static_cast<size_t>(choice)];
  }
};

class ProblemBuilder {
 public:
  // `sp_values`: values sequence parallelism wants in sequence shards (each one not
  // split on its seq dim costs one unit of the objective's second component).
  ProblemBuilder(const ir::Graph& graph, const ShardOptions& options,
                 const Constraints& constraints, std::set<const ir::Value*> sp_values = {});

  absl::Status Build();
  // Forces a decision (explain).
  void Clamp(int var, int choice);

  const MinSumProblem& problem() const { return problem_; }
  const ShardOptions& options() const { return options_; }
  const std::vector<Decision>& decisions() const { return decisions_; }
  const std::vector<const ir::Node*>& fallback_ops() const { return fallback_; }
  const std::set<const ir::Value*>& sp_values() const { return sp_values_; }
  std::optional<int> VarOf(const ir::Node* n) const;
  std::optional<ir::Placement> Fixed(const ir::Value* v) const;
  // The materialize decision of a value with several consumers, if any.
  std::optional<int> MaterializeVar(const ir::Value* v) const;

  // The placement the producer gives `v` under `assignment`.
  ir::Placement PlacementOf(const ir::Value* v, const std::vector<int>& assignment) const;
  // The placement `v` is materialized in for its consumers (its own placement when it
  // has one consumer).
  ir::Placement MaterializedOf(const ir::Value* v, const std::vector<int>& assignment) const;
  double Bytes(const ir::Value& v) const;
  // The value's dim carrying the sequence symbol, or -1.
  int64_t SeqDim(const ir::Value& v) const;
  // The placement graph output `v` is delivered in: its cache input's placement for the
  // `present` half of a KV-cache pair, else --output-placement's, else R.
  ir::Placement OutputWant(const ir::Value* v, const std::vector<int>& assignment) const;

 private:
  absl::Status Classify();
  void FindCachePairs();
  absl::Status AddPlaceholder(const ir::Node* node);
  void AddConstant(const ir::Node* node);
  void AddCall(const ir::Node* node);
  void AddCallCosts(int var);
  void AddEdges();
  void AddEdge(int from, const ir::Value* v);
  absl::Status CheckSplit(const ir::Value& v, const ir::Placement& p,
                          const std::string& origin) const;
  absl::Status ApplyConstraints();
  absl::Status Tie(const ir::Value* a, const ir::Value* b, bool transposed);
  std::vector<ir::Placement> Candidates(const ir::Value* v) const;
  // Uses of `v` that carry a cost: decisions and graph outputs.
  size_t Consumers(const ir::Value* v) const;
  // Where each kind of cost goes in the lexicographic Cost (see the file comment).
  struct Slots {
    int weights;    // matrix weight bytes per rank
    int time;       // collective picoseconds
    int sp_misses;  // sequence-parallel values not in sequence shards
    int count;      // number of collectives
    int vectors;    // vector weight bytes per rank
    int compute;    // compute picoseconds (-1: not modelled)
    int priced;     // collective ps + priced weight bytes (-1: no such slot)
  };
  Slots slots() const;
  Cost Collective(double picos) const;
  Cost Transition(const ir::Placement& from, const ir::Placement& to, double bytes,
                  bool stationary) const;
  Cost WeightCost(double bytes, bool matrix) const;
  double Flops(const ir::Node& node) const;
  int NewVar(Decision d);
  int64_t n() const { return options_.mesh.tp(); }

  const ir::Graph& graph_;
  // Owned: a builder outlives the options of the solve that made it (SolveUnderBudget's
  // priced copies), and the solution is read through it afterwards.
  const ShardOptions options_;
  const Constraints& constraints_;
  std::set<const ir::Value*> sp_values_;
  // KV-cache pairs: a graph input (past) concatenated into a graph output (present) along
  // one axis. The input's placement is a decision, and the output is delivered in it.
  absl::flat_hash_map<const ir::Value*, const ir::Value*> cache_output_to_input_;
  absl::flat_hash_map<const ir::Value*, int64_t> cache_input_axis_;
  MinSumProblem problem_;
  std::vector<Decision> decisions_;
  absl::flat_hash_map<const ir::Node*, int> var_of_;
  absl::flat_hash_map<const ir::Value*, int> materialize_of_;
  absl::flat_hash_map<const ir::Value*, ir::Placement> fixed_;
  // Weights and values computed from weights alone: they never move between ranks.
  absl::flat_hash_set<const ir::Value*> stationary_;
  // Values that depend on a graph input (data, not weights).
  absl::flat_hash_set<const ir::Value*> depends_on_inputs_;
  std::vector<const ir::Node*> fallback_;
};

// A solved problem: the builder to read placements through, the solution, the options
// it was found under (with the balanced objective's price of a weight byte), and what
// the weight slack bought.
struct Solved {
  std::unique_ptr<ProblemBuilder> builder;
  MinSumSolution solution;
  ShardOptions options;
  std::optional<SlackTrade> slack;
};

// The objective's plan (shard_pass.cc): the memory or time objective, or the balanced
// objective's search; each with the sequence-parallel round when asked.
absl::StatusOr<Solved> BuildAndSolve(const ir::Graph& graph, const ShardOptions& options,
                                     const Constraints& constraints);

// `failure` of BuildAndSolve, explained when it is an infeasible set of constraints: the
// origins (styles lines) without which a plan exists are named (shard_pass.cc).
absl::Status ExplainInfeasible(const ir::Graph& graph, const ShardOptions& options,
                               const Constraints& constraints, const absl::Status& failure);

// The builder's problem at `options.weight_price_ps_per_byte` under the balanced objective
// (the first component becomes collective ps + price · weight bytes); a copy otherwise.
MinSumProblem PricedProblem(const ProblemBuilder& builder, const ShardOptions& options);

}  // namespace tpc::shard::internal
