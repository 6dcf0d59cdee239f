#include "tpc/shard/shard_pass.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tpc/util/status_macros.h"

namespace tpc::shard {
namespace {

using ir::Placement;

// One decision: a weight's placement or a call's strategy.
struct Decision {
  const ir::Node* node = nullptr;
  bool is_constant = false;
  std::vector<Placement> placements;  // constants: the candidates
  std::vector<Strategy> strategies;   // calls: the candidates
  int size() const {
    return static_cast<int>(is_constant ? placements.size() : strategies.size());
  }
  const Placement& OutputPlacement(int choice, int output) const {
    return is_constant ? placements[static_cast<size_t>(choice)]
                       : strategies[static_cast<size_t>(choice)].outputs[static_cast<size_t>(output)];
  }
};

class Builder {
 public:
  Builder(ir::Graph& graph, const ShardOptions& options, const Constraints& constraints)
      : graph_(graph), options_(options), constraints_(constraints) {}

  absl::Status Build() {
    for (ir::Node* n : graph_.nodes()) {
      switch (n->kind()) {
        case ir::NodeKind::kPlaceholder: TPC_RETURN_IF_ERROR(AddPlaceholder(n)); break;
        case ir::NodeKind::kConstant: AddConstant(n); break;
        case ir::NodeKind::kCall: AddCall(n); break;
        case ir::NodeKind::kOutput: AddOutputs(n); break;
      }
    }
    return ApplyConstraints();
  }

  // Extra unary factors (explain clamps a decision).
  void Clamp(int var, int choice) {
    std::vector<Cost> costs(static_cast<size_t>(decisions_[static_cast<size_t>(var)].size()),
                            Cost::Infinite());
    costs[static_cast<size_t>(choice)] = Cost::Zero();
    problem_.AddUnary(var, std::move(costs));
  }

  const MinSumProblem& problem() const { return problem_; }
  const std::vector<Decision>& decisions() const { return decisions_; }
  std::optional<int> VarOf(const ir::Node* n) const {
    auto it = var_of_.find(n);
    return it == var_of_.end() ? std::nullopt : std::optional<int>(it->second);
  }
  std::optional<Placement> Fixed(const ir::Value* v) const {
    auto it = fixed_.find(v);
    return it == fixed_.end() ? std::nullopt : std::optional<Placement>(it->second);
  }
  const std::vector<const ir::Node*>& fallback_ops() const { return fallback_; }

  Placement PlacementOf(const ir::Value* v, const std::vector<int>& a) const {
    if (auto f = Fixed(v)) return *f;
    int var = var_of_.at(v->producer());
    return decisions_[static_cast<size_t>(var)].OutputPlacement(a[static_cast<size_t>(var)], v->index());
  }

  double Bytes(const ir::Value& v) const { return RuleContext(*v.producer(), options_).Bytes(v); }

  Cost Comm(double seconds) const {
    return Cost::Component(options_.objective == Objective::kMemory ? 2 : 0, seconds);
  }
  Cost Transition(const Placement& from, const Placement& to, double bytes) const {
    if (!TransitionPossible(from, to)) return Cost::Infinite();
    return Comm(TransitionSeconds(options_.profile, from, to, options_.mesh.tp(), bytes));
  }

 private:
  int64_t n() const { return options_.mesh.tp(); }

  absl::Status AddPlaceholder(ir::Node* node) {
    const ir::Value* v = node->output(0);
    Placement p = Placement::Replicate();
    auto it = options_.input_placements.find(v->name());
    if (it != options_.input_placements.end()) p = it->second;
    TPC_RETURN_IF_ERROR(CheckSplit(*v, p, absl::StrCat("--input-placement ", v->name())));
    fixed_[v] = p;
    return absl::OkStatus();
  }

