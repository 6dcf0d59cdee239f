#include "tpc/shard/factor_spec.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc::shard {

using ir::Placement;

BroadcastFit FitOf(const ir::Dim& in, const ir::Dim& out) {
  if (in.is_unknown()) return BroadcastFit::kUnsure;  // two unknowns may differ
  if (in == out) return BroadcastFit::kCarries;
  if (in.is_static()) return in.value() == 1 ? BroadcastFit::kBroadcast : BroadcastFit::kCarries;
  return BroadcastFit::kUnsure;
}

int FactorSpec::AddFactor(Kind kind, ir::Dim size, std::string name) {
  factors.push_back({kind, std::move(size), std::move(name)});
  return static_cast<int>(factors.size()) - 1;
}

namespace {

// How a factor is split: in blocks (static, 1 for a plain split, or symbolic, or
// unequal ones of relative sizes `weights`), or in groups of ranks.
struct Blocks {
  int64_t count = 1;
  std::optional<ir::Dim> symbolic;
  int64_t groups = 0;
  std::vector<int64_t> weights;
  bool plain() const { return !symbolic && count == 1 && groups == 0 && weights.empty(); }
  std::string ToString() const {
    if (!weights.empty()) return absl::StrJoin(weights, ":");
    return symbolic ? symbolic->ToString() : absl::StrCat(count);
  }
  // Whether `d` splits so (unequal blocks: into units of the weights' sum, each split).
  bool Fits(const RuleContext& ctx, const ir::Dim& d) const {
    if (groups > 0) return ctx.DivisibleInGroups(d, groups);
    if (!weights.empty()) {  // (the options' weights are reduced: their sum is the units)
      return ctx.DivisibleInBlocks(d, std::accumulate(weights.begin(), weights.end(), int64_t{0}));
    }
    return symbolic ? ctx.DivisibleInBlocks(d, *symbolic) : ctx.DivisibleInBlocks(d, count);
  }
};

std::optional<Placement> PlacementFor(const std::vector<int>& dims, int factor,
                                      const Blocks& blocks) {
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != factor) continue;
    if (blocks.symbolic) {
      return Placement::ShardInSymbolicBlocks(static_cast<int64_t>(d), blocks.symbolic->ToString());
    }
    if (blocks.groups > 0) return Placement::ShardInGroups(static_cast<int64_t>(d), blocks.groups);
    if (!blocks.weights.empty()) {
      return Placement::ShardInWeightedBlocks(static_cast<int64_t>(d), blocks.weights);
    }
    return Placement::Shard(static_cast<int64_t>(d), blocks.count);
  }
  return std::nullopt;
}

}  // namespace

