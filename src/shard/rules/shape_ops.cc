// Shape operators. Reshape, Flatten, Squeeze and Unsqueeze map split dims through the
// factorisation of sizes (`[B,S,H·D] ↔ [B,S,H,D]` keeps a split of H·D as a split of
// H); Transpose permutes; Expand broadcasts; Concat, Split and Slice need their axis
// whole. All are linear, so partial values pass through. The shape tensors they read
// are replicated values every rank computes (the partition stage makes them per-rank).
#include <algorithm>

#include "rules.h"

namespace tpc::shard::rules {

void Reshape(const RuleContext& ctx, std::vector<Strategy>* out) {
  FactorSpec spec;
  std::vector<int> in_f;
  std::vector<int> out_f;
  if (ReshapeFactors(ctx, ctx.input_dims(0), ctx.output_dims(0), &spec, &in_f, &out_f)) {
    spec.inputs.push_back(in_f);
    spec.outputs.push_back(out_f);
    AddFactorStrategies(ctx, spec, out);
  }
  AddPartialStrategy(ctx, {0}, out);
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
  // projection split Megatron's way).
  const int k = ctx.node().num_outputs();
  if (k < 2) return;
  const ir::Dim part = ctx.output_dims(0)[static_cast<size_t>(axis)];
  for (int o = 1; o < k; ++o) {
    if (!(ctx.output_dims(o)[static_cast<size_t>(axis)] == part)) return;
  }
  if (!ctx.Divisible(part) || !ctx.DivisibleInBlocks(in[static_cast<size_t>(axis)], k)) return;
  Strategy s;
  s.name = "split each part";
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), ir::Placement::Replicate());
  s.inputs[0] = ir::Placement::Shard(axis, k);
  s.outputs.assign(static_cast<size_t>(k), ir::Placement::Shard(axis));
  s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
  AddNamedStrategy(ctx, std::move(s), out);
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
  std::vector<bool> whole(in.size(), false);
  for (int64_t a : axes) {
    a = NormalizeAxis(a, rank);
    if (a < 0) return;
    // A slice that keeps the whole dim does not constrain it.
    whole[static_cast<size_t>(a)] = !(in[static_cast<size_t>(a)] == y[static_cast<size_t>(a)]);
  }
  std::vector<FactorSpec::Kind> kinds;
  for (bool w : whole) kinds.push_back(w ? FactorSpec::Kind::kNeedWhole : FactorSpec::Kind::kPass);
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  AddPartialStrategy(ctx, {0}, out);
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

int64_t ConcatBlockCount(const ir::Node& node) {
  return node.num_inputs() >= 2 ? node.num_inputs() : 0;
}

}  // namespace tpc::shard::rules