  absl::Status CheckSplit(const ir::Value& v, const Placement& p, const std::string& origin) const {
    if (p.kind == Placement::Kind::kPartial) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": a graph input or output cannot be partial"));
    }
    if (p.kind != Placement::Kind::kShard) return absl::OkStatus();
    RuleContext ctx(*v.producer(), options_);
    if (!v.type().has_rank() || p.dim >= v.type().rank() || p.dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", v.name(), " of type ",
                                                     v.type().ToString(), " has no dim ", p.dim));
    }
    const ir::Dim& d = (*v.type().shape)[static_cast<size_t>(p.dim)];
    if (!ctx.Divisible(d)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": dim ", p.dim, " of ", v.name(), " (",
                                                     d.ToString(), ") does not split into ", n(),
                                                     " equal parts"));
    }
    return absl::OkStatus();
  }

  void AddConstant(ir::Node* node) {
    const ir::Value* v = node->output(0);
    const ir::TensorType& t = v->type();
    Decision d;
    d.node = node;
    d.is_constant = true;
    d.placements.push_back(Placement::Replicate());
    if (ir::IsFloating(t.dtype) && t.rank() >= 1 && n() > 1) {
      RuleContext ctx(*node, options_);
      for (int64_t dim = 0; dim < t.rank(); ++dim) {
        const ir::Dim& size = (*t.shape)[static_cast<size_t>(dim)];
        if (ctx.Divisible(size)) d.placements.push_back(Placement::Shard(dim));
        for (int64_t blocks : options_.block_counts) {
          if (ctx.DivisibleInBlocks(size, blocks)) d.placements.push_back(Placement::Shard(dim, blocks));
        }
      }
    }
    if (d.placements.size() == 1) {
      fixed_[v] = Placement::Replicate();
      return;
    }
    const int var = NewVar(std::move(d));
    // Weight bytes: matrices first; vectors (biases, norm scales) only after
    // collective time, so that splitting one never pays for a collective.
    const double bytes = Bytes(*v);
    const bool matrix = t.rank() >= 2;
    std::vector<Cost> costs;
    for (const Placement& p : decisions_[static_cast<size_t>(var)].placements) {
      const double per_rank = p.kind == Placement::Kind::kShard ? bytes / static_cast<double>(n()) : bytes;
      costs.push_back(WeightCost(per_rank, matrix));
    }
    problem_.AddUnary(var, std::move(costs));
  }

  Cost WeightCost(double bytes, bool matrix) const {
    if (options_.objective == Objective::kTime) return Cost::Component(1, bytes);
    return Cost::Component(matrix ? 0 : 3, bytes);
  }

  void AddCall(ir::Node* node) {
    bool all_replicated = true;
    for (const ir::Value* in : node->inputs()) {
      if (in == nullptr) continue;
      auto f = Fixed(in);
      if (!f || f->kind != Placement::Kind::kReplicate) all_replicated = false;
    }
    bool has_rule = false;
    std::vector<Strategy> strategies = StrategiesFor(*node, options_, &has_rule);
    if (!has_rule) fallback_.push_back(node);
    if (all_replicated) {
      // Computed from replicated values only (shape computations, masks): every rank
      // computes it whole.
      for (const ir::Value* o : node->outputs()) fixed_[o] = Placement::Replicate();
      return;
    }
    Decision d;
    d.node = node;
    d.strategies = std::move(strategies);
    const int var = NewVar(std::move(d));
    const Decision& dec = decisions_[static_cast<size_t>(var)];

    // The strategy's own cost: its collectives, compute, activation memory.
    std::vector<Cost> own;
    const double flops = Flops(*node);
    for (const Strategy& s : dec.strategies) {
      Cost c;
      for (const InternalCollective& ic : s.internal) {
        c += Comm(CollectiveSeconds(options_.profile, ic.kind, n(), ic.bytes));
      }
      if (options_.objective == Objective::kTime) {
        c += Cost::Component(0, flops * s.compute_fraction / options_.profile.flops_per_s);
      }
      if (options_.sequence_parallel && options_.objective == Objective::kMemory) {
        for (int o = 0; o < node->num_outputs(); ++o) {
          const ir::Value* out = node->output(o);
          if (!ir::IsFloating(out->type().dtype)) continue;
          const double b = Bytes(*out);
          const bool split = s.outputs[static_cast<size_t>(o)].kind == Placement::Kind::kShard;
          c += Cost::Component(1, split ? b / static_cast<double>(n()) : b);
        }
      }
      own.push_back(c);
    }
    problem_.AddUnary(var, std::move(own));

    // Transitions from each input's producer to what the strategy needs.
    for (int i = 0; i < node->num_inputs(); ++i) {
      const ir::Value* in = node->input(i);
      if (in == nullptr) continue;
      const double bytes = Bytes(*in);
      if (auto f = Fixed(in)) {
        std::vector<Cost> costs;
        for (const Strategy& s : dec.strategies) {
          const auto& q = s.inputs[static_cast<size_t>(i)];
          costs.push_back(q ? Transition(*f, *q, bytes) : Cost::Zero());
        }
        problem_.AddUnary(var, std::move(costs));
        continue;
      }
      const int pv = var_of_.at(in->producer());
      const Decision& pd = decisions_[static_cast<size_t>(pv)];
      std::vector<Cost> table;
      table.reserve(static_cast<size_t>(pd.size() * dec.size()));
      for (int a = 0; a < pd.size(); ++a) {
        const Placement& from = pd.OutputPlacement(a, in->index());
        for (const Strategy& s : dec.strategies) {
          const auto& q = s.inputs[static_cast<size_t>(i)];
          if (!q) {
            table.push_back(Cost::Zero());
          } else if (pd.is_constant && TransitionCollective(from, *q)) {
            // Tensor parallelism keeps weights where they are stored: moving a weight
            // every step is what FSDP does, not TP.
            table.push_back(Cost::Infinite());
          } else {
            table.push_back(Transition(from, *q, bytes));
          }
        }
      }
      problem_.AddPairwise(pv, var, std::move(table));
    }
  }

  // Modelled flops: 2·M·N·K for products, one per output element otherwise.
  double Flops(const ir::Node& node) const {
    RuleContext ctx(node, options_);
    double out = 0;
    for (const ir::Value* o : node.outputs()) {
      if (!o->type().shape) continue;
      double e = 1;
      for (const ir::Dim& d : *o->type().shape) e *= ctx.Size(d);
      out += e;
    }
    if ((node.op_type() == "MatMul" || node.op_type() == "Gemm") && node.input(0)->type().shape &&
        !node.input(0)->type().shape->empty()) {
      const auto& a = *node.input(0)->type().shape;
      const bool ta = node.op_type() == "Gemm" && node.attr_int("transA", 0) != 0;
      out *= 2 * ctx.Size(ta ? a.front() : a.back());
    }
    return out;
  }

  void AddOutputs(ir::Node* node) {
    for (const ir::Value* v : node->inputs()) {
      Placement want = Placement::Replicate();
      auto it = options_.output_placements.find(v->name());
      if (it != options_.output_placements.end()) want = it->second;
      if (Fixed(v)) continue;  // replicated already; R → S is a local slice
      const int var = var_of_.at(v->producer());
      const Decision& d = decisions_[static_cast<size_t>(var)];
      std::vector<Cost> costs;
      for (int a = 0; a < d.size(); ++a) costs.push_back(Transition(d.OutputPlacement(a, v->index()), want, Bytes(*v)));
      problem_.AddUnary(var, std::move(costs));
    }
  }

  absl::Status ApplyConstraints() {
    for (const auto& [v, allowed] : constraints_.allowed) {
      auto allowed_has = [&](const Placement& p) {
        return std::find(allowed.placements.begin(), allowed.placements.end(), p) != allowed.placements.end();
      };
      if (auto f = Fixed(v)) {
        if (!allowed_has(*f)) {
          return absl::InvalidArgumentError(absl::StrCat(
              allowed.origin, ": ", v->name(), " cannot be ",
              allowed.placements.empty() ? "?" : allowed.placements[0].ToString(), ": it is ",
              v->producer()->kind() == ir::NodeKind::kPlaceholder ? "a graph input placed "
                                                                   : "computed replicated as ",
              f->ToString()));
        }
        continue;
      }
      const int var = var_of_.at(v->producer());
      const Decision& d = decisions_[static_cast<size_t>(var)];
      std::vector<Cost> costs;
      bool any = false;
      for (int a = 0; a < d.size(); ++a) {
        const bool ok = allowed_has(d.OutputPlacement(a, v->index()));
        any = any || ok;
        costs.push_back(ok ? Cost::Zero() : Cost::Infinite());
      }
      if (!any) {
        std::vector<std::string> options;
        for (int a = 0; a < d.size(); ++a) options.push_back(d.OutputPlacement(a, v->index()).ToString());
        std::sort(options.begin(), options.end());
        options.erase(std::unique(options.begin(), options.end()), options.end());
        return absl::InvalidArgumentError(absl::StrCat(
            allowed.origin, ": ", v->name(), " cannot be ", allowed.placements[0].ToString(),
            " (its candidates are ", absl::StrJoin(options, ", "), ")"));
      }
      problem_.AddUnary(var, std::move(costs));
    }
    for (const auto& group : constraints_.groups) {
      for (size_t k = 1; k < group.size(); ++k) TPC_RETURN_IF_ERROR(Tie(group[0], group[k]));
    }
    return absl::OkStatus();
  }

  // Forces two values to one placement.
  absl::Status Tie(const ir::Value* a, const ir::Value* b) {
    auto fa = Fixed(a);
    auto fb = Fixed(b);
    if (fa && fb) {
      if (*fa == *fb) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat("sharding group: ", a->name(), " is ", fa->ToString(),
                                                     " but ", b->name(), " is ", fb->ToString()));
    }
    if (fa || fb) {
      const ir::Value* var_value = fa ? b : a;
      const Placement want = fa ? *fa : *fb;
      const int var = var_of_.at(var_value->producer());
      const Decision& d = decisions_[static_cast<size_t>(var)];
      std::vector<Cost> costs;
      for (int c = 0; c < d.size(); ++c) {
        costs.push_back(d.OutputPlacement(c, var_value->index()) == want ? Cost::Zero() : Cost::Infinite());
      }
      problem_.AddUnary(var, std::move(costs));
      return absl::OkStatus();
    }
    const int va = var_of_.at(a->producer());
    const int vb = var_of_.at(b->producer());
    const Decision& da = decisions_[static_cast<size_t>(va)];
    const Decision& db = decisions_[static_cast<size_t>(vb)];
    if (va == vb) {
      std::vector<Cost> costs;
      for (int c = 0; c < da.size(); ++c) {
        costs.push_back(da.OutputPlacement(c, a->index()) == da.OutputPlacement(c, b->index())
                            ? Cost::Zero()
                            : Cost::Infinite());
      }
      problem_.AddUnary(va, std::move(costs));
      return absl::OkStatus();
    }
    std::vector<Cost> table;
    for (int x = 0; x < da.size(); ++x) {
      for (int y = 0; y < db.size(); ++y) {
        table.push_back(da.OutputPlacement(x, a->index()) == db.OutputPlacement(y, b->index())
                            ? Cost::Zero()
                            : Cost::Infinite());
      }
    }
    problem_.AddPairwise(va, vb, std::move(table));
    return absl::OkStatus();
  }

  int NewVar(Decision d) {
    const int var = problem_.AddVariable(d.size());
    var_of_[d.node] = var;
    decisions_.push_back(std::move(d));
    return var;
  }

  ir::Graph& graph_;
  const ShardOptions& options_;
  const Constraints& constraints_;
  MinSumProblem problem_;
  std::vector<Decision> decisions_;
  absl::flat_hash_map<const ir::Node*, int> var_of_;
  absl::flat_hash_map<const ir::Value*, Placement> fixed_;
  std::vector<const ir::Node*> fallback_;
};

