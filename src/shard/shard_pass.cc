#include "tpc/shard/shard_pass.h"

#include "absl/strings/str_cat.h"
#include "problem_builder.h"
#include "tpc/shard/canonicalize.h"
#include "tpc/shard/op_record.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/status_macros.h"

namespace tpc::shard {

using internal::Decision;
using internal::ProblemBuilder;
using ir::Placement;

namespace internal {

std::vector<std::string> RewriteBeforeSolving(ir::Graph& graph, const ShardOptions& options,
                                              const Constraints& constraints) {
  std::vector<std::string> rewrites;
  if (options.mesh.tp() > 1) {
    SplitFusedProjections(graph, constraints, &rewrites);
    UseTransposedWeights(graph, constraints, &rewrites);
    PadVocabularies(graph, options.mesh.tp(), constraints, &rewrites);
  }
  return rewrites;
}

// Block counts worth trying: the equal parts of ops that cut or join float values
// (Split, Concat).
ShardOptions WithBlockCounts(const ir::Graph& graph, const ShardOptions& options) {
  ShardOptions out = options;
  for (ir::Node* n : graph.nodes()) {
    if (!n->is_call()) continue;
    const OpRecord* record = FindOpRecord(n->domain(), n->op_type());
    if (record == nullptr || record->hooks.block_count == nullptr) continue;
    const int64_t k = record->hooks.block_count(*n);
    if (k >= 2 && ir::IsFloating(n->output(0)->type().dtype)) out.block_counts.insert(k);
  }
  if (out.sequence_parallel) out.divisible.insert(out.seq_symbol);
  return out;
}

absl::StatusOr<MinSumSolution> Solve(const ProblemBuilder& b) {
  auto exact = SolveMinSum(b.problem());
  if (!exact.ok() && exact.status().code() == absl::StatusCode::kResourceExhausted) {
    // Too entangled for an exact answer here: fix the most connected decisions first.
    int fixed = 0;
    TPC_ASSIGN_OR_RETURN(MinSumSolution sol, SolveMinSumFixingHubs(b.problem(), &fixed));
    sol.fixed_hubs = fixed;
    exact = std::move(sol);
  }
  TPC_ASSIGN_OR_RETURN(MinSumSolution sol, std::move(exact));
  if (sol.cost.is_infinite()) {
    return absl::InvalidArgumentError(
        "no placement satisfies every constraint together (each holds alone; check sharding "
        "groups against styles and input/output placements)");
  }
  return sol;
}

// Sequence parallelism keeps in sequence shards every activation that tensor
// parallelism alone leaves replicated (the values between blocks: residual stream,
// norms, elementwise ops): float call outputs with a seq dim, placed R by `first`.
std::set<const ir::Value*> SequenceParallelValues(const ir::Graph& graph, const ProblemBuilder& b,
                                                  const MinSumSolution& first) {
  std::set<const ir::Value*> out;
  for (ir::Node* n : graph.nodes()) {
    if (!n->is_call() || !b.VarOf(n)) continue;
    for (const ir::Value* v : n->outputs()) {
      if (!ir::IsFloating(v->type().dtype) || b.SeqDim(*v) < 0) continue;
      if (b.PlacementOf(v, first.assignment).kind == Placement::Kind::kReplicate) out.insert(v);
    }
  }
  return out;
}

// --objective time --memory-budget B when the fastest plan holds more than B weight
// bytes per rank: weight bytes get a price in step time, raised (doubling, then
// bisection) until the plan fits. Each price's plan is optimal for time + price·bytes;
// the cheapest that fits is kept.
absl::StatusOr<std::pair<std::unique_ptr<ProblemBuilder>, MinSumSolution>> SolveUnderBudget(
    const ir::Graph& graph, const ShardOptions& options, const Constraints& constraints) {
  const double budget = static_cast<double>(*options.memory_budget_bytes);
  auto solve = [&](double price)
      -> absl::StatusOr<std::pair<std::unique_ptr<ProblemBuilder>, MinSumSolution>> {
    ShardOptions priced = options;
    priced.weight_price_ps_per_byte = price;
    auto b = std::make_unique<ProblemBuilder>(graph, priced, constraints);
    TPC_RETURN_IF_ERROR(b->Build());
    TPC_ASSIGN_OR_RETURN(MinSumSolution s, Solve(*b));
    return std::make_pair(std::move(b), std::move(s));
  };
  double lo = 0;
  double hi = 1e-6;
  std::optional<std::pair<std::unique_ptr<ProblemBuilder>, MinSumSolution>> best;
  for (int i = 0; i < 80 && !best; ++i, hi *= 4) {
    TPC_ASSIGN_OR_RETURN(auto s, solve(hi));
    if (s.second.cost.v[1] <= budget)
      best = std::move(s);
    else
      lo = hi;
  }
  if (!best) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory-budget ", budget, " bytes: no plan holds so few weight bytes per rank"));
  }
  for (int i = 0; i < 30; ++i) {
    const double mid = (lo + hi) / 2;
    TPC_ASSIGN_OR_RETURN(auto s, solve(mid));
    if (s.second.cost.v[1] <= budget) {
      hi = mid;
      best = std::move(s);
    } else {
      lo = mid;
    }
  }
  // Report the plan's true step time (without the price of its bytes).
  TPC_ASSIGN_OR_RETURN(auto plain, solve(0));
  best->second.cost.v[0] = plain.first->problem().Evaluate(best->second.assignment).v[0];
  return std::move(*best);
}

// Builds and solves, with the sequence-parallel second round when asked.
absl::StatusOr<std::pair<std::unique_ptr<ProblemBuilder>, MinSumSolution>> BuildAndSolve(
    const ir::Graph& graph, const ShardOptions& options, const Constraints& constraints) {
  auto builder = std::make_unique<ProblemBuilder>(graph, options, constraints);
  TPC_RETURN_IF_ERROR(builder->Build());
  TPC_ASSIGN_OR_RETURN(MinSumSolution sol, Solve(*builder));
  if (options.objective == Objective::kTime && options.memory_budget_bytes &&
      sol.cost.v[1] > static_cast<double>(*options.memory_budget_bytes)) {
    return SolveUnderBudget(graph, options, constraints);
  }
  if (options.sequence_parallel && options.objective == Objective::kMemory) {
    auto sp = SequenceParallelValues(graph, *builder, sol);
    builder = std::make_unique<ProblemBuilder>(graph, options, constraints, std::move(sp));
    TPC_RETURN_IF_ERROR(builder->Build());
    TPC_ASSIGN_OR_RETURN(sol, Solve(*builder));
  }
  return std::make_pair(std::move(builder), std::move(sol));
}

}  // namespace internal

