#include "problem_builder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/shard/op_record.h"
#include "tpc/shard/tied_weights.h"
#include "tpc/util/status_macros.h"

namespace tpc::shard::internal {

using ir::Placement;
using Kind = Decision::Kind;

ProblemBuilder::ProblemBuilder(const ir::Graph& graph, const ShardOptions& options,
                               const Constraints& constraints, std::set<const ir::Value*> sp_values)
    : graph_(graph),
      options_(options),
      constraints_(constraints),
      sp_values_(std::move(sp_values)) {}

absl::Status ProblemBuilder::Build() {
  TPC_RETURN_IF_ERROR(Classify());
  for (int v = 0; v < static_cast<int>(decisions_.size()); ++v) {
    if (decisions_[static_cast<size_t>(v)].kind == Kind::kCall) AddCallCosts(v);
  }
  AddEdges();
  TPC_RETURN_IF_ERROR(ApplyConstraints());
  for (const TiedPair& tie : FindTiedWeights(graph_)) {
    TPC_RETURN_IF_ERROR(Tie(tie.a, tie.b, tie.transposed));
  }
  return absl::OkStatus();
}

void ProblemBuilder::Clamp(int var, int choice) {
  std::vector<Cost> costs(static_cast<size_t>(decisions_[static_cast<size_t>(var)].size()),
                          Cost::Infinite());
  costs[static_cast<size_t>(choice)] = Cost::Zero();
  problem_.AddUnary(var, std::move(costs));
}

std::optional<int> ProblemBuilder::VarOf(const ir::Node* n) const {
  auto it = var_of_.find(n);
  return it == var_of_.end() ? std::nullopt : std::optional<int>(it->second);
}

std::optional<Placement> ProblemBuilder::Fixed(const ir::Value* v) const {
  auto it = fixed_.find(v);
  return it == fixed_.end() ? std::nullopt : std::optional<Placement>(it->second);
}

std::optional<int> ProblemBuilder::MaterializeVar(const ir::Value* v) const {
  auto it = materialize_of_.find(v);
  return it == materialize_of_.end() ? std::nullopt : std::optional<int>(it->second);
}

Placement ProblemBuilder::PlacementOf(const ir::Value* v, const std::vector<int>& a) const {
  if (auto f = Fixed(v)) return *f;
  const int var = var_of_.at(v->producer());
  return decisions_[static_cast<size_t>(var)].OutputPlacement(a[static_cast<size_t>(var)],
                                                              v->index());
}

Placement ProblemBuilder::MaterializedOf(const ir::Value* v, const std::vector<int>& a) const {
  if (auto m = MaterializeVar(v)) {
    return decisions_[static_cast<size_t>(*m)]
        .placements[static_cast<size_t>(a[static_cast<size_t>(*m)])];
  }
  return PlacementOf(v, a);
}

double ProblemBuilder::Bytes(const ir::Value& v) const {
  return RuleContext(*v.producer(), options_).Bytes(v);
}

int64_t ProblemBuilder::SeqDim(const ir::Value& v) const {
  if (!v.type().shape) return -1;
  const auto& dims = *v.type().shape;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].is_symbol() && dims[d].terms()[0].symbols[0] == options_.seq_symbol) {
      return static_cast<int64_t>(d);
    }
  }
  return -1;
}

ProblemBuilder::Slots ProblemBuilder::slots() const {
  switch (options_.objective) {
    case Objective::kTime:
      return {1, 0, 3, 2, 1, 0, 0};
    case Objective::kBalanced:
      return {3, 4, 1, 2, 3, 4, 0};
    case Objective::kMemory:
      break;
  }
  return {0, 1, 2, 3, 4, -1, -1};
}

Cost ProblemBuilder::Collective(double picos) const {
  const Slots s = slots();
  Cost c = Cost::Component(s.time, picos);
  if (s.priced >= 0 && s.priced != s.time) c.v[static_cast<size_t>(s.priced)] += picos;
  c.v[static_cast<size_t>(s.count)] += 1;
  return c;
}

