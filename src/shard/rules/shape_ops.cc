// Shape operators. Reshape, Flatten, Squeeze and Unsqueeze map split dims through the
// factorisation of sizes (`[B,S,H·D] ↔ [B,S,H,D]` keeps a split of H·D as a split of
// H); Transpose permutes; Expand broadcasts; Concat, Split and Slice need their axis
// whole. All are linear, so partial values pass through. The shape tensors they read
// are replicated values every rank computes (the partition stage makes them per-rank).
#include <algorithm>

#include "rules.h"

namespace tpc::shard::rules {

namespace {

// Folds of a reshape. A group's dims on both sides are runs of its atoms: the sizes
// between consecutive running products of either side (`[S, H·D] ↔ [S·H, D]` has the
// atoms S, H, D). A dim P that starts at an atom inside a dim M of the other side, after
// M's atoms of product `outer` (symbolic), splits as M in `outer` blocks each split N ways
// when that atom does. Calls fold(M's index, P's index, outer, the atom, whether M is the
// input's).
template <typename Fold>
void ForEachFold(const std::vector<ir::Dim>& in, const std::vector<ir::Dim>& y, Fold fold) {
  const auto groups = ReshapeGroups(in, y);
  if (!groups) return;
  for (const ReshapeGroup& g : *groups) {
    // The atoms, and the atom each dim of the group starts at.
    std::vector<ir::Dim> atoms;
    std::vector<size_t> in_start(in.size()), out_start(y.size());
    size_t i = g.in_begin, j = g.out_begin;
    ir::Dim a = in[i], b = y[j], done(1);
    bool ok = true;
    in_start[i] = out_start[j] = 0;
    while (ok) {
      const bool in_next = a == b || b.DivExact(a).has_value();
      const bool out_next = a == b || (!in_next && a.DivExact(b).has_value());
      const ir::Dim& at = in_next ? a : b;
      const auto atom = at.DivExact(done);
      if ((!in_next && !out_next) || !atom) {
        ok = false;
        break;
      }
      atoms.push_back(*atom);
      done = at;
      if (in_next && ++i < g.in_end) {
        in_start[i] = atoms.size();
        a = a * in[i];
      }
      if (out_next && ++j < g.out_end) {
        out_start[j] = atoms.size();
        b = b * y[j];
      }
      if (i == g.in_end || j == g.out_end) break;
    }
    if (!ok || i != g.in_end || j != g.out_end) continue;
    // Each dim of one side that starts inside a dim of the other.
    for (const bool plain_is_input : {true, false}) {
      const std::vector<size_t>& start = plain_is_input ? in_start : out_start;
      const std::vector<size_t>& other = plain_is_input ? out_start : in_start;
      const size_t begin = plain_is_input ? g.in_begin : g.out_begin;
      const size_t end = plain_is_input ? g.in_end : g.out_end;
      const size_t other_begin = plain_is_input ? g.out_begin : g.in_begin;
      const size_t other_end = plain_is_input ? g.out_end : g.in_end;
      for (size_t p = begin; p < end; ++p) {
        const size_t k = start[p];
        size_t m = other_begin;
        while (m + 1 < other_end && other[m + 1] <= k) ++m;
        if (other[m] == k) continue;  // both start at the atom: a plain split of each
        ir::Dim outer = atoms[other[m]];
        for (size_t t = other[m] + 1; t < k; ++t) outer = outer * atoms[t];
        if (!outer.is_static() && !outer.is_unknown()) fold(m, p, outer, atoms[k], !plain_is_input);
      }
    }
  }
}

}  // namespace

// Heads folded into the batch and back: `[B, H, S] → [B·H, S]` takes a split of H,
// S(1), to `B` blocks of H·S each split N ways, S(0/B) (and back). Only symbolic B: a
// static outer product is a plain split of the major dim or a blocked split.
void Reshape(const RuleContext& ctx, std::vector<Strategy>* out) {
  FactorSpec spec;
  std::vector<int> in_f;
  std::vector<int> out_f;
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  if (ReshapeFactors(ctx, in, y, &spec, &in_f, &out_f)) {
    spec.inputs.push_back(in_f);
    spec.outputs.push_back(out_f);
    AddFactorStrategies(ctx, spec, out);
  }
  ForEachFold(
      in, y,
      [&](size_t merged, size_t t, const ir::Dim& outer, const ir::Dim& atom,
          bool merged_is_input) {
        const ir::Dim& m = merged_is_input ? in[merged] : y[merged];
        if (!ctx.Divisible(atom) || !ctx.DivisibleInBlocks(m, outer)) return;
        const ir::Placement folded =
            ir::Placement::ShardInSymbolicBlocks(static_cast<int64_t>(merged), outer.ToString());
        const ir::Placement plain = ir::Placement::Shard(static_cast<int64_t>(t));
        Strategy s;
        s.name = absl::StrCat(merged_is_input ? "unfold d" : "fold d", t, " in ", outer.ToString(),
                              " blocks");
        s.inputs.assign(static_cast<size_t>(ctx.node().num_inputs()), ir::Placement::Replicate());
        s.inputs[0] = merged_is_input ? folded : plain;
        s.outputs = {merged_is_input ? plain : folded};
        s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
        AddNamedStrategy(ctx, std::move(s), out);
      });
  AddPartialStrategy(ctx, {0}, out);
}

std::vector<ir::Dim> ReshapeFoldedBlocks(const ir::Node& node) {
  std::vector<ir::Dim> out;
  const ir::Value* x = node.input(0);
  const ir::Value* y = node.output(0);
  if (x == nullptr || !x->type().shape || !y->type().shape) return out;
  ForEachFold(
      *x->type().shape, *y->type().shape,
      [&](size_t, size_t, const ir::Dim& outer, const ir::Dim&, bool) { out.push_back(outer); });
  return out;
}

void Transpose(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty()) {
    for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) perm.push_back(d);
  }
  if (perm.size() != in.size()) return;
  FactorSpecBuilder spec(ctx);
  for (size_t d = 0; d < perm.size(); ++d) {
    auto at = std::find(perm.begin(), perm.end(), static_cast<int64_t>(d));
    if (at == perm.end()) return;
    spec.Add(FactorSpec::Kind::kPass, {static_cast<int64_t>(d)}, {at - perm.begin()},
             "d" + std::to_string(d));
  }
  AddFactorStrategies(ctx, spec.Build(), out);
  AddPartialStrategy(ctx, {0}, out);
}

