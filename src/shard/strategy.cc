#include "tpc/shard/strategy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/shard/op_record.h"

namespace tpc::shard {

using ir::Placement;

std::optional<std::vector<int64_t>> KnownInts(const ir::Value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->producer()->kind() == ir::NodeKind::kConstant && v->producer()->tensor().has_data()) {
    return v->producer()->tensor().ToInt64();
  }
  if (v->known_value()) {
    std::vector<int64_t> out;
    for (const ir::Dim& d : *v->known_value()) {
      if (!d.is_static()) return std::nullopt;
      out.push_back(d.value());
    }
    return out;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> RuleContext::input_ints(int i) const {
  return has_input(i) ? KnownInts(node_.input(i)) : std::nullopt;
}

bool RuleContext::Divisible(const ir::Dim& d) const {
  const int64_t n = this->n();
  if (d.is_unknown()) return false;
  if (d.is_static()) return d.value() > 0 && d.value() % n == 0;
  // A polynomial is divisible when every term is: its coefficient is, or one of its
  // symbols is declared divisible (by --divisible or a --dim size N divides).
  for (const ir::Dim::Term& t : d.terms()) {
    bool ok = t.den == 1 && t.coeff % n == 0;
    for (const std::string& s : t.symbols) {
      if (options_.divisible.count(s) > 0) ok = true;
      auto it = options_.dim_sizes.find(s);
      if (it != options_.dim_sizes.end() && it->second % n == 0) ok = true;
    }
    if (!ok) return false;
  }
  return true;
}

bool RuleContext::DivisibleInBlocks(const ir::Dim& d, int64_t blocks) const {
  if (blocks == 1) return Divisible(d);
  return d.is_static() && d.value() > 0 && d.value() % (blocks * n()) == 0;
}

bool RuleContext::DivisibleInBlocks(const ir::Dim& d, const ir::Dim& blocks) const {
  if (blocks.is_static()) return DivisibleInBlocks(d, blocks.value());
  const std::optional<ir::Dim> block = d.DivExact(blocks);
  return block && block->is_static() && block->value() > 0 && Divisible(*block);
}

std::vector<ir::Placement> RuleContext::BlockedSplits(int64_t dim, const ir::Dim& d) const {
  std::vector<ir::Placement> out;
  for (int64_t k : options_.block_counts) {
    if (k > 1 && DivisibleInBlocks(d, k)) out.push_back(ir::Placement::Shard(dim, k));
  }
  for (const std::vector<int64_t>& weights : options_.block_weights) {
    const ir::Placement p = ir::Placement::ShardInWeightedBlocks(dim, weights);
    if (DivisibleInBlocks(d, p.BlockUnits())) out.push_back(p);
  }
  return out;
}

bool RuleContext::DivisibleInGroups(const ir::Dim& d, int64_t groups) const {
  if (d.is_static()) return d.value() > 0 && groups > 0 && d.value() % groups == 0;
  return Divisible(d);
}

bool RuleContext::Splittable(const ir::Dim& d) const {
  if (Divisible(d)) return true;
  for (int64_t g : options_.group_counts) {
    if (DivisibleInGroups(d, g)) return true;
  }
  return false;
}

double RuleContext::Size(const ir::Dim& d) const { return DimSize(d, options_); }

double RuleContext::Bytes(const ir::Value& v) const {
  double n = static_cast<double>(ir::DTypeSize(v.type().dtype));
  if (!v.type().shape) return n * static_cast<double>(options_.default_dim_size);
  for (const ir::Dim& d : *v.type().shape) n *= Size(d);
  return n;
}

void AddPartialStrategy(const RuleContext& ctx, const std::vector<int>& partial_inputs,
                        std::vector<Strategy>* out) {
  const ir::Node& node = ctx.node();
  for (ir::Value* o : node.outputs()) {
    if (!ir::IsFloating(o->type().dtype)) return;  // partial sums of integers: no
  }
  Strategy s;
  s.name = "partial";
  s.compute_fraction = 1.0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (!ctx.has_input(i)) {
      s.inputs.push_back(std::nullopt);
    } else if (std::find(partial_inputs.begin(), partial_inputs.end(), i) != partial_inputs.end()) {
      s.inputs.push_back(Placement::Partial(ir::ReduceOp::kSum));
    } else {
      s.inputs.push_back(Placement::Replicate());
    }
  }
  s.outputs.assign(static_cast<size_t>(node.num_outputs()), Placement::Partial(ir::ReduceOp::kSum));
  if (ctx.noting()) ctx.Note(absl::StrCat("partial(", absl::StrJoin(partial_inputs, ", "), ")"));
  out->push_back(std::move(s));
}

void AddNamedStrategy(const RuleContext& ctx, Strategy s, std::vector<Strategy>* out) {
  if (!ctx.noting()) {
    out->push_back(std::move(s));
    return;
  }
  auto text = [](const std::optional<Placement>& p) { return p ? p->ToString() : "_"; };
  std::vector<std::string> ins;
  for (const auto& p : s.inputs) ins.push_back(text(p));
  std::vector<std::string> outs;
  for (const auto& p : s.outputs) outs.push_back(p.ToString());
  ctx.Note(absl::StrCat("\"", s.name, "\" (", absl::StrJoin(ins, ", "), ")->(",
                        absl::StrJoin(outs, ", "), ")"));
  out->push_back(std::move(s));
}

Strategy ReplicateStrategy(const ir::Node& node) {
  Strategy s;
  s.name = "replicate";
  for (int i = 0; i < node.num_inputs(); ++i) {
    s.inputs.push_back(node.input(i) == nullptr ? std::nullopt
                                                : std::optional<Placement>(Placement::Replicate()));
  }
  s.outputs.assign(static_cast<size_t>(node.num_outputs()), Placement::Replicate());
  return s;
}

namespace {

// A strategy is well formed when every split names a dim the value has.
bool Consistent(const ir::Node& node, const Strategy& s) {
  if (s.inputs.size() != static_cast<size_t>(node.num_inputs()) ||
      s.outputs.size() != static_cast<size_t>(node.num_outputs())) {
    return false;
  }
  auto fits = [](const ir::Value* v, const Placement& p) {
    if (p.kind != Placement::Kind::kShard) return true;
    return v->type().has_rank() && p.dim >= 0 && p.dim < v->type().rank();
  };
  for (int i = 0; i < node.num_inputs(); ++i) {
    const auto& p = s.inputs[static_cast<size_t>(i)];
    if (p && node.input(i) != nullptr && !fits(node.input(i), *p)) return false;
  }
  for (int o = 0; o < node.num_outputs(); ++o) {
    if (!fits(node.output(o), s.outputs[static_cast<size_t>(o)])) return false;
  }
  return true;
}

bool SameStrategy(const Strategy& a, const Strategy& b) {
  return a.inputs == b.inputs && a.outputs == b.outputs;
}

}  // namespace

std::vector<Strategy> StrategiesFor(const ir::Node& node, const ShardOptions& options,
                                    bool* has_rule) {
  std::vector<Strategy> out;
  out.push_back(ReplicateStrategy(node));
  const OpRecord* record = FindOpRecord(node.domain(), node.op_type());
  RuleFn rule = record != nullptr ? record->rule : nullptr;
  *has_rule = rule != nullptr;
  if (rule == nullptr || options.mesh.tp() <= 1) return out;
  for (const ir::Value* v : node.inputs()) {
    if (v != nullptr && !v->type().has_rank()) return out;
  }
  RuleContext ctx(node, options);
  std::vector<Strategy> candidates;
  rule(ctx, &candidates);
  for (Strategy& s : candidates) {
    if (!Consistent(node, s)) continue;
    bool dup = false;
    for (const Strategy& seen : out) dup = dup || SameStrategy(seen, s);
    if (!dup) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tpc::shard