ShardResult Collect(ir::Graph& graph, const Builder& b, const ShardOptions& options,
                    const MinSumSolution& sol) {
  ShardResult r;
  r.cost = sol.cost;
  r.decisions = b.problem().num_variables();
  r.largest_table = sol.largest_table;
  r.fallback_ops = b.fallback_ops();
  const int64_t n = options.mesh.tp();
  for (ir::Node* node : graph.nodes()) {
    for (int o = 0; o < node->num_outputs(); ++o) {
      ir::Value* v = node->output(o);
      v->set_sharding(ir::Sharding{{b.PlacementOf(v, sol.assignment)}});
    }
    if (node->kind() == ir::NodeKind::kConstant) {
      const double bytes = b.Bytes(*node->output(0));
      r.weight_bytes_total += bytes;
      const bool split = node->output(0)->sharding()->placements[0].kind == Placement::Kind::kShard;
      r.weight_bytes_per_rank += split ? bytes / static_cast<double>(n) : bytes;
    }
    auto var = b.VarOf(node);
    if (!node->is_call() || !var) continue;
    const Strategy& s = b.decisions()[static_cast<size_t>(*var)].strategies[static_cast<size_t>(sol.assignment[static_cast<size_t>(*var)])];
    r.strategies[node] = s;
    for (const InternalCollective& ic : s.internal) {
      r.collectives.push_back({ic.kind, ic.reduce, ic.bytes, nullptr, node, Placement::Replicate(),
                               Placement::Replicate(), true});
    }
    for (int i = 0; i < node->num_inputs(); ++i) {
      const ir::Value* in = node->input(i);
      const auto& want = s.inputs[static_cast<size_t>(i)];
      if (in == nullptr || !want) continue;
      const Placement have = b.PlacementOf(in, sol.assignment);
      if (auto kind = TransitionCollective(have, *want)) {
        r.collectives.push_back({*kind, have.reduce, b.Bytes(*in), in, node, have, *want, false});
      }
    }
  }
  if (ir::Node* out = graph.output_node()) {
    for (const ir::Value* v : out->inputs()) {
      Placement want = Placement::Replicate();
      auto it = options.output_placements.find(v->name());
      if (it != options.output_placements.end()) want = it->second;
      const Placement have = b.PlacementOf(v, sol.assignment);
      if (auto kind = TransitionCollective(have, want)) {
        r.collectives.push_back({*kind, have.reduce, b.Bytes(*v), v, nullptr, have, want, false});
      }
    }
  }
  return r;
}