void AddFactorStrategies(const RuleContext& ctx, const FactorSpec& spec,
                         std::vector<Strategy>* out) {
  using Kind = FactorSpec::Kind;
  const ir::Node& node = ctx.node();
  if (ctx.noting()) ctx.Note(spec.ToString());
  std::vector<Blocks> block_counts = {Blocks{}};
  for (int64_t k : ctx.options().block_counts) block_counts.push_back({k, std::nullopt, 0, {}});
  for (const ir::Dim& d : ctx.options().symbolic_block_counts) {
    block_counts.push_back({0, d, 0, {}});
  }
  for (int64_t g : ctx.options().group_counts) block_counts.push_back({1, std::nullopt, g, {}});
  for (const std::vector<int64_t>& w : ctx.options().block_weights) {
    block_counts.push_back({static_cast<int64_t>(w.size()), std::nullopt, 0, w});
  }
  for (int f = 0; f < static_cast<int>(spec.factors.size()); ++f) {
    for (const Blocks& blocks : block_counts) {
      const FactorSpec::Factor& factor = spec.factors[static_cast<size_t>(f)];
      if (factor.kind == Kind::kNeedWhole) continue;
      if (!blocks.Fits(ctx, factor.size)) continue;
      const bool plain = blocks.plain();
      // Blocked splits only make sense for dims the result keeps; a split in groups
      // reduced over would leave each group's ranks with the same partial sum.
      if (!plain && factor.kind != Kind::kPass) continue;
      Strategy s;
      if (plain) {
        s.name = absl::StrCat("split ", factor.name);
      } else if (blocks.groups > 0) {
        s.name = absl::StrCat("split ", factor.name, " in ", blocks.groups, " rank groups");
      } else {
        s.name = absl::StrCat("split ", factor.name, " in ", blocks.ToString(), " blocks");
      }
      s.compute_fraction = 1.0 / static_cast<double>(blocks.groups > 0 ? blocks.groups : ctx.n());
      // A split must cut every dim carrying the factor alike: a reshape's factor is the
      // size of its input's major dim, and the output's may be smaller (`[4·b, 8] →
      // [b, 4, 8]` carries b to a dim of b, not of 4·b; `[b, s, 32] → [b, s, 2, 16]` in
      // 2 groups carries them to a dim of 2, which does not split 4 ways).
      bool valid = true;
      auto blocks_fit = [&](const std::vector<ir::Dim>& dims, const Placement& p) {
        if (p.dim >= static_cast<int64_t>(dims.size())) return true;
        const ir::Dim& d = dims[static_cast<size_t>(p.dim)];
        return d == factor.size || blocks.Fits(ctx, d);
      };
      s.inputs.assign(static_cast<size_t>(node.num_inputs()), Placement::Replicate());
      for (int i = 0; i < node.num_inputs(); ++i) {
        if (!ctx.has_input(i)) {
          s.inputs[static_cast<size_t>(i)] = std::nullopt;
          continue;
        }
        if (static_cast<size_t>(i) < spec.inputs.size()) {
          if (auto p = PlacementFor(spec.inputs[static_cast<size_t>(i)], f, blocks)) {
            if (!blocks_fit(ctx.input_dims(i), *p)) valid = false;
            s.inputs[static_cast<size_t>(i)] = *p;
          }
        }
      }
      for (int o = 0; o < node.num_outputs(); ++o) {
        std::optional<Placement> p;
        if (static_cast<size_t>(o) < spec.outputs.size()) {
          p = PlacementFor(spec.outputs[static_cast<size_t>(o)], f, blocks);
          if (p && !blocks_fit(ctx.output_dims(o), *p)) valid = false;
        }
        if (!p) {
          switch (factor.kind) {
            case Kind::kReduceSum:
              p = Placement::Partial(ir::ReduceOp::kSum);
              break;
            case Kind::kReduceMax:
              p = Placement::Partial(ir::ReduceOp::kMax);
              break;
            case Kind::kReduceMin:
              p = Placement::Partial(ir::ReduceOp::kMin);
              break;
            case Kind::kReduceAvg:
              p = Placement::Partial(ir::ReduceOp::kAvg);
              break;
            default:
              // A pass-through factor missing from an output: each rank would hold a
              // different value where the output needs one; not a valid strategy.
              valid = false;
          }
        }
        if (!valid) break;
        s.outputs.push_back(*p);
      }
      if (valid) out->push_back(std::move(s));
    }
  }
}

namespace {

// i, j, k, ..., z, then i1, j1, ...: the letters of Shardy's text form.
std::string Letter(int f) {
  const int base = f % 18;  // i..z
  std::string s(1, static_cast<char>('i' + base));
  if (f >= 18) s += std::to_string(f / 18);
  return s;
}

const char* KindText(FactorSpec::Kind k) {
  switch (k) {
    case FactorSpec::Kind::kPass:
      return "";
    case FactorSpec::Kind::kReduceSum:
      return "reduce_sum";
    case FactorSpec::Kind::kReduceMax:
      return "reduce_max";
    case FactorSpec::Kind::kReduceMin:
      return "reduce_min";
    case FactorSpec::Kind::kReduceAvg:
      return "reduce_avg";
    case FactorSpec::Kind::kNeedWhole:
      return "need_whole";
  }
  return "";
}

}  // namespace

std::string FactorSpec::ToString() const {
  // Letters by first appearance, so the text does not depend on the order in which a
  // rule created its factors.
  std::vector<int> letter(factors.size(), -1);
  int next = 0;
  auto name = [&](int f) {
    if (letter[static_cast<size_t>(f)] < 0) letter[static_cast<size_t>(f)] = next++;
    return Letter(letter[static_cast<size_t>(f)]);
  };
  auto operand = [&](const std::vector<int>& dims) {
    std::vector<std::string> parts;
    for (int f : dims) parts.push_back(f < 0 ? "_" : name(f));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  };
  std::vector<std::string> ins;
  for (const std::vector<int>& dims : inputs) ins.push_back(operand(dims));
  std::vector<std::string> outs;
  for (const std::vector<int>& dims : outputs) outs.push_back(operand(dims));
  std::string text =
      absl::StrCat("(", absl::StrJoin(ins, ", "), ")->(", absl::StrJoin(outs, ", "), ")");
  for (Kind k :
       {Kind::kReduceSum, Kind::kReduceMax, Kind::kReduceMin, Kind::kReduceAvg, Kind::kNeedWhole}) {
    std::vector<std::string> names;
    for (size_t f = 0; f < factors.size(); ++f) {
      if (factors[f].kind == k) names.push_back(name(static_cast<int>(f)));
    }
    std::sort(names.begin(), names.end());
    if (!names.empty()) {
      absl::StrAppend(&text, " ", KindText(k), "={", absl::StrJoin(names, ", "), "}");
    }
  }
  return text;
}

FactorSpecBuilder::FactorSpecBuilder(const RuleContext& ctx) : ctx_(ctx) {
  spec_.inputs.resize(static_cast<size_t>(ctx.num_inputs()));
  spec_.outputs.resize(static_cast<size_t>(ctx.node().num_outputs()));
}

