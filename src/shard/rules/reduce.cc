// Reductions: reducing a split dim gives a partial value of the reduction's kind
// (sum → P(sum), mean → P(avg), max → P(max), min → P(min)); reductions with no
// partial form (prod, L2, log-sum-exp) and the arg-reductions need the dim whole.
#include <algorithm>

#include "rules.h"

namespace tpc::shard::rules {
namespace {

FactorSpec::Kind KindOf(const std::string& op) {
  using Kind = FactorSpec::Kind;
  if (op == "ReduceSum") return Kind::kReduceSum;
  if (op == "ReduceMean") return Kind::kReduceAvg;
  if (op == "ReduceMax") return Kind::kReduceMax;
  if (op == "ReduceMin") return Kind::kReduceMin;
  return Kind::kNeedWhole;
}

}  // namespace

void Reduce(const RuleContext& ctx, std::vector<Strategy>* out) {
  const ir::Node& node = ctx.node();
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes = node.attr_ints("axes");
  if (!node.has_attr("axes") && ctx.has_input(1)) {
    auto known = ctx.input_ints(1);
    if (!known) return;  // axes computed at run time: replicate only
    axes = *known;
  }
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  if (axes.empty()) {
    if (node.attr_int("noop_with_empty_axes", 0) != 0) return;
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) {
    a = NormalizeAxis(a, rank);
    if (a < 0) return;
  }
  std::vector<FactorSpec::Kind> kinds(in.size(), FactorSpec::Kind::kPass);
  for (int64_t a : axes) kinds[static_cast<size_t>(a)] = KindOf(node.op_type());
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds, !keepdims).Build(), out);
  if (node.op_type() == "ReduceSum" || node.op_type() == "ReduceMean") {
    AddPartialStrategy(ctx, {0}, out);
  }
}

// ArgMax/ArgMin: the axis must be whole.
void ArgReduce(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = NormalizeAxis(ctx.node().attr_int("axis", 0), rank);
  if (axis < 0) return;
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  std::vector<FactorSpec::Kind> kinds(in.size(), FactorSpec::Kind::kPass);
  kinds[static_cast<size_t>(axis)] = FactorSpec::Kind::kNeedWhole;
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds, !keepdims).Build(), out);
}

}  // namespace tpc::shard::rules