Cost ProblemBuilder::Transition(const Placement& from, const Placement& to, double bytes,
                                bool stationary) const {
  if (!TransitionPossible(from, to)) return Cost::Infinite();
  // Tensor parallelism keeps weights where they are stored: moving a weight every step
  // is what FSDP does, not TP.
  if (stationary && TransitionCollective(from, to)) return Cost::Infinite();
  // Nor is a split weight padded back to its whole size (S → P(sum)).
  if (stationary && from.kind == Placement::Kind::kShard && to.kind == Placement::Kind::kPartial) {
    return Cost::Infinite();
  }
  if (!TransitionCollective(from, to)) return Cost::Zero();
  return Collective(TransitionPicos(options_.profile, from, to, n(), bytes));
}

Cost ProblemBuilder::WeightCost(double bytes, bool matrix) const {
  // Memory objective: matrices first; vectors (biases, norm scales) last, so that
  // splitting one never pays for a collective.
  const Slots s = slots();
  Cost c = Cost::Component(matrix ? s.weights : s.vectors, bytes);
  // Under a memory budget the time objective also prices weight bytes. (The balanced
  // objective prices them after building: PricedProblem.)
  if (options_.objective == Objective::kTime && options_.weight_price_ps_per_byte > 0) {
    c.v[static_cast<size_t>(s.priced)] += std::round(options_.weight_price_ps_per_byte * bytes);
  }
  return c;
}

int ProblemBuilder::NewVar(Decision d) {
  const int var = problem_.AddVariable(d.size());
  if (d.kind == Kind::kMaterialize) {
    materialize_of_[d.value] = var;
  } else {
    var_of_[d.node] = var;
  }
  decisions_.push_back(std::move(d));
  return var;
}

// ---------------------------------------------------------------- classification

absl::Status ProblemBuilder::Classify() {
  FindCachePairs();
  // An output placed by the user must split as its input would have to.
  if (const ir::Node* out = graph_.output_node()) {
    for (const ir::Value* v : out->inputs()) {
      auto it = options_.output_placements.find(v->name());
      if (it == options_.output_placements.end()) continue;
      TPC_RETURN_IF_ERROR(
          CheckSplit(*v, it->second, absl::StrCat("--output-placement ", v->name())));
    }
  }
  for (ir::Node* n : graph_.nodes()) {
    switch (n->kind()) {
      case ir::NodeKind::kPlaceholder:
        TPC_RETURN_IF_ERROR(AddPlaceholder(n));
        break;
      case ir::NodeKind::kConstant:
        AddConstant(n);
        break;
      case ir::NodeKind::kCall:
        AddCall(n);
        break;
      case ir::NodeKind::kOutput:
        break;
    }
  }
  return absl::OkStatus();
}

