// Elementwise operators: dims map one to one (with numpy broadcasting), and partial
// sums pass through the operators that are linear in an operand.
#include "rules.h"

namespace tpc::shard::rules {
namespace {

std::vector<int> AllInputs(const RuleContext& ctx) {
  std::vector<int> v;
  for (int i = 0; i < ctx.num_inputs(); ++i) v.push_back(i);
  return v;
}

bool FloatOutputs(const RuleContext& ctx) {
  for (const ir::Value* o : ctx.node().outputs()) {
    if (!ir::IsFloating(o->type().dtype)) return false;
  }
  return true;
}

}  // namespace

void Unary(const RuleContext& ctx, std::vector<Strategy>* out) {
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Pointwise(AllInputs(ctx)).Build(), out);
}

// Identity-like ops (Neg, Identity, Dropout): linear in their input.
void UnaryLinear(const RuleContext& ctx, std::vector<Strategy>* out) {
  Unary(ctx, out);
  AddPartialStrategy(ctx, {0}, out);
}

void Binary(const RuleContext& ctx, std::vector<Strategy>* out) {
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Pointwise(AllInputs(ctx)).Build(), out);
}

// P + P → P; P + R is not P, but R → P(sum) is free, so that case is P + P too.
void AddSub(const RuleContext& ctx, std::vector<Strategy>* out) {
  Binary(ctx, out);
  if (FloatOutputs(ctx)) AddPartialStrategy(ctx, AllInputs(ctx), out);
}

// onnxruntime's GatedAdd, X + Y · gate (the gate [..., 1] broadcast along the rows): P + P
// · R → P, linear in X and Y together (the routed experts' and the shared expert's
// partial sums joined before one all-reduce).
void GatedAdd(const RuleContext& ctx, std::vector<Strategy>* out) {
  Binary(ctx, out);
  if (FloatOutputs(ctx)) AddPartialStrategy(ctx, {0, 1}, out);
}

// P × R → P, R × P → P.
void Mul(const RuleContext& ctx, std::vector<Strategy>* out) {
  Binary(ctx, out);
  if (!FloatOutputs(ctx)) return;
  AddPartialStrategy(ctx, {0}, out);
  AddPartialStrategy(ctx, {1}, out);
}

// P / R → P.
void Div(const RuleContext& ctx, std::vector<Strategy>* out) {
  Binary(ctx, out);
  if (FloatOutputs(ctx)) AddPartialStrategy(ctx, {0}, out);
}

// Where(c, P, P) → P: selecting between two sums is the sum of the selections.
void Where(const RuleContext& ctx, std::vector<Strategy>* out) {
  Binary(ctx, out);
  if (FloatOutputs(ctx)) AddPartialStrategy(ctx, {1, 2}, out);
}

// A float-to-float cast is linear (up to rounding); others are plain unary.
void Cast(const RuleContext& ctx, std::vector<Strategy>* out) {
  Unary(ctx, out);
  if (ir::IsFloating(ctx.input_type(0).dtype) && FloatOutputs(ctx)) {
    AddPartialStrategy(ctx, {0}, out);
  }
}

// CastLike(x, target_type): Cast to target_type's element type, which is all it reads of
// it; so target_type takes no part in the dims, and any placement of it will do.
void CastLike(const RuleContext& ctx, std::vector<Strategy>* out) {
  std::vector<Strategy> local;
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Pointwise({0}).Build(), &local);
  if (ir::IsFloating(ctx.input_type(0).dtype) && FloatOutputs(ctx)) {
    AddPartialStrategy(ctx, {0}, &local);
  }
  for (Strategy& s : local) {
    if (s.inputs.size() > 1) s.inputs[1] = std::nullopt;
    out->push_back(std::move(s));
  }
}

std::optional<int64_t> BiasFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&) {
  if (node.input(input)->type().rank() == 1 && colwise) return 0;
  return std::nullopt;
}

}  // namespace tpc::shard::rules
