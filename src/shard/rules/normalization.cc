// Softmax, LogSoftmax, LayerNormalization, TopK, CumSum: the reduced dims must be
// whole; other dims pass through. Softmax and LogSoftmax also run vocab-parallel on a
// split axis (all-reduce of the row max and of the row sum of exponentials).
#include "rules.h"

namespace tpc::shard::rules {
namespace {

// Input 0's dims, `whole` ones need-whole; the outputs carry the dims that keep their
// size (TopK's values and indices, LayerNorm's mean with 1s in the normalized dims).
FactorSpec AxisSpec(const RuleContext& ctx, const std::vector<bool>& whole) {
  std::vector<FactorSpec::Kind> kinds;
  for (bool w : whole) kinds.push_back(w ? FactorSpec::Kind::kNeedWhole : FactorSpec::Kind::kPass);
  return FactorSpecBuilder(ctx).Along({0}, kinds).Build();
}

}  // namespace

void Softmax(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = NormalizeAxis(ctx.node().attr_int("axis", -1), rank);
  if (axis < 0) return;
  std::vector<bool> whole(in.size(), false);
  whole[static_cast<size_t>(axis)] = true;
  AddFactorStrategies(ctx, AxisSpec(ctx, whole), out);
  if (ctx.Divisible(in[static_cast<size_t>(axis)])) {
    Strategy s;
    s.name = "vocab-parallel softmax";
    s.lowering = LowerVocabParallelSoftmax;
    s.inputs = {ir::Placement::Shard(axis)};
    s.outputs = {ir::Placement::Shard(axis)};
    s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
    const double row = ctx.Bytes(*ctx.node().output(0)) / ctx.Size(in[static_cast<size_t>(axis)]);
    s.internal = {{CollectiveKind::kAllReduce, ir::ReduceOp::kMax, row},
                  {CollectiveKind::kAllReduce, ir::ReduceOp::kSum, row}};
    AddNamedStrategy(ctx, std::move(s), out);
  }
}

void LayerNormalization(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = NormalizeAxis(ctx.node().attr_int("axis", -1), rank);
  if (axis < 0) return;
  std::vector<bool> whole(in.size(), false);
  for (int64_t d = axis; d < rank; ++d) whole[static_cast<size_t>(d)] = true;
  // Scale and bias stay whole (they cover only the normalized dims).
  AddFactorStrategies(ctx, AxisSpec(ctx, whole), out);
}

// onnxruntime's SkipLayerNormalization / SkipSimplifiedLayerNormalization: the norm of
// input + skip (+ bias) over the last dim. Rows pass through input, skip and every output
// (mean and inv_std_var with a 1 in the hidden dim); gamma, beta and bias stay whole.
void SkipLayerNormalization(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  if (in.empty()) return;
  // A skip of lower rank ([seq, hidden] to a [batch, seq, hidden] input) broadcasts as an
  // elementwise operand does (Pointwise); the hidden dim, the norm's, stays whole.
  FactorSpec spec = FactorSpecBuilder(ctx).Pointwise({0, 1}).Build();
  spec.factors.back().kind = FactorSpec::Kind::kNeedWhole;
  AddFactorStrategies(ctx, spec, out);
}

void AxisWhole(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (ctx.node().op_type() == "CumSum") {  // the axis is an input
    auto known = ctx.input_ints(1);
    if (!known || known->size() != 1) return;
    axis = (*known)[0];
  }
  axis = NormalizeAxis(axis, rank);
  if (axis < 0) return;
  std::vector<bool> whole(in.size(), false);
  whole[static_cast<size_t>(axis)] = true;
  AddFactorStrategies(ctx, AxisSpec(ctx, whole), out);
}

}  // namespace tpc::shard::rules