void Expand(const RuleContext& ctx, std::vector<Strategy>* out) {
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Pointwise({0}).Build(), out);
  AddPartialStrategy(ctx, {0}, out);
}

std::vector<int64_t> ExpandGroupCounts(const ir::Node& node, int64_t n) {
  std::vector<int64_t> out;
  const ir::Value* x = node.input(0);
  const ir::Value* y = node.output(0);
  if (x == nullptr || !x->type().shape || !y->type().shape) return out;
  const std::vector<ir::Dim>& in = *x->type().shape;
  const std::vector<ir::Dim>& to = *y->type().shape;
  // Input dims aligned to the output's trailing ones: [.., KV, 1, ..] → [.., KV, r, ..].
  const int64_t shift = static_cast<int64_t>(to.size()) - static_cast<int64_t>(in.size());
  for (int64_t i = 1; i < static_cast<int64_t>(in.size()); ++i) {
    const ir::Dim& kv = in[static_cast<size_t>(i - 1)];
    const ir::Dim& one = in[static_cast<size_t>(i)];
    const ir::Dim& repeated = to[static_cast<size_t>(i + shift)];
    if (!one.is_static() || one.value() != 1 || (repeated.is_static() && repeated.value() <= 1)) {
      continue;
    }
    if (kv.is_static() && kv.value() > 1 && kv.value() < n && n % kv.value() == 0) {
      out.push_back(kv.value());
    }
  }
  return out;
}

void Concat(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  const int64_t axis =
      NormalizeAxis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(y.size()));
  if (axis < 0) return;
  std::vector<FactorSpec::Kind> kinds(y.size(), FactorSpec::Kind::kPass);
  kinds[static_cast<size_t>(axis)] = FactorSpec::Kind::kNeedWhole;
  std::vector<int> all;
  for (int i = 0; i < ctx.num_inputs(); ++i) all.push_back(i);
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along(all, kinds).Build(), out);
  AddPartialStrategy(ctx, all, out);
  // Equal parts each split: the result is a blocked split.
  const int k = ctx.num_inputs();
  if (k < 2) return;
  const ir::Dim part = ctx.input_dims(0)[static_cast<size_t>(axis)];
  for (int i = 1; i < k; ++i) {
    if (!(ctx.input_dims(i)[static_cast<size_t>(axis)] == part)) return;
  }
  if (!ctx.Divisible(part) || !ctx.DivisibleInBlocks(y[static_cast<size_t>(axis)], k)) return;
  Strategy s;
  s.name = "concatenate split parts";
  s.inputs.assign(static_cast<size_t>(k), ir::Placement::Shard(axis));
  s.outputs = {ir::Placement::Shard(axis, k)};
  s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
  AddNamedStrategy(ctx, std::move(s), out);
}