absl::StatusOr<MinSumSolution> Solve(const Builder& b) {
  TPC_ASSIGN_OR_RETURN(MinSumSolution sol, SolveMinSum(b.problem()));
  if (sol.cost.is_infinite()) {
    return absl::InvalidArgumentError(
        "no placement satisfies every constraint together (each holds alone; check sharding "
        "groups against styles)");
  }
  return sol;
}

// Block counts worth trying: equal Splits and Concats of float values.
ShardOptions WithBlockCounts(const ir::Graph& graph, const ShardOptions& options) {
  ShardOptions out = options;
  for (ir::Node* n : graph.nodes()) {
    if (!n->is_call() || !n->domain().empty()) continue;
    const bool split = n->op_type() == "Split" && n->num_outputs() >= 2;
    const bool concat = n->op_type() == "Concat" && n->num_inputs() >= 2;
    if ((split || concat) && ir::IsFloating(n->output(0)->type().dtype)) {
      out.block_counts.insert(split ? n->num_outputs() : n->num_inputs());
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ShardResult> ShardGraph(ir::Graph& graph, const ShardOptions& raw_options,
                                       const Constraints& constraints) {
  const ShardOptions options = WithBlockCounts(graph, raw_options);
  Builder builder(graph, options, constraints);
  TPC_RETURN_IF_ERROR(builder.Build());
  TPC_ASSIGN_OR_RETURN(MinSumSolution sol, Solve(builder));
  return Collect(graph, builder, options, sol);
}

absl::StatusOr<std::string> ExplainValue(ir::Graph& graph, const ShardOptions& raw_options,
                                         const Constraints& constraints,
                                         const std::string& value_name) {
  const ShardOptions options = WithBlockCounts(graph, raw_options);
  ir::Value* v = graph.FindValue(value_name);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("no value named '", value_name, "'"));
  Builder builder(graph, options, constraints);
  TPC_RETURN_IF_ERROR(builder.Build());
  TPC_ASSIGN_OR_RETURN(MinSumSolution best, Solve(builder));
  std::string out = absl::StrCat(v->name(), ": ", v->type().ToString(), " → ",
                                 builder.PlacementOf(v, best.assignment).ToString(), "\n");
  const ir::Node* producer = v->producer();
  absl::StrAppend(&out, "  produced by ", producer->is_call() ? producer->Describe()
                                                              : ir::NodeKindName(producer->kind()), "\n");

  // Splits that were never candidates.
  RuleContext ctx(*producer, options);
  if (v->type().shape) {
    for (size_t d = 0; d < v->type().shape->size(); ++d) {
      const ir::Dim& dim = (*v->type().shape)[d];
      if (ctx.Divisible(dim)) continue;
      std::string why = dim.is_static()
                            ? absl::StrCat(dim.value(), " is not divisible by ", options.mesh.tp())
                            : absl::StrCat(dim.ToString(), " is symbolic and not declared divisible (--divisible ",
                                           dim.ToString(), " or --dim ", dim.ToString(), "=K)");
      absl::StrAppend(&out, "  S(", d, ") refused: dim ", d, " = ", why, "\n");
    }
  }
  if (auto fixed = builder.Fixed(v)) {
    absl::StrAppend(&out, "  fixed, not a decision: ",
                    producer->kind() == ir::NodeKind::kPlaceholder ? "a graph input (--input-placement)"
                    : producer->kind() == ir::NodeKind::kConstant
                        ? "a constant that is not a float tensor with a dim that splits"
                        : "computed only from replicated values; every rank computes it whole",
                    "\n");
    return out;
  }
  const int var = *builder.VarOf(producer);
  const Decision& d = builder.decisions()[static_cast<size_t>(var)];
  absl::StrAppend(&out, "  alternatives (total cost: weight bytes, activation bytes, collective s, minor bytes):\n");
  for (int c = 0; c < d.size(); ++c) {
    Builder clamped(graph, options, constraints);
    TPC_RETURN_IF_ERROR(clamped.Build());
    clamped.Clamp(var, c);
    auto sol = SolveMinSum(clamped.problem());
    const std::string name = d.is_constant ? d.placements[static_cast<size_t>(c)].ToString()
                                           : absl::StrCat(d.strategies[static_cast<size_t>(c)].name, " → ",
                                                          d.OutputPlacement(c, v->index()).ToString());
    const bool chosen = best.assignment[static_cast<size_t>(var)] == c;
    absl::StrAppend(&out, chosen ? "  * " : "    ", name, ": ",
                    sol.ok() ? (sol->cost.is_infinite() ? "impossible" : sol->cost.ToString())
                             : std::string(sol.status().message()),
                    "\n");
  }
  return out;
}

}  // namespace tpc::shard
