// Gather: `data[.., a, ..]` indexed on axis a by `indices`. Data dims other than a and
// the indices' dims pass through. A table split on the gathered axis (the vocab of an
// embedding) gives a masked lookup: each rank looks up the ids in its rows, zeroes the
// others, and the result is P(sum).
#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::shard::rules {

void Gather(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& data = ctx.input_dims(0);
  const std::vector<ir::Dim>& idx = ctx.input_dims(1);
  const int64_t axis =
      NormalizeAxis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(data.size()));
  if (axis < 0) return;
  FactorSpec spec;
  using Kind = FactorSpec::Kind;
  std::vector<int> df(data.size(), -1);
  std::vector<int> yf;
  for (int64_t d = 0; d < axis; ++d) {
    df[static_cast<size_t>(d)] =
        spec.AddFactor(Kind::kPass, data[static_cast<size_t>(d)], absl::StrCat("data d", d));
    yf.push_back(df[static_cast<size_t>(d)]);
  }
  std::vector<int> inf;
  for (size_t d = 0; d < idx.size(); ++d) {
    inf.push_back(spec.AddFactor(Kind::kPass, idx[d], absl::StrCat("indices d", d)));
    yf.push_back(inf.back());
  }
  for (size_t d = static_cast<size_t>(axis) + 1; d < data.size(); ++d) {
    df[d] = spec.AddFactor(Kind::kPass, data[d], absl::StrCat("data d", d));
    yf.push_back(df[d]);
  }
  spec.inputs = {df, inf};
  spec.outputs = {yf};
  AddFactorStrategies(ctx, spec, out);
  AddPartialStrategy(ctx, {0}, out);

  const ir::DType t = ctx.node().output(0)->type().dtype;
  // The masked lookup is lowered for the embedding form: gathering rows (axis 0).
  if (axis == 0 && ir::IsFloating(t) && ctx.Divisible(data[0])) {
    Strategy s;
    s.name = "vocab-parallel (masked lookup)";
    s.lowering = LowerMaskedGather;
    s.inputs = {ir::Placement::Shard(axis), ir::Placement::Replicate()};
    s.outputs = {ir::Placement::Partial(ir::ReduceOp::kSum)};
    s.compute_fraction = 1.0;
    AddNamedStrategy(ctx, std::move(s), out);
  }
}

// An embedding table [vocab, hidden]: colwise splits the hidden dim, rowwise the vocab.
std::optional<int64_t> GatherFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&) {
  if (input != 0 || node.input(0)->type().rank() != 2) return std::nullopt;
  return colwise ? 1 : 0;
}

}  // namespace tpc::shard::rules
