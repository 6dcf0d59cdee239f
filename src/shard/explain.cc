// --explain: why a value got its placement, with the alternatives and their costs.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "problem_builder.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/suggest.h"

namespace tpc::shard {
namespace internal {
// The rewrites ShardGraph makes before solving (canonicalize.h), one line each; they
// are idempotent, so explaining first and compiling after gives the same plan.
std::vector<std::string> RewriteBeforeSolving(ir::Graph& graph, const ShardOptions& options,
                                              const Constraints& constraints);
ShardOptions WithBlockCounts(const ir::Graph& graph, const ShardOptions& options);
}  // namespace internal

namespace {

std::string CostText(const ShardOptions& options, const Cost& c) {
  if (c.is_infinite()) return "impossible";
  if (options.objective == Objective::kTime) {
    return absl::StrCat("step ", c.v[0] * 1e-6, " us, weights ", c.v[1], " B/rank, ", c.v[2],
                        " collectives");
  }
  if (options.objective == Objective::kBalanced) {
    std::string out =
        absl::StrCat("weights ", c.v[3], " B/rank",
                     c.v[3] > options.slack_budget_bytes * (1 + 1e-12)
                         ? absl::StrCat(" (over the slack's ", options.slack_budget_bytes, ")")
                         : "",
                     ", step ", c.v[4] * 1e-6, " us (compute + ", c.v[2], " collectives)");
    if (options.sequence_parallel) {
      absl::StrAppend(&out, ", ", c.v[1], " values off sequence shards");
    }
    return out;
  }
  std::string out = absl::StrCat("matrix weights ", c.v[0], " B/rank, collectives ", c.v[1] * 1e-6,
                                 " us (", c.v[3], ")");
  if (options.sequence_parallel) absl::StrAppend(&out, ", ", c.v[2], " values off sequence shards");
  absl::StrAppend(&out, ", vectors ", c.v[4], " B/rank");
  return out;
}

// Why no plan takes choice `c` of decision `d` (which produces `v`): a constraint on
// `v`, or on an input the choice's strategy needs in another placement.
std::string ImpossibleWhy(const internal::Decision& d, int c, const ir::Value& v,
                          const Constraints& constraints) {
  auto excluded = [&](const ir::Value* value, const ir::Placement& p) -> std::string {
    auto it = constraints.allowed.find(value);
    if (it == constraints.allowed.end()) return "";
    const auto& allowed = it->second.placements;
    if (std::find(allowed.begin(), allowed.end(), p) != allowed.end()) return "";
    std::vector<std::string> names;
    for (const ir::Placement& a : allowed) names.push_back(a.ToString());
    return absl::StrCat(it->second.origin, " allows '", value->name(), "' only ",
                        absl::StrJoin(names, " or "));
  };
  const ir::Placement produced = d.OutputPlacement(c, v.index());
  if (std::string why = excluded(&v, produced); !why.empty()) return why;
  if (d.kind == internal::Decision::Kind::kCall) {
    const Strategy& s = d.strategies[static_cast<size_t>(c)];
    auto it = constraints.node_strategies.find(d.node);
    if (it != constraints.node_strategies.end()) {
      return absl::StrCat(it->second.origin, " constrains the strategies of ", d.node->Describe());
    }
    for (size_t i = 0; i < s.inputs.size() && i < d.node->inputs().size(); ++i) {
      if (!s.inputs[i] || d.node->input(static_cast<int>(i)) == nullptr) continue;
      const ir::Value* in = d.node->input(static_cast<int>(i));
      // A constant is not converted: it is held in the placement the constraint says.
      if (in->producer()->kind() != ir::NodeKind::kConstant) continue;
      if (std::string why = excluded(in, *s.inputs[i]); !why.empty()) {
        return absl::StrCat("it needs input ", i, " as ", s.inputs[i]->ToString(), ", but ", why);
      }
    }
  }
  return constraints.allowed.empty() && constraints.node_strategies.empty() &&
                 constraints.groups.empty()
             ? "no plan can take it"
             : "no plan takes it under the constraints (--styles, --input-placement, "
               "--output-placement)";
}

// Who reads `v` and in which placement each takes it under the chosen plan (a
// placement other than the produced one is a conversion: a collective or a local slice).
std::string ConsumersText(const ir::Value& v, const internal::ProblemBuilder& b,
                          const MinSumSolution& best,
                          const std::vector<const ir::Node*>& fallback) {
  constexpr size_t kMost = 8;
  const ir::Placement produced = b.PlacementOf(&v, best.assignment);
  std::string out;
  size_t shown = 0;
  for (const ir::Use& use : v.uses()) {
    if (shown == kMost) {
      absl::StrAppend(&out, "  ... and ", v.uses().size() - kMost, " more consumers\n");
      break;
    }
    ++shown;
    const ir::Node* user = use.user;
    if (user->kind() == ir::NodeKind::kOutput) {
      absl::StrAppend(&out, "  used by the graph output\n");
      continue;
    }
    std::string takes;
    if (auto var = b.VarOf(user)) {
      const internal::Decision& d = b.decisions()[static_cast<size_t>(*var)];
      const Strategy& s =
          d.strategies[static_cast<size_t>(best.assignment[static_cast<size_t>(*var)])];
      const auto& in = s.inputs[static_cast<size_t>(use.index)];
      takes =
          !in ? "reads only its shape"
              : absl::StrCat(
                    "takes it as ", in->ToString(), " (", s.name, ")",
                    *in == produced ? "" : absl::StrCat(", converted from ", produced.ToString()));
    } else if (std::find(fallback.begin(), fallback.end(), user) != fallback.end()) {
      takes = "has no sharding rule: takes it whole (R)";
    } else {
      takes = "computes on replicated values: takes it whole (R)";
    }
    absl::StrAppend(&out, "  used by ", user->Describe(), " input ", use.index, ": ", takes, "\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ExplainValue(ir::Graph& graph, const ShardOptions& raw_options,
                                         const Constraints& constraints,
                                         const std::string& value_name) {
  // Explain the graph the solver sees: after the rewrites ShardGraph makes.
  const bool existed = graph.FindValue(value_name) != nullptr;
  const std::vector<std::string> rewrites =
      internal::RewriteBeforeSolving(graph, raw_options, constraints);
  const ShardOptions options = internal::WithBlockCounts(graph, raw_options);
  ir::Value* v = graph.FindValue(value_name);
  if (v == nullptr && existed) {
    std::string out = absl::StrCat(value_name, ": not in the plan, rewritten before solving:\n");
    for (const std::string& r : rewrites) absl::StrAppend(&out, "  ", r, "\n");
    return out;
  }
  if (v == nullptr) {
    std::vector<std::string> names;
    for (const ir::Node* n : graph.nodes())
      for (const ir::Value* out : n->outputs()) names.push_back(out->name());
    return absl::NotFoundError(absl::StrCat("--explain: no value named '", value_name, "'",
                                            DidYouMean(value_name, names)));
  }
  TPC_ASSIGN_OR_RETURN(internal::Solved solved,
                       internal::BuildAndSolve(graph, options, constraints));
  const internal::ProblemBuilder& b = *solved.builder;
  const MinSumSolution& best = solved.solution;
  // The objective the plan was found under (the balanced one's price of a weight byte,
  // or the memory objective when the slack bought nothing).
  const ShardOptions& solved_options = solved.options;
  const ir::Node* producer = v->producer();
  std::string out = absl::StrCat(
      v->name(), ": ", v->type().ToString(), " → ", b.PlacementOf(v, best.assignment).ToString(),
      "\n  produced by ",
      producer->is_call() ? producer->Describe() : ir::NodeKindName(producer->kind()), "\n");
  absl::StrAppend(&out, ConsumersText(*v, b, best, b.fallback_ops()));
  // Splits that were never candidates, and why.
  RuleContext ctx(*producer, options);
  if (v->type().shape) {
    for (size_t d = 0; d < v->type().shape->size(); ++d) {
      const ir::Dim& dim = (*v->type().shape)[d];
      if (ctx.Divisible(dim)) continue;
      std::string why;
      if (dim.is_static()) {
        why = absl::StrCat(dim.value(), " is not divisible by ", options.mesh.tp());
      } else {
        // A product (batch*seq) divides when one of its symbols is declared to.
        std::set<std::string> symbols;
        ir::CollectSymbols(dim, &symbols);
        std::vector<std::string> ways;
        for (const std::string& s : symbols) {
          ways.push_back(absl::StrCat("--divisible ", s, " or --dim ", s, "=K"));
        }
        why = symbols.empty()
                  ? absl::StrCat(dim.ToString(), ", a size known only at run time")
                  : absl::StrCat(dim.ToString(), " is symbolic and not declared divisible (",
                                 absl::StrJoin(ways, "; "), ", with K divisible by ",
                                 options.mesh.tp(), ")");
      }
      absl::StrAppend(&out, "  S(", d, ") is not a candidate: dim ", d, " = ", why, "\n");
    }
  }
  if (b.Fixed(v)) {
    absl::StrAppend(&out, "  not a decision: ",
                    producer->kind() == ir::NodeKind::kPlaceholder
                        ? "a graph input, placed by --input-placement (default R)"
                    : producer->kind() == ir::NodeKind::kConstant
                        ? "a constant with no dim that splits (or not a float tensor)"
                        : "computed from replicated values only, so every rank computes it whole",
                    "\n");
    return out;
  }
  const int var = *b.VarOf(producer);
  const internal::Decision& d = b.decisions()[static_cast<size_t>(var)];
  absl::StrAppend(&out, "  alternatives, each with the best plan that takes it (",
                  ObjectiveName(solved_options.objective), " objective",
                  solved_options.objective == Objective::kBalanced
                      ? absl::StrCat(": weights within ", solved_options.slack_budget_bytes,
                                     " B/rank, then the shortest modelled step")
                      : "",
                  "):\n");
  // Each alternative's name; two of one name (two ways of reaching P(sum)) also show the
  // placements they take.
  std::vector<std::string> names;
  for (int c = 0; c < d.size(); ++c) {
    names.push_back(d.kind != internal::Decision::Kind::kCall
                        ? d.placements[static_cast<size_t>(c)].ToString()
                        : absl::StrCat(d.strategies[static_cast<size_t>(c)].name, " → ",
                                       d.OutputPlacement(c, v->index()).ToString()));
  }
  std::set<std::string> twice;
  for (const std::string& n : names) {
    if (std::count(names.begin(), names.end(), n) > 1) twice.insert(n);
  }
  for (int c = 0; c < d.size(); ++c) {
    if (d.kind != internal::Decision::Kind::kCall || !twice.count(names[static_cast<size_t>(c)])) {
      continue;
    }
    std::vector<std::string> ins;
    for (const auto& p : d.strategies[static_cast<size_t>(c)].inputs) {
      ins.push_back(p ? p->ToString() : "_");
    }
    absl::StrAppend(&names[static_cast<size_t>(c)], " (from ", absl::StrJoin(ins, ", "), ")");
  }
  for (int c = 0; c < d.size(); ++c) {
    internal::ProblemBuilder clamped(graph, solved_options, constraints, b.sp_values());
    TPC_RETURN_IF_ERROR(clamped.Build());
    clamped.Clamp(var, c);
    auto sol = SolveMinSum(internal::PricedProblem(clamped, solved_options));
    const std::string& name = names[static_cast<size_t>(c)];
    const bool chosen = best.assignment[static_cast<size_t>(var)] == c;
    std::string cost =
        sol.ok() ? CostText(solved_options, sol->cost) : std::string(sol.status().message());
    if (sol.ok() && sol->cost.is_infinite()) {
      absl::StrAppend(&cost, ": ", ImpossibleWhy(d, c, *v, constraints));
    }
    absl::StrAppend(&out, chosen ? "  * " : "    ", name, ": ", cost, "\n");
  }
  return out;
}

}  // namespace tpc::shard
