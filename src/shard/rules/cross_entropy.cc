// Cross-entropy on logits split by vocab (Megatron's vocab-parallel loss): each rank
// takes the max of its logits → all-reduce max; the sum of exponentials → all-reduce
// sum; the target logit where the target is in its rows → all-reduce sum. The loss is
// then the same on every rank (R).
#include "rules.h"

namespace tpc::shard::rules {
namespace {

// Bytes of one per-row float vector (the rows are all dims but the class dim 1).
double RowBytes(const RuleContext& ctx) {
  const std::vector<ir::Dim>& scores = ctx.input_dims(0);
  double rows = 4;
  for (size_t d = 0; d < scores.size(); ++d) {
    if (d != 1) rows *= ctx.Size(scores[d]);
  }
  return rows;
}

}  // namespace

void SoftmaxCrossEntropyLoss(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& scores = ctx.input_dims(0);
  if (scores.size() < 2 || !ctx.Divisible(scores[1])) return;
  Strategy s;
  s.name = "vocab-parallel loss";
  s.lowering = LowerVocabParallelLoss;
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), ir::Placement::Replicate());
  s.inputs[0] = ir::Placement::Shard(1);
  s.outputs.push_back(ir::Placement::Replicate());
  if (ctx.node().num_outputs() > 1) s.outputs.push_back(ir::Placement::Shard(1));  // log_prob
  s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
  const double row = RowBytes(ctx);
  s.internal = {{CollectiveKind::kAllReduce, ir::ReduceOp::kMax, row},
                {CollectiveKind::kAllReduce, ir::ReduceOp::kSum, row},
                {CollectiveKind::kAllReduce, ir::ReduceOp::kSum, row}};
  AddNamedStrategy(ctx, std::move(s), out);
}

// NLL on log-probabilities split by class: each rank picks the targets in its rows
// (zero elsewhere), so the result is P(sum) for every reduction (the mean divides by
// the global count of non-ignored targets, which every rank knows).
void NegativeLogLikelihoodLoss(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& input = ctx.input_dims(0);
  if (input.size() < 2 || !ctx.Divisible(input[1])) return;
  Strategy s;
  s.name = "vocab-parallel pick";
  s.lowering = LowerVocabParallelNll;
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), ir::Placement::Replicate());
  s.inputs[0] = ir::Placement::Shard(1);
  s.outputs.push_back(ir::Placement::Partial(ir::ReduceOp::kSum));
  s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
  AddNamedStrategy(ctx, std::move(s), out);
}

}  // namespace tpc::shard::rules
