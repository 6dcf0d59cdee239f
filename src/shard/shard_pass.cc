#include "tpc/shard/shard_pass.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  if (options.mesh.tp() > 1) SplitFusedProjections(graph, constraints, &rewrites);
  // At N = 1 too: a tied LM head's transposed copy (or Transpose at run time) costs one
  // rank as much as many.
  UseTransposedWeights(graph, constraints, &rewrites);
  if (options.mesh.tp() > 1) PadVocabularies(graph, options.mesh.tp(), constraints, &rewrites);
  return rewrites;
}

// Block counts worth trying: the equal parts of ops that cut or join float values
// (Split, Concat), and the relative sizes of unequal ones (Split).
ShardOptions WithBlockCounts(const ir::Graph& graph, const ShardOptions& options) {
  ShardOptions out = options;
  for (ir::Node* n : graph.nodes()) {
    if (!n->is_call()) continue;
    const OpRecord* record = FindOpRecord(n->domain(), n->op_type());
    if (record == nullptr || !ir::IsFloating(n->output(0)->type().dtype)) continue;
    if (record->hooks.block_count != nullptr) {
      const int64_t k = record->hooks.block_count(*n);
      if (k >= 2) out.block_counts.insert(k);
    }
    if (record->hooks.block_weights != nullptr) {
      const std::vector<int64_t> sizes = record->hooks.block_weights(*n);
      const ir::Placement p = ir::Placement::ShardInWeightedBlocks(0, sizes);
      if (p.has_weighted_blocks()) out.block_weights.insert(p.block_weights);
    }
    if (record->hooks.group_counts != nullptr) {
      for (int64_t g : record->hooks.group_counts(*n, options.mesh.tp())) {
        if (g > 1 && g < options.mesh.tp() && options.mesh.tp() % g == 0) {
          out.group_counts.insert(g);
        }
      }
    }
    if (record->hooks.folded_blocks != nullptr) {
      for (const ir::Dim& d : record->hooks.folded_blocks(*n)) {
        auto& seen = out.symbolic_block_counts;
        if (std::find(seen.begin(), seen.end(), d) == seen.end()) seen.push_back(d);
      }
    }
  }
  if (out.sequence_parallel) out.divisible.insert(out.seq_symbol);
  return out;
}