namespace {

// Every value at the dim sizes the options give (--dim, else the defaults) holds at most
// kMaxTensorElements: a plan for sizes no tensor can have is refused before solving.
absl::Status CheckValueSizes(const ir::Graph& graph, const ShardOptions& options) {
  for (ir::Node* node : graph.nodes()) {
    for (const ir::Value* v : node->outputs()) {
      const double size = static_cast<double>(std::max<int64_t>(ir::DTypeSize(v->type().dtype), 1));
      const double elements = RuleContext(*node, options).Bytes(*v) / size;
      if (elements > static_cast<double>(kMaxTensorElements)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value '", v->name(), "' (", v->type().ToString(), ") would hold ", elements,
            " elements at the dim sizes given (--dim NAME=SIZE; ", options.default_dim_size,
            " for a dim not given): more than 2^48, the most one tensor may have"));
      }
    }
  }
  return absl::OkStatus();
}

ShardResult Collect(ir::Graph& graph, const ProblemBuilder& b, const ShardOptions& options,
                    const MinSumSolution& sol) {
  ShardResult r;
  r.cost = sol.cost;
  r.decisions = b.problem().num_variables();
  r.largest_table = sol.largest_table;
  r.fallback_ops = b.fallback_ops();
  const int64_t n = options.mesh.tp();
  const auto& a = sol.assignment;
  auto add = [&](const Placement& from, const Placement& to, const ir::Value* v,
                 const ir::Node* user) {
    if (auto kind = TransitionCollective(from, to)) {
      r.collectives.push_back({*kind, from.reduce, b.Bytes(*v), v, user, from, to, false});
    }
  };
  for (ir::Node* node : graph.nodes()) {
    for (ir::Value* v : node->outputs()) {
      const Placement produced = b.PlacementOf(v, a);
      v->set_sharding(ir::Sharding{{produced}});
      const Placement materialized = b.MaterializedOf(v, a);
      if (!(materialized == produced)) {
        r.materialized[v] = materialized;
        add(produced, materialized, v, nullptr);
      }
    }
    if (node->kind() == ir::NodeKind::kConstant) {
      const double bytes = b.Bytes(*node->output(0));
      r.weight_bytes_total += bytes;
      const bool split = b.PlacementOf(node->output(0), a).kind == Placement::Kind::kShard;
      r.weight_bytes_per_rank += split ? bytes / static_cast<double>(n) : bytes;
    }
    auto var = b.VarOf(node);
    if (!node->is_call() || !var) continue;
    const Strategy& s = b.decisions()[static_cast<size_t>(*var)]
                            .strategies[static_cast<size_t>(a[static_cast<size_t>(*var)])];
    r.strategies[node] = s;
    for (const InternalCollective& ic : s.internal) {
      r.collectives.push_back({ic.kind, ic.reduce, ic.bytes, nullptr, node, Placement::Replicate(),
                               Placement::Replicate(), true});
    }
    for (int i = 0; i < node->num_inputs(); ++i) {
      const ir::Value* in = node->input(i);
      const auto& want = s.inputs[static_cast<size_t>(i)];
      if (in != nullptr && want) add(b.MaterializedOf(in, a), *want, in, node);
    }
  }
  if (ir::Node* out = graph.output_node()) {
    for (const ir::Value* v : out->inputs()) {
      const Placement want = b.OutputWant(v, a);
      r.output_placements[v->name()] = want;
      add(b.MaterializedOf(v, a), want, v, nullptr);
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<ShardResult> ShardGraph(ir::Graph& graph, const ShardOptions& raw_options,
                                       const Constraints& constraints) {
  std::vector<std::string> rewrites =
      internal::RewriteBeforeSolving(graph, raw_options, constraints);
  const ShardOptions options = internal::WithBlockCounts(graph, raw_options);
  TPC_RETURN_IF_ERROR(CheckValueSizes(graph, options));
  TPC_ASSIGN_OR_RETURN(auto solved, internal::BuildAndSolve(graph, options, constraints));
  ShardResult result = Collect(graph, *solved.first, options, solved.second);
  result.rewrites = std::move(rewrites);
  if (solved.second.fixed_hubs > 0) {
    result.optimal = false;
    result.note =
        absl::StrCat("the problem was too entangled to solve exactly: ", solved.second.fixed_hubs,
                     " of the most connected decisions were fixed to their cheapest own "
                     "choice first");
  }
  if (options.objective == Objective::kTime && options.memory_budget_bytes &&
      solved.first->problem().num_variables() > 0 && options.weight_price_ps_per_byte == 0) {
    // Whether the budget bound: compare with the unconstrained fastest plan.
    ProblemBuilder free_builder(graph, options, constraints);
    TPC_RETURN_IF_ERROR(free_builder.Build());
    TPC_ASSIGN_OR_RETURN(MinSumSolution fastest, internal::Solve(free_builder));
    if (fastest.cost.v[1] > static_cast<double>(*options.memory_budget_bytes)) {
      result.optimal = false;
      result.note =
          "the memory budget was met by pricing weight bytes (Lagrangian relaxation): "
          "the plan fits, a faster one that fits may exist";
    }
  }
  return result;
}

absl::StatusOr<MinSumProblem> BuildShardProblem(const ir::Graph& graph,
                                                const ShardOptions& raw_options,
                                                const Constraints& constraints) {
  const ShardOptions options = internal::WithBlockCounts(graph, raw_options);
  ProblemBuilder builder(graph, options, constraints);
  TPC_RETURN_IF_ERROR(builder.Build());
  return builder.problem();
}

}  // namespace tpc::shard