// A decoder's KV cache: `present = Concat(.., past, ..)` along the sequence axis (maybe
// through ops that pass values, a Cast), with `past` a graph input and `present` a graph
// output of the same shape but that axis.
// Neither placed by the user. The cache may then stay split (on its heads) between
// steps: the solver picks the input's placement and the output is delivered in it.
void ProblemBuilder::FindCachePairs() {
  const ir::Node* out = graph_.output_node();
  if (out == nullptr || n() <= 1) return;
  for (const ir::Value* q : out->inputs()) {
    const ir::Node* concat = q->producer();
    while (concat->is_call() && concat->num_inputs() >= 1 && concat->input(0) != nullptr) {
      const OpRecord* through = FindOpRecord(concat->domain(), concat->op_type());
      if (through == nullptr || !through->hooks.passes_values) break;
      concat = concat->input(0)->producer();
    }
    if (!concat->is_call() || options_.output_placements.count(q->name()) > 0 || !q->type().shape) {
      continue;
    }
    const OpRecord* record = FindOpRecord(concat->domain(), concat->op_type());
    if (record == nullptr || record->hooks.join_axis == nullptr) continue;
    const auto joined = record->hooks.join_axis(*concat);
    if (!joined) continue;
    const int64_t rank = q->type().rank();
    const int64_t axis = *joined;
    for (const ir::Value* p : concat->inputs()) {
      // Through joins of one input (the legacy exporter's Concat(past) of layer 0).
      while (p != nullptr && p->producer()->is_call() && p->producer()->num_inputs() == 1) {
        const ir::Node* single = p->producer();
        const OpRecord* r = FindOpRecord(single->domain(), single->op_type());
        if (r == nullptr || r->hooks.join_axis == nullptr) break;
        p = single->input(0);
      }
      if (p == nullptr || p->producer()->kind() != ir::NodeKind::kPlaceholder) continue;
      if (options_.input_placements.count(p->name()) > 0 || cache_input_axis_.contains(p)) continue;
      if (!p->type().shape || p->type().rank() != rank || !ir::IsFloating(p->type().dtype))
        continue;
      // The same dims but the joined one; a symbol facing a number counts as the same
      // (onnxruntime-genai names the head size `kv_cache_dim` on its inputs, while the
      // attention's present has it as a number: a run binds the symbol to it or fails).
      bool same = true;
      for (int64_t d = 0; d < rank; ++d) {
        const ir::Dim& a = (*p->type().shape)[static_cast<size_t>(d)];
        const ir::Dim& b = (*q->type().shape)[static_cast<size_t>(d)];
        if (d != axis && !(a == b) && a.is_static() == b.is_static()) same = false;
      }
      if (!same) continue;
      cache_output_to_input_[q] = p;
      cache_input_axis_[p] = axis;
      break;
    }
  }
}

Placement ProblemBuilder::OutputWant(const ir::Value* v, const std::vector<int>& a) const {
  if (auto it = cache_output_to_input_.find(v); it != cache_output_to_input_.end()) {
    return PlacementOf(it->second, a);
  }
  auto it = options_.output_placements.find(v->name());
  return it == options_.output_placements.end() ? Placement::Replicate() : it->second;
}

absl::Status ProblemBuilder::AddPlaceholder(const ir::Node* node) {
  const ir::Value* v = node->output(0);
  if (auto axis = cache_input_axis_.find(v); axis != cache_input_axis_.end()) {
    Decision d;
    d.kind = Kind::kInput;
    d.node = node;
    d.placements.push_back(Placement::Replicate());
    RuleContext ctx(*node, options_);
    for (int64_t dim = 0; dim < v->type().rank(); ++dim) {
      if (dim == axis->second) continue;
      const ir::Dim& size = (*v->type().shape)[static_cast<size_t>(dim)];
      if (ctx.Divisible(size)) d.placements.push_back(Placement::Shard(dim));
      // A state whose channels are a fused projection's parts (a convolution's over
      // [q | k | v]): each rank its part of each.
      for (const Placement& p : ctx.BlockedSplits(dim, size)) d.placements.push_back(p);
      // Fewer K/V heads than ranks: each head's cache on its group of ranks.
      for (int64_t groups : options_.group_counts) {
        if (ctx.DivisibleInGroups(size, groups) && !ctx.Divisible(size)) {
          d.placements.push_back(Placement::ShardInGroups(dim, groups));
        }
      }
    }
    NewVar(std::move(d));
    depends_on_inputs_.insert(v);
    return absl::OkStatus();
  }
  Placement p = Placement::Replicate();
  auto it = options_.input_placements.find(v->name());
  if (it != options_.input_placements.end()) p = it->second;
  TPC_RETURN_IF_ERROR(CheckSplit(*v, p, absl::StrCat("--input-placement ", v->name())));
  fixed_[v] = p;
  depends_on_inputs_.insert(v);
  return absl::OkStatus();
}