absl::StatusOr<MinSumSolution> Solve(const MinSumProblem& problem) {
  auto exact = SolveMinSum(problem);
  if (!exact.ok() && exact.status().code() == absl::StatusCode::kResourceExhausted) {
    // Too entangled for an exact answer here: fix the most connected decisions first.
    int fixed = 0;
    TPC_ASSIGN_OR_RETURN(MinSumSolution sol, SolveMinSumFixingHubs(problem, &fixed));
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
absl::StatusOr<Solved> SolveUnderBudget(const ir::Graph& graph, const ShardOptions& options,
                                        const Constraints& constraints) {
  const double budget = static_cast<double>(*options.memory_budget_bytes);
  auto solve = [&](double price) -> absl::StatusOr<Solved> {
    ShardOptions priced = options;
    priced.weight_price_ps_per_byte = price;
    auto b = std::make_unique<ProblemBuilder>(graph, priced, constraints);
    TPC_RETURN_IF_ERROR(b->Build());
    TPC_ASSIGN_OR_RETURN(MinSumSolution s, Solve(b->problem()));
    return Solved{std::move(b), std::move(s), priced, std::nullopt};
  };
  double lo = 0;
  double hi = 1e-6;
  std::optional<Solved> best;
  for (int i = 0; i < 80 && !best; ++i, hi *= 4) {
    TPC_ASSIGN_OR_RETURN(Solved s, solve(hi));
    if (s.solution.cost.v[1] <= budget)
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
    TPC_ASSIGN_OR_RETURN(Solved s, solve(mid));
    if (s.solution.cost.v[1] <= budget) {
      hi = mid;
      best = std::move(s);
    } else {
      lo = mid;
    }
  }
  // Report the plan's true step time (without the price of its bytes).
  TPC_ASSIGN_OR_RETURN(Solved plain, solve(0));
  best->solution.cost.v[0] = plain.builder->problem().Evaluate(best->solution.assignment).v[0];
  return std::move(*best);
}

// The memory or time objective, with the sequence-parallel second round when asked.
absl::StatusOr<Solved> SolveStrict(const ir::Graph& graph, const ShardOptions& options,
                                   const Constraints& constraints) {
  auto builder = std::make_unique<ProblemBuilder>(graph, options, constraints);
  TPC_RETURN_IF_ERROR(builder->Build());
  TPC_ASSIGN_OR_RETURN(MinSumSolution sol, Solve(builder->problem()));
  if (options.objective == Objective::kTime && options.memory_budget_bytes &&
      sol.cost.v[1] > static_cast<double>(*options.memory_budget_bytes)) {
    return SolveUnderBudget(graph, options, constraints);
  }
  if (options.sequence_parallel && options.objective == Objective::kMemory) {
    auto sp = SequenceParallelValues(graph, *builder, sol);
    builder = std::make_unique<ProblemBuilder>(graph, options, constraints, std::move(sp));
    TPC_RETURN_IF_ERROR(builder->Build());
    TPC_ASSIGN_OR_RETURN(sol, Solve(builder->problem()));
  }
  return Solved{std::move(builder), std::move(sol), options, std::nullopt};
}

// The balanced objective: per-rank weight bytes at most (1 + slack) times the memory
// objective's plan, then the least modelled step time: collectives, and the compute a
// replicated op repeats on every rank (counting collectives alone, a small model's
// row-parallel projections would be replicated to turn their all-reduce into an
// all-gather, which a real model pays for in compute). A Lagrangian search: weight bytes
// get a price in picoseconds of step time, and the plan that fits at the lowest price
// (where it minimises time + price · bytes) is kept, found by solving where the cost
// lines of a fitting and an over-budget plan cross. The problem is built once per
// sequence-parallel round and only its costs change with the price. The search starts
// from the memory objective's plan and only replaces it by faster plans that fit, so it
// never returns one with a longer modelled step.
absl::StatusOr<Solved> SolveBalanced(const ir::Graph& graph, const ShardOptions& options,
                                     const Constraints& constraints) {
  ShardOptions memory_options = options;
  memory_options.objective = Objective::kMemory;
  TPC_ASSIGN_OR_RETURN(Solved memory, SolveStrict(graph, memory_options, constraints));
  // The memory layout: [matrix bytes, collective ps, sp misses, collectives, vector bytes].
  const Cost& mc = memory.solution.cost;
  SlackTrade trade;
  trade.slack = options.weight_slack;
  trade.memory_plan_bytes = mc.v[0] + mc.v[4];
  trade.budget_bytes = trade.memory_plan_bytes * (1 + options.weight_slack);
  memory.slack = trade;
  // No slack, or nothing to buy: a plan with no collectives and no weights.
  if (options.weight_slack <= 0 || mc.v[1] <= 0 || trade.memory_plan_bytes <= 0) return memory;

  // The balanced layout: [ps + price · bytes, sp misses, collectives, weight bytes, ps],
  // where ps is modelled compute + collective time.
  ShardOptions balanced = options;
  balanced.slack_budget_bytes = trade.budget_bytes;
  auto builder = std::make_unique<ProblemBuilder>(graph, balanced, constraints);
  TPC_RETURN_IF_ERROR(builder->Build());
  TPC_CHECK(builder->problem().num_variables() == memory.builder->problem().num_variables());
  const double memory_ps = builder->problem().Evaluate(memory.solution.assignment).v[4];
  auto priced = [&balanced](const ProblemBuilder& b, double price) {
    balanced.weight_price_ps_per_byte = price;
    return PricedProblem(b, balanced);
  };
  const double budget = trade.budget_bytes * (1 + 1e-12);
  auto fits = [budget](const MinSumSolution& s) { return s.cost.v[3] <= budget; };

  // Two plans bracket the answer: `fit` within the budget (the memory objective's to
  // start) and `over` beyond it (the fastest plan, at price 0). Their priced costs are
  // lines in the price; solve where the lines cross. A plan below both replaces the one
  // on its side of the budget; none below means `fit` is optimal from that price up (a
  // breakpoint of the lower envelope), so it is the fitting plan of the lowest price.
  // Each step finds a new plan, so this ends, in a few solves.
  struct Plan {
    std::vector<int> assignment;
    double ps = 0;
    double bytes = 0;
  };
  const MinSumProblem& unpriced = builder->problem();  // v[0]: modelled ps alone
  auto plan_of = [&unpriced](std::vector<int> assignment) {
    const Cost c = unpriced.Evaluate(assignment);
    return Plan{std::move(assignment), c.v[4], c.v[3]};
  };
  Plan fit = plan_of(memory.solution.assignment);
  TPC_ASSIGN_OR_RETURN(MinSumSolution fastest, Solve(priced(*builder, 0)));
  std::optional<Plan> over;
  if (fits(fastest)) {
    fit = plan_of(fastest.assignment);
  } else {
    over = plan_of(fastest.assignment);
  }
  double price = 0;
  int64_t largest_table = fastest.largest_table;
  for (int i = 0; over && i < 64 && over->bytes > fit.bytes && fit.ps > over->ps; ++i) {
    price = (fit.ps - over->ps) / (over->bytes - fit.bytes);
    const MinSumProblem at = priced(*builder, price);
    TPC_ASSIGN_OR_RETURN(MinSumSolution s, Solve(at));
    largest_table = std::max(largest_table, s.largest_table);
    const double lines =
        std::min(at.Evaluate(fit.assignment).v[0], at.Evaluate(over->assignment).v[0]);
    if (!(s.cost.v[0] < lines)) break;
    if (fits(s)) {
      fit = plan_of(std::move(s.assignment));
    } else {
      over = plan_of(std::move(s.assignment));
    }
  }
  // Just above the crossing `fit` is strictly cheaper than `over`: the price the
  // sequence-parallel round and --explain use.
  const double hi = price * (1 + 1e-6);
  MinSumSolution best;
  best.assignment = fit.assignment;
  best.cost = priced(*builder, hi).Evaluate(fit.assignment);
  best.largest_table = largest_table;
  if (!(best.cost.v[4] < memory_ps)) return memory;  // the slack bought nothing

  if (options.sequence_parallel) {
    auto sp = SequenceParallelValues(graph, *builder, best);
    auto sp_builder = std::make_unique<ProblemBuilder>(graph, balanced, constraints, std::move(sp));
    TPC_RETURN_IF_ERROR(sp_builder->Build());
    TPC_ASSIGN_OR_RETURN(MinSumSolution s, Solve(priced(*sp_builder, hi)));
    if (!fits(s) || !(s.cost.v[4] < memory_ps)) return memory;
    builder = std::move(sp_builder);
    best = std::move(s);
  }
  trade.weight_bytes_added = best.cost.v[3] - trade.memory_plan_bytes;
  trade.time_us_saved = (memory_ps - best.cost.v[4]) * 1e-6;
  trade.collectives_saved = static_cast<int>(mc.v[3] - best.cost.v[2]);
  trade.price_ps_per_byte = hi;
  balanced.weight_price_ps_per_byte = hi;
  return Solved{std::move(builder), std::move(best), balanced, trade};
}

MinSumProblem PricedProblem(const ProblemBuilder& builder, const ShardOptions& options) {
  MinSumProblem p = builder.problem();
  if (options.objective != Objective::kBalanced) return p;
  const double price = options.weight_price_ps_per_byte;
  p.MapCosts([price](const Cost& c) {
    if (c.is_infinite()) return c;
    Cost out = c;
    out.v[0] = c.v[4] + std::round(price * c.v[3]);
    return out;
  });
  return p;
}

absl::StatusOr<Solved> BuildAndSolve(const ir::Graph& graph, const ShardOptions& options,
                                     const Constraints& constraints) {
  if (options.objective == Objective::kBalanced && options.mesh.tp() > 1) {
    return SolveBalanced(graph, options, constraints);
  }
  ShardOptions strict = options;
  if (strict.objective == Objective::kBalanced) strict.objective = Objective::kMemory;
  return SolveStrict(graph, strict, constraints);
}

}  // namespace internal

namespace {

// Every value at the dim sizes the options give (--dim, else the defaults) holds at most
// kMaxTensorElements: a plan for sizes no tensor can have is refused before solving.
absl::Status CheckValueSizes(const ir::Graph& graph, const ShardOptions& options) {
  for (ir::Node* node : graph.nodes()) {
    for (const ir::Value* v : node->outputs()) {
      // A dim known only at run time (a Squeeze of axes from an input) counts as 1: the
      // cost model's default size for it says nothing about the tensor.
      if (!v->type().shape) continue;
      const RuleContext ctx(*node, options);
      double elements = 1;
      for (const ir::Dim& d : *v->type().shape) elements *= d.is_unknown() ? 1.0 : ctx.Size(d);
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
      r.weight_bytes_per_rank +=
          bytes / static_cast<double>(b.PlacementOf(node->output(0), a).Parts(n));
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

namespace internal {

absl::Status ExplainInfeasible(const ir::Graph& graph, const ShardOptions& options,
                               const Constraints& constraints, const absl::Status& failure) {
  if (failure.code() != absl::StatusCode::kInvalidArgument ||
      !absl::StrContains(failure.message(), "no placement satisfies")) {
    return failure;
  }
  // The constraints by where they were written (a styles line), each tried away in turn:
  // an origin without which a plan exists is one to name. (The error path only: a solve
  // per origin, up to 32.)
  std::vector<std::string> origins;
  auto note = [&](const std::string& o) {
    if (!o.empty() && std::find(origins.begin(), origins.end(), o) == origins.end()) {
      origins.push_back(o);
    }
  };
  for (const auto& [v, a] : constraints.allowed) note(a.origin);
  for (const auto& [n, a] : constraints.node_strategies) note(a.origin);
  if (origins.empty() || origins.size() > 32) return failure;
  std::vector<std::string> culprits;
  // At most half a minute more on a large model: the error stands without the names.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const std::string& origin : origins) {
    if (std::chrono::steady_clock::now() > deadline) break;
    Constraints without = constraints;
    std::erase_if(without.allowed, [&](const auto& e) { return e.second.origin == origin; });
    std::erase_if(without.node_strategies,
                  [&](const auto& e) { return e.second.origin == origin; });
    if (BuildAndSolve(graph, options, without).ok()) culprits.push_back(origin);
  }
  if (culprits.empty()) return failure;
  return absl::InvalidArgumentError(absl::StrCat(
      "no placement satisfies every constraint together; without ", absl::StrJoin(culprits, " or "),
      " one does: no strategy of the operators around the values ",
      culprits.size() == 1 ? "it places" : "they place", " takes them so"));
}

}  // namespace internal

absl::StatusOr<ShardResult> ShardGraph(ir::Graph& graph, const ShardOptions& raw_options,
                                       const Constraints& constraints) {
  std::vector<std::string> rewrites =
      internal::RewriteBeforeSolving(graph, raw_options, constraints);
  const ShardOptions options = internal::WithBlockCounts(graph, raw_options);
  TPC_RETURN_IF_ERROR(CheckValueSizes(graph, options));
  absl::StatusOr<internal::Solved> attempt = internal::BuildAndSolve(graph, options, constraints);
  if (!attempt.ok())
    return internal::ExplainInfeasible(graph, options, constraints, attempt.status());
  internal::Solved solved = std::move(*attempt);
  ShardResult result = Collect(graph, *solved.builder, options, solved.solution);
  result.rewrites = std::move(rewrites);
  result.slack = solved.slack;
  if (solved.solution.fixed_hubs > 0) {
    result.optimal = false;
    result.note =
        absl::StrCat("the problem was too entangled to solve exactly: ", solved.solution.fixed_hubs,
                     " of the most connected decisions were fixed to their cheapest own "
                     "choice first");
  } else if (solved.options.objective == Objective::kBalanced) {
    result.optimal = false;
    result.note = absl::StrCat(
        "the weight slack was met by pricing weight bytes (Lagrangian relaxation, ",
        solved.options.weight_price_ps_per_byte,
        " ps/byte): the plan fits, one with a shorter modelled step that fits may exist");
  }
  if (options.objective == Objective::kTime && options.memory_budget_bytes &&
      solved.builder->problem().num_variables() > 0 && options.weight_price_ps_per_byte == 0) {
    // Whether the budget bound: compare with the unconstrained fastest plan.
    ProblemBuilder free_builder(graph, options, constraints);
    TPC_RETURN_IF_ERROR(free_builder.Build());
    TPC_ASSIGN_OR_RETURN(MinSumSolution fastest, internal::Solve(free_builder.problem()));
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
