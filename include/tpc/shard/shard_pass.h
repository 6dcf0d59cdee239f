// The shard stage: decides a placement for every value of the graph.
//
// Values split into fixed ones (graph inputs at their given placement, small
// constants, anything computed only from replicated values: shape computations,
// masks) and decisions (weights, and every op that touches a weight or a split value,
// through its strategies). The decisions and their costs form a min-sum problem
// (min_sum.h) solved exactly; the answer is written into each value's sharding slot.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/shard/min_sum.h"
#include "tpc/shard/options.h"
#include "tpc/shard/strategy.h"

namespace tpc::shard {

// Restrictions from the user (styles file, --input/--output-placement aside).
struct Constraints {
  struct Allowed {
    std::vector<ir::Placement> placements;
    std::string origin;  // "styles.txt:3" — named in errors
  };
  // Placements a value may take.
  std::map<const ir::Value*, Allowed> allowed;
  // Strategy names a node may run (`colwise` on a node: "split n (column)").
  std::map<const ir::Node*, Allowed> node_strategies;
  // Values that must share one placement (merged transitively).
  std::vector<std::vector<const ir::Value*>> groups;
};

// One collective of the forward pass, as the chosen placements imply it.
struct PlannedCollective {
  CollectiveKind kind;
  ir::ReduceOp reduce = ir::ReduceOp::kSum;
  double bytes = 0;                  // whole-tensor bytes at the --dim sizes
  const ir::Value* value = nullptr;  // the value moved (null for a strategy's own)
  const ir::Node* user = nullptr;    // the consumer (null: graph output)
  ir::Placement from, to;
  bool internal = false;  // run inside an op (vocab-parallel softmax or loss)
};

// What the balanced objective's weight slack bought, against the memory objective's
// plan (the plan of least per-rank weight bytes, then least collective time).
struct SlackTrade {
  double slack = 0;               // the fraction allowed (--weight-slack)
  double memory_plan_bytes = 0;   // per-rank weight bytes of the memory objective's plan
  double budget_bytes = 0;        // memory_plan_bytes * (1 + slack)
  double weight_bytes_added = 0;  // per rank, over the memory objective's plan
  double time_us_saved = 0;       // modelled step time (compute + collectives) per forward
  int collectives_saved = 0;      // collectives per forward
  double price_ps_per_byte = 0;   // the price of a weight byte that found the plan
};

struct ShardResult {
  // The strategy each call runs. Calls on replicated values only are absent (they
  // run replicated).
  absl::flat_hash_map<const ir::Node*, Strategy> strategies;
  // Ops with no sharding rule that touch values which may be split; they run
  // replicated (inputs gathered first). Ops on replicated values only are not listed.
  std::vector<const ir::Node*> fallback_ops;
  std::vector<PlannedCollective> collectives;
  // Values with several consumers that are converted once, to this placement, before
  // their consumers take what they need from it (absent: consumers convert from the
  // produced placement).
  absl::flat_hash_map<const ir::Value*, ir::Placement> materialized;
  // The placement each graph output is delivered in (--output-placement's, a KV cache's
  // chosen placement, else R), by output name.
  std::map<std::string, ir::Placement> output_placements;
  // The rewrites made before solving (canonicalize.h), one line each.
  std::vector<std::string> rewrites;
  // Balanced objective: what the weight slack bought (zeros when it bought nothing).
  std::optional<SlackTrade> slack;
  Cost cost;
  // False when the memory budget was met by pricing weight bytes (a Lagrangian
  // relaxation): the plan fits the budget but a faster one may exist; `note` says so.
  bool optimal = true;
  std::string note;
  int decisions = 0;
  int64_t largest_table = 0;
  // Per-rank bytes of all constants, and their total unsharded.
  double weight_bytes_per_rank = 0;
  double weight_bytes_total = 0;
};

// Decides and writes every value's sharding. Errors: a constraint that cannot hold
// (naming its origin), an input placement on a dim that does not split.
absl::StatusOr<ShardResult> ShardGraph(ir::Graph& graph, const ShardOptions& options,
                                       const Constraints& constraints = {});

// The optimisation problem ShardGraph solves, and the decision each value's producer
// maps to (tests compare SolveMinSum against exhaustive search on it).
absl::StatusOr<MinSumProblem> BuildShardProblem(const ir::Graph& graph, const ShardOptions& options,
                                                const Constraints& constraints = {});

// Why `value_name` got its placement: the rule and strategy, the alternatives with
// their total costs, and the splits that were not candidates and why. Runs the solver
// once per alternative.
absl::StatusOr<std::string> ExplainValue(ir::Graph& graph, const ShardOptions& options,
                                         const Constraints& constraints,
                                         const std::string& value_name);

}  // namespace tpc::shard