absl::Status ProblemBuilder::CheckSplit(const ir::Value& v, const Placement& p,
                                        const std::string& origin) const {
  if (p.kind == Placement::Kind::kPartial) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": a graph input or output cannot be partial"));
  }
  if (p.kind != Placement::Kind::kShard) return absl::OkStatus();
  if (!v.type().has_rank() || p.dim >= v.type().rank() || p.dim < 0) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", v.name(), " of type ",
                                                   v.type().ToString(), " has no dim ", p.dim));
  }
  const ir::Dim& d = (*v.type().shape)[static_cast<size_t>(p.dim)];
  if (p.has_groups()) {
    if (p.groups >= n() || n() % p.groups != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", p.ToString(), " needs ", p.groups, " groups of ranks, which ",
                       n(), " ranks do not make (g must divide N, g < N)"));
    }
    if (!RuleContext(*v.producer(), options_).DivisibleInGroups(d, p.groups)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": dim ", p.dim, " of ", v.name(),
                                                     " (", d.ToString(), ") does not split into ",
                                                     p.groups, " equal parts"));
    }
    return absl::OkStatus();
  }
  if (!RuleContext(*v.producer(), options_).DivisibleInBlocks(d, p.BlockUnits())) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": dim ", p.dim, " of ", v.name(), " (",
                                                   d.ToString(), ") does not split into ", n(),
                                                   " equal parts"));
  }
  return absl::OkStatus();
}

void ProblemBuilder::AddConstant(const ir::Node* node) {
  const ir::Value* v = node->output(0);
  const ir::TensorType& t = v->type();
  Decision d;
  d.kind = Kind::kConstant;
  d.node = node;
  d.placements.push_back(Placement::Replicate());
  // Float weights, and the 8-bit codes of quantized ones (MatMulNBits' packed B and zero
  // points, DequantizeLinear's int8 data): never shape values (int64, int32).
  const bool codes = (t.dtype == ir::DType::kU8 || t.dtype == ir::DType::kI8) && t.rank() >= 2;
  if ((ir::IsFloating(t.dtype) || codes) && t.rank() >= 1 && n() > 1) {
    RuleContext ctx(*node, options_);
    for (int64_t dim = 0; dim < t.rank(); ++dim) {
      const ir::Dim& size = (*t.shape)[static_cast<size_t>(dim)];
      if (ctx.Divisible(size)) d.placements.push_back(Placement::Shard(dim));
      for (const Placement& p : ctx.BlockedSplits(dim, size)) d.placements.push_back(p);
      for (int64_t groups : options_.group_counts) {
        if (ctx.DivisibleInGroups(size, groups))
          d.placements.push_back(Placement::ShardInGroups(dim, groups));
      }
    }
  }
  if (d.placements.size() == 1) {
    fixed_[v] = Placement::Replicate();
    return;
  }
  const int var = NewVar(std::move(d));
  stationary_.insert(v);
  const double bytes = Bytes(*v);
  std::vector<Cost> costs;
  for (const Placement& p : decisions_[static_cast<size_t>(var)].placements) {
    costs.push_back(WeightCost(bytes / static_cast<double>(p.Parts(n())), t.rank() >= 2));
  }
  problem_.AddUnary(var, std::move(costs));
}

void ProblemBuilder::AddCall(const ir::Node* node) {
  bool all_replicated = true;
  bool from_weight = false;
  bool from_inputs = false;
  for (const ir::Value* in : node->inputs()) {
    if (in == nullptr) continue;
    auto f = Fixed(in);
    if (!f || f->kind != Placement::Kind::kReplicate) all_replicated = false;
    from_weight = from_weight || stationary_.contains(in);
    from_inputs = from_inputs || depends_on_inputs_.contains(in);
  }
  if (from_inputs) {
    for (const ir::Value* o : node->outputs()) depends_on_inputs_.insert(o);
  }
  // An op that reads only the shape (Shape, Size): its result is replicated whatever the
  // input's placement (the partition stage makes it the whole shape), so the shape
  // computations downstream are no decisions either.
  const OpRecord* record = FindOpRecord(node->domain(), node->op_type());
  if (record != nullptr && record->hooks.reads_shape_only) all_replicated = true;
  bool has_rule = false;
  std::vector<Strategy> strategies = StrategiesFor(*node, options_, &has_rule);
  if (all_replicated) {
    // Computed from replicated values only (shape computations, masks): every rank
    // computes it whole.
    for (const ir::Value* o : node->outputs()) fixed_[o] = Placement::Replicate();
    return;
  }
  // An op with no rule on values that may be split: it runs replicated, reported.
  if (!has_rule) fallback_.push_back(node);
  Decision d;
  d.kind = Kind::kCall;
  d.node = node;
  d.strategies = std::move(strategies);
  NewVar(std::move(d));
  if (from_weight && !from_inputs) {
    for (const ir::Value* o : node->outputs()) stationary_.insert(o);
  }
}