void Split(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const int64_t axis =
      NormalizeAxis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(in.size()));
  if (axis < 0) return;
  std::vector<FactorSpec::Kind> kinds(in.size(), FactorSpec::Kind::kPass);
  kinds[static_cast<size_t>(axis)] = FactorSpec::Kind::kNeedWhole;
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  AddPartialStrategy(ctx, {0}, out);
  // Equal parts of a blocked split: rank r holds its slice of every part (a fused QKV
  // projection split Megatron's way); unequal ones, of a split in unequal blocks.
  const int k = ctx.node().num_outputs();
  if (k < 2) return;
  std::vector<ir::Dim> parts;
  for (int o = 0; o < k; ++o) parts.push_back(ctx.output_dims(o)[static_cast<size_t>(axis)]);
  for (const ir::Dim& part : parts) {
    if (!ctx.Divisible(part)) return;
  }
  const bool equal = std::all_of(parts.begin(), parts.end(),
                                 [&](const ir::Dim& part) { return part == parts[0]; });
  ir::Placement blocked = ir::Placement::Shard(axis, k);
  if (!equal) {
    blocked = ir::Placement::ShardInWeightedBlocks(axis, SplitBlockWeights(ctx.node()));
    if (!blocked.has_weighted_blocks()) return;  // sizes unknown (or not positive)
  }
  if (!ctx.DivisibleInBlocks(in[static_cast<size_t>(axis)], blocked.BlockUnits())) return;
  Strategy s;
  s.name = "split each part";
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), ir::Placement::Replicate());
  s.inputs[0] = blocked;
  s.outputs.assign(static_cast<size_t>(k), ir::Placement::Shard(axis));
  s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
  AddNamedStrategy(ctx, std::move(s), out);
}

std::optional<SliceBlock> FindSliceBlock(const ir::Node& node) {
  const ir::Value* x = node.input(0);
  const ir::Value* y = node.output(0);
  if (!x->type().shape || !y->type().shape || node.num_inputs() < 3) return std::nullopt;
  const std::vector<ir::Dim>& in = *x->type().shape;
  const std::vector<ir::Dim>& out = *y->type().shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  auto starts = KnownInts(node.input(1));
  auto ends = KnownInts(node.input(2));
  if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
  std::vector<int64_t> axes;
  if (auto a = KnownInts(node.optional_input(3))) {
    axes = *a;
  } else if (node.optional_input(3) != nullptr) {
    return std::nullopt;
  } else {
    for (size_t d = 0; d < starts->size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  std::optional<std::vector<int64_t>> steps;
  if (node.optional_input(4) != nullptr) {
    steps = KnownInts(node.optional_input(4));
    if (!steps) return std::nullopt;
  }
  if (axes.size() != starts->size() || (steps && steps->size() != axes.size())) return std::nullopt;
  std::optional<SliceBlock> found;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = NormalizeAxis(axes[i], rank);
    if (a < 0) return std::nullopt;
    if (in[static_cast<size_t>(a)] == out[static_cast<size_t>(a)]) continue;  // kept whole
    if (found || (steps && (*steps)[i] != 1) || !in[static_cast<size_t>(a)].is_static()) {
      return std::nullopt;
    }
    const int64_t size = in[static_cast<size_t>(a)].value();
    auto clamp = [size](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size); };
    const int64_t start = clamp((*starts)[i]);
    const int64_t len = clamp((*ends)[i]) - start;
    if (len <= 0 || size % len != 0 || start % len != 0 || size / len < 2) return std::nullopt;
    found = SliceBlock{a, static_cast<int64_t>(i), size / len};
  }
  return found;
}

int64_t SliceBlockCount(const ir::Node& node) {
  const auto block = FindSliceBlock(node);
  return block ? block->blocks : 0;
}