int FactorSpecBuilder::Add(Kind kind, const std::vector<int64_t>& input_dims,
                           const std::vector<int64_t>& output_dims, std::string name) {
  const int f = static_cast<int>(spec_.factors.size());
  std::optional<ir::Dim> size;
  auto carry = [&](std::vector<int>& operand, const std::vector<ir::Dim>& dims, int64_t d) {
    if (d == kNone || d < 0 || d >= static_cast<int64_t>(dims.size())) return;
    if (operand.size() < dims.size()) operand.resize(dims.size(), -1);
    operand[static_cast<size_t>(d)] = f;
    if (!size) size = dims[static_cast<size_t>(d)];
  };
  for (size_t i = 0; i < input_dims.size(); ++i) {
    if (!ctx_.has_input(static_cast<int>(i))) continue;
    carry(spec_.inputs[i], ctx_.input_dims(static_cast<int>(i)), input_dims[i]);
  }
  // Entries past the node's inputs and outputs are ignored (an optional operand it lacks).
  for (size_t o = 0; o < output_dims.size() && o < spec_.outputs.size(); ++o) {
    carry(spec_.outputs[o], ctx_.output_dims(static_cast<int>(o)), output_dims[o]);
  }
  if (name.empty()) name = Letter(f);
  spec_.factors.push_back({kind, size.value_or(ir::Dim(1)), std::move(name)});
  return f;
}

FactorSpecBuilder& FactorSpecBuilder::Pointwise(const std::vector<int>& inputs) {
  const std::vector<ir::Dim>& y = ctx_.output_dims(0);
  const int64_t rank = static_cast<int64_t>(y.size());
  for (int64_t d = 0; d < rank; ++d) {
    std::vector<int64_t> in_dims(static_cast<size_t>(ctx_.num_inputs()), kNone);
    Kind kind = Kind::kPass;
    for (int i : inputs) {
      if (!ctx_.has_input(i)) continue;
      const std::vector<ir::Dim>& in = ctx_.input_dims(i);
      const int64_t id = d - (rank - static_cast<int64_t>(in.size()));
      if (id < 0) continue;
      const BroadcastFit fit = FitOf(in[static_cast<size_t>(id)], y[static_cast<size_t>(d)]);
      if (fit != BroadcastFit::kBroadcast) in_dims[static_cast<size_t>(i)] = id;
      if (fit == BroadcastFit::kUnsure) kind = Kind::kNeedWhole;
    }
    std::vector<int64_t> out_dims;
    for (int o = 0; o < ctx_.node().num_outputs(); ++o) {
      const std::vector<ir::Dim>& yo = ctx_.output_dims(o);
      const bool carries =
          yo.size() == y.size() && yo[static_cast<size_t>(d)] == y[static_cast<size_t>(d)];
      out_dims.push_back(carries ? d : kNone);
    }
    Add(kind, in_dims, out_dims, "d" + std::to_string(d));
  }
  // Operands that carry nothing still get their full-length entry (all `_`).
  for (int i : inputs) {
    if (ctx_.has_input(i))
      spec_.inputs[static_cast<size_t>(i)].resize(ctx_.input_dims(i).size(), -1);
  }
  return *this;
}

FactorSpecBuilder& FactorSpecBuilder::Along(const std::vector<int>& inputs,
                                            const std::vector<Kind>& kinds, bool drop) {
  const std::vector<ir::Dim>& in = ctx_.input_dims(inputs.at(0));
  int64_t kept = 0;
  for (size_t d = 0; d < in.size() && d < kinds.size(); ++d) {
    const bool pass = kinds[d] == Kind::kPass;
    const bool kept_dim = pass || (!drop && kinds[d] == Kind::kNeedWhole);
    std::vector<int64_t> in_dims(static_cast<size_t>(ctx_.num_inputs()), kNone);
    for (int i : inputs) in_dims[static_cast<size_t>(i)] = static_cast<int64_t>(d);
    std::vector<int64_t> out_dims;
    const int64_t at = drop ? kept : static_cast<int64_t>(d);
    for (int o = 0; o < ctx_.node().num_outputs(); ++o) {
      const std::vector<ir::Dim>& y = ctx_.output_dims(o);
      const bool fits =
          kept_dim && at < static_cast<int64_t>(y.size()) && y[static_cast<size_t>(at)] == in[d];
      out_dims.push_back(fits ? at : kNone);
    }
    Add(kinds[d], in_dims, out_dims, "d" + std::to_string(d));
    if (pass) ++kept;
  }
  for (int o = 0; o < ctx_.node().num_outputs(); ++o) {
    spec_.outputs[static_cast<size_t>(o)].resize(ctx_.output_dims(o).size(), -1);
  }
  return *this;
}

}  // namespace tpc::shard