// The strategy's own cost: its collectives, its compute, sequence-parallel misses.
void ProblemBuilder::AddCallCosts(int var) {
  const Decision& dec = decisions_[static_cast<size_t>(var)];
  const ir::Node& node = *dec.node;
  const double flops = Flops(node);
  std::vector<Cost> own;
  for (const Strategy& s : dec.strategies) {
    Cost c;
    for (const InternalCollective& ic : s.internal) {
      c += Collective(CollectivePicos(options_.profile, ic.kind, n(), ic.bytes));
    }
    const Slots slot = slots();
    if (slot.compute >= 0) {
      const double picos =
          std::round(flops * s.compute_fraction / options_.profile.flops_per_s * 1e12);
      c.v[static_cast<size_t>(slot.compute)] += picos;
      if (slot.priced >= 0 && slot.priced != slot.compute) {
        c.v[static_cast<size_t>(slot.priced)] += picos;
      }
    }
    for (int o = 0; o < node.num_outputs(); ++o) {
      const ir::Value* out = node.output(o);
      if (sp_values_.count(out) == 0) continue;
      const Placement& p = s.outputs[static_cast<size_t>(o)];
      const bool seq =
          p.kind == Placement::Kind::kShard && !p.has_groups() && p.dim == SeqDim(*out);
      if (!seq) c += Cost::Component(slots().sp_misses, 1);
    }
    own.push_back(c);
  }
  problem_.AddUnary(var, std::move(own));
}

double ProblemBuilder::Flops(const ir::Node& node) const {
  return OpFlops(RuleContext(node, options_));
}

// ---------------------------------------------------------------- edges

size_t ProblemBuilder::Consumers(const ir::Value* v) const {
  size_t n = 0;
  for (const ir::Use& use : v->uses()) {
    if (use.user->kind() == ir::NodeKind::kOutput || VarOf(use.user)) ++n;
  }
  return n;
}

std::vector<Placement> ProblemBuilder::Candidates(const ir::Value* v) const {
  std::vector<Placement> out = {Placement::Replicate()};
  auto add = [&](const Placement& p) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  const int pv = var_of_.at(v->producer());
  const Decision& pd = decisions_[static_cast<size_t>(pv)];
  for (int a = 0; a < pd.size(); ++a) add(pd.OutputPlacement(a, v->index()));
  for (const ir::Use& use : v->uses()) {
    auto cv = VarOf(use.user);
    if (!cv || !use.user->is_call()) continue;
    for (const Strategy& s : decisions_[static_cast<size_t>(*cv)].strategies) {
      if (const auto& q = s.inputs[static_cast<size_t>(use.index)]) add(*q);
    }
  }
  return out;
}

