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
  FactorSpec spec;
  std::vector<int> inf;
  std::vector<int> yf;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    const auto kind = reduced ? KindOf(node.op_type()) : FactorSpec::Kind::kPass;
    inf.push_back(spec.AddFactor(kind, in[static_cast<size_t>(d)], "d" + std::to_string(d)));
    if (!reduced) {
      yf.push_back(inf.back());
    } else if (keepdims) {
      yf.push_back(-1);
    }
  }
  spec.inputs.push_back(inf);
  spec.outputs.push_back(yf);
  AddFactorStrategies(ctx, spec, out);
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
  FactorSpec spec;
  std::vector<int> inf;
  std::vector<int> yf;
  for (int64_t d = 0; d < rank; ++d) {
    const auto kind = d == axis ? FactorSpec::Kind::kNeedWhole : FactorSpec::Kind::kPass;
    inf.push_back(spec.AddFactor(kind, in[static_cast<size_t>(d)], "d" + std::to_string(d)));
    if (d != axis) {
      yf.push_back(inf.back());
    } else if (keepdims) {
      yf.push_back(-1);
    }
  }
  spec.inputs.push_back(inf);
  spec.outputs.push_back(yf);
  AddFactorStrategies(ctx, spec, out);
}

}  // namespace tpc::shard::rules