void Slice(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    auto known = ctx.input_ints(3);
    if (!known) {
      AddPartialStrategy(ctx, {0}, out);
      return;
    }
    axes = *known;
  } else {
    auto starts = ctx.input_ints(1);
    if (!starts) return;
    for (size_t d = 0; d < starts->size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  // The steps, when known: a step other than 1 reorders or thins the dim even where the
  // size stays (steps -1 over the whole dim reverse it: torch.flip).
  std::optional<std::vector<int64_t>> steps;
  if (ctx.has_input(4)) {
    steps = ctx.input_ints(4);
    if (!steps || steps->size() != axes.size()) steps = std::vector<int64_t>(axes.size(), 0);
  }
  std::vector<bool> whole(in.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = NormalizeAxis(axes[i], rank);
    if (a < 0) return;
    // A slice that keeps the whole dim in order does not constrain it.
    const bool in_order = !steps || (*steps)[i] == 1;
    whole[static_cast<size_t>(a)] =
        !in_order || !(in[static_cast<size_t>(a)] == y[static_cast<size_t>(a)]);
  }
  std::vector<FactorSpec::Kind> kinds;
  for (bool w : whole) kinds.push_back(w ? FactorSpec::Kind::kNeedWhole : FactorSpec::Kind::kPass);
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  AddPartialStrategy(ctx, {0}, out);
  // One of k equal blocks (a fused projection cut by Slices): on a blocked split each
  // rank holds its part of every block, so the slice is this rank's part of the block.
  const auto block = FindSliceBlock(ctx.node());
  if (!block) return;
  const ir::Dim& whole_dim = in[static_cast<size_t>(block->axis)];
  if (!ctx.Divisible(y[static_cast<size_t>(block->axis)]) ||
      !ctx.DivisibleInBlocks(whole_dim, block->blocks)) {
    return;
  }
  Strategy s;
  s.name = "take one part";
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), ir::Placement::Replicate());
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) s.inputs[static_cast<size_t>(i)] = std::nullopt;
  }
  s.inputs[0] = ir::Placement::Shard(block->axis, block->blocks);
  s.outputs = {ir::Placement::Shard(block->axis)};
  s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
  AddNamedStrategy(ctx, std::move(s), out);
}

// Shape and Size read only the shape: any placement of the input will do (the
// partition stage gives the global shape).
void ShapeOf(const RuleContext& ctx, std::vector<Strategy>* out) {
  Strategy s;
  s.name = "shape only";
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), std::nullopt);
  s.outputs.assign(static_cast<size_t>(ctx.node().num_outputs()), ir::Placement::Replicate());
  AddNamedStrategy(ctx, std::move(s), out);
}

// Whatever dim of the output holds the features, through the permutation.
std::optional<int64_t> TransposeFeatureDim(
    const ir::Node& node, int input, bool /*colwise*/,
    const std::function<std::optional<int64_t>(const ir::Value*)>& of_output) {
  if (input != 0) return std::nullopt;
  const int64_t rank = node.input(0)->type().rank();
  std::vector<int64_t> perm = node.attr_ints("perm");
  if (perm.empty()) {
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  auto d = of_output(node.output(0));
  if (!d || *d < 0 || *d >= static_cast<int64_t>(perm.size())) return std::nullopt;
  return perm[static_cast<size_t>(*d)];
}

int64_t SplitBlockCount(const ir::Node& node) {
  return node.num_outputs() >= 2 ? node.num_outputs() : 0;
}

std::vector<int64_t> SplitBlockWeights(const ir::Node& node) {
  if (node.num_outputs() < 2) return {};
  std::vector<int64_t> sizes;
  if (node.has_attr("split")) {
    sizes = node.attr_ints("split");
  } else if (auto known = KnownInts(node.optional_input(1))) {
    sizes = *known;
  }
  if (static_cast<int>(sizes.size()) != node.num_outputs()) return {};
  return sizes;  // (ShardInWeightedBlocks reduces them, and gives equal ones no weights)
}

std::optional<int64_t> ConcatAxis(const ir::Node& node) {
  const ir::Value* y = node.output(0);
  if (!y->type().has_rank()) return std::nullopt;
  const int64_t axis = NormalizeAxis(node.attr_int("axis", 0), y->type().rank());
  return axis < 0 ? std::nullopt : std::optional<int64_t>(axis);
}

int64_t ConcatBlockCount(const ir::Node& node) {
  return node.num_inputs() >= 2 ? node.num_inputs() : 0;
}

}  // namespace tpc::shard::rules