void ProblemBuilder::AddEdges() {
  // Inputs that come from fixed values: a unary cost on the consumer.
  const size_t num_decisions = decisions_.size();
  for (size_t var = 0; var < num_decisions; ++var) {
    const Decision& dec = decisions_[var];
    if (dec.kind != Kind::kCall) continue;
    for (int i = 0; i < dec.node->num_inputs(); ++i) {
      const ir::Value* in = dec.node->input(i);
      if (in == nullptr) continue;
      auto f = Fixed(in);
      if (!f) continue;
      std::vector<Cost> costs;
      for (const Strategy& s : dec.strategies) {
        const auto& q = s.inputs[static_cast<size_t>(i)];
        costs.push_back(q ? Transition(*f, *q, Bytes(*in), false) : Cost::Zero());
      }
      problem_.AddUnary(static_cast<int>(var), std::move(costs));
    }
  }
  // Values decisions produce, to each of their consumers (a consumer with no decision
  // reads only the value's shape: Shape, Size).
  for (size_t var = 0; var < num_decisions; ++var) {
    const ir::Node* node = decisions_[var].node;
    for (int o = 0; o < node->num_outputs(); ++o) {
      const ir::Value* v = node->output(o);
      const size_t consumers = Consumers(v);
      if (consumers == 0) continue;
      if (consumers == 1) {
        AddEdge(static_cast<int>(var), v);
        continue;
      }
      // Several consumers: one materialized form, then each consumer's need from it.
      Decision m;
      m.kind = Kind::kMaterialize;
      m.value = v;
      m.placements = Candidates(v);
      const int mv = NewVar(std::move(m));
      const bool stationary = stationary_.contains(v);
      const Decision& pd = decisions_[var];
      const Decision& md = decisions_[static_cast<size_t>(mv)];
      std::vector<Cost> table;
      for (int a = 0; a < pd.size(); ++a) {
        for (const Placement& b : md.placements) {
          table.push_back(Transition(pd.OutputPlacement(a, o), b, Bytes(*v), stationary));
        }
      }
      problem_.AddPairwise(static_cast<int>(var), mv, std::move(table));
      AddEdge(mv, v);
    }
  }
}

// From decision `from` (the producer, or the value's materialize decision) to every
// consumer of `v`.
void ProblemBuilder::AddEdge(int from, const ir::Value* v) {
  const Decision& fd = decisions_[static_cast<size_t>(from)];
  const bool stationary = stationary_.contains(v);
  const double bytes = Bytes(*v);
  auto placement = [&](int a) -> const Placement& {
    return fd.kind == Kind::kMaterialize ? fd.placements[static_cast<size_t>(a)]
                                         : fd.OutputPlacement(a, v->index());
  };
  for (const ir::Use& use : v->uses()) {
    if (use.user->kind() == ir::NodeKind::kCall && !VarOf(use.user)) continue;  // reads the shape
    if (use.user->kind() == ir::NodeKind::kOutput) {
      if (auto pair = cache_output_to_input_.find(v); pair != cache_output_to_input_.end()) {
        // Delivered in its cache input's placement, whichever that is.
        const int iv = var_of_.at(pair->second->producer());
        const Decision& id = decisions_[static_cast<size_t>(iv)];
        std::vector<Cost> table;
        for (int a = 0; a < fd.size(); ++a) {
          for (int b = 0; b < id.size(); ++b) {
            table.push_back(
                Transition(placement(a), id.placements[static_cast<size_t>(b)], bytes, false));
          }
        }
        problem_.AddPairwise(from, iv, std::move(table));
        continue;
      }
      Placement want = Placement::Replicate();
      auto it = options_.output_placements.find(v->name());
      if (it != options_.output_placements.end()) want = it->second;
      std::vector<Cost> costs;
      for (int a = 0; a < fd.size(); ++a)
        costs.push_back(Transition(placement(a), want, bytes, false));
      problem_.AddUnary(from, std::move(costs));
      continue;
    }
    const int cv = var_of_.at(use.user);
    const Decision& cd = decisions_[static_cast<size_t>(cv)];
    std::vector<Cost> table;
    table.reserve(static_cast<size_t>(fd.size() * cd.size()));
    for (int a = 0; a < fd.size(); ++a) {
      for (const Strategy& s : cd.strategies) {
        const auto& q = s.inputs[static_cast<size_t>(use.index)];
        table.push_back(q ? Transition(placement(a), *q, bytes, stationary) : Cost::Zero());
      }
    }
    problem_.AddPairwise(from, cv, std::move(table));
  }
}

// ---------------------------------------------------------------- constraints

absl::Status ProblemBuilder::ApplyConstraints() {
  for (const auto& entry : constraints_.allowed) {
    const ir::Value* v = entry.first;
    const auto& allowed = entry.second;  // not a structured binding: the lambda reads it
    auto allowed_has = [&](const Placement& p) {
      return std::find(allowed.placements.begin(), allowed.placements.end(), p) !=
             allowed.placements.end();
    };
    const std::string want = allowed.placements.empty() ? "?" : allowed.placements[0].ToString();
    if (auto f = Fixed(v)) {
      if (allowed_has(*f)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          allowed.origin, ": ", v->name(), " cannot be ", want, ": it is ",
          v->producer()->kind() == ir::NodeKind::kPlaceholder ? "a graph input placed "
                                                              : "computed replicated as ",
          f->ToString()));
    }
    const int var = var_of_.at(v->producer());
    const Decision& d = decisions_[static_cast<size_t>(var)];
    std::vector<Cost> costs;
    std::vector<std::string> candidates;
    bool any = false;
    for (int a = 0; a < d.size(); ++a) {
      const Placement& p = d.OutputPlacement(a, v->index());
      const bool ok = allowed_has(p);
      any = any || ok;
      candidates.push_back(p.ToString());
      costs.push_back(ok ? Cost::Zero() : Cost::Infinite());
    }
    if (!any) {
      std::sort(candidates.begin(), candidates.end());
      candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
      return absl::InvalidArgumentError(absl::StrCat(allowed.origin, ": ", v->name(), " cannot be ",
                                                     want, " (its candidates are ",
                                                     absl::StrJoin(candidates, ", "), ")"));
    }
    problem_.AddUnary(var, std::move(costs));
  }
  for (const auto& group : constraints_.groups) {
    for (size_t k = 1; k < group.size(); ++k) TPC_RETURN_IF_ERROR(Tie(group[0], group[k], false));
  }
  return absl::OkStatus();
}

namespace {

Placement Transposed(const Placement& p) {
  if (p.kind != Placement::Kind::kShard) return p;
  Placement t = p;
  t.dim = 1 - p.dim;
  return t;
}

}  // namespace

absl::Status ProblemBuilder::Tie(const ir::Value* a, const ir::Value* b, bool transposed) {
  auto map = [&](const Placement& p) { return transposed ? Transposed(p) : p; };
  auto fa = Fixed(a);
  auto fb = Fixed(b);
  if (fa && fb) {
    if (map(*fa) == *fb) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("sharding group: ", a->name(), " is ",
                                                   fa->ToString(), " but ", b->name(), " is ",
                                                   fb->ToString()));
  }
  if (fa || fb) {
    const ir::Value* free = fa ? b : a;
    const Placement want = fa ? map(*fa) : (transposed ? Transposed(*fb) : *fb);
    const int var = var_of_.at(free->producer());
    const Decision& d = decisions_[static_cast<size_t>(var)];
    std::vector<Cost> costs;
    for (int c = 0; c < d.size(); ++c) {
      costs.push_back(d.OutputPlacement(c, free->index()) == want ? Cost::Zero()
                                                                  : Cost::Infinite());
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
      const bool same = map(da.OutputPlacement(c, a->index())) == da.OutputPlacement(c, b->index());
      costs.push_back(same ? Cost::Zero() : Cost::Infinite());
    }
    problem_.AddUnary(va, std::move(costs));
    return absl::OkStatus();
  }
  std::vector<Cost> table;
  for (int x = 0; x < da.size(); ++x) {
    for (int y = 0; y < db.size(); ++y) {
      const bool same = map(da.OutputPlacement(x, a->index())) == db.OutputPlacement(y, b->index());
      table.push_back(same ? Cost::Zero() : Cost::Infinite());
    }
  }
  problem_.AddPairwise(va, vb, std::move(table));
  return absl::OkStatus();
}

}  // namespace tpc::shard::internal
