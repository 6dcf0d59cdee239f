// onnxruntime's MoE (mixture of experts), split as Megatron splits an MLP, in every expert
// at once: each rank holds its share of every expert's inner dim (FC1's rows, FC2's
// columns; SwiGLU's gate and linear rows are interleaved pairs, so a contiguous share of
// an even size keeps them together), routes every token itself (the router's logits are
// every rank's, so every rank picks the same experts and weights), and gives partial sums
// of the output; FC2's bias arrives partial (added once). Or split by tokens (the input's
// first dim and the router's rows, which are those tokens' rows in order).
#include <string>

#include "rules.h"

namespace tpc::shard::rules {

void MoE(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (!ctx.has_input(2) || !ctx.has_input(4) || ctx.has_input(6) || ctx.has_input(7) ||
      ctx.input_rank(0) < 2 || ctx.input_rank(1) != 2 || ctx.input_rank(2) != 3 ||
      ctx.input_rank(4) != 3 || !OutputsTyped(ctx)) {
    return;
  }
  const double n = static_cast<double>(ctx.n());
  if (ctx.Divisible(ctx.input_dims(0)[0]) && ctx.Divisible(ctx.input_dims(1)[0])) {
    Strategy s = ReplicatedInputs(ctx, "split tokens");
    s.inputs[0] = s.inputs[1] = ir::Placement::Shard(0);
    s.outputs = {ir::Placement::Shard(0)};
    s.compute_fraction = 1.0 / n;
    AddNamedStrategy(ctx, std::move(s), out);
  }
  // The activations the kernels have, each of one FC1 row (or, SwiGLU's, of a pair of
  // adjacent rows: interleaved, swiglu_fusion = 1): a contiguous share of rows keeps them.
  const std::string act = ctx.node().attr_string("activation_type", "relu");
  const bool per_row = act == "relu" || act == "gelu" || act == "silu" || act == "identity";
  if (!per_row && !(act == "swiglu" && ctx.node().attr_int("swiglu_fusion", 0) == 1)) return;
  if (!ctx.Divisible(ctx.input_dims(4)[2])) return;  // the inner dim I
  Strategy s = ReplicatedInputs(ctx, "split every expert's inner dim");
  s.inputs[2] = ir::Placement::Shard(1);  // FC1 [E, F·I, H]
  if (ctx.has_input(3)) s.inputs[3] = ir::Placement::Shard(1);
  s.inputs[4] = ir::Placement::Shard(2);  // FC2 [E, H, I]
  if (ctx.has_input(5)) s.inputs[5] = ir::Placement::Partial(ir::ReduceOp::kSum);
  s.outputs = {ir::Placement::Partial(ir::ReduceOp::kSum)};
  s.compute_fraction = 1.0 / n;
  AddNamedStrategy(ctx, std::move(s), out);
}

// Per token, its k experts' FC1 (F·I · H multiply-adds) and FC2 (H · I).
double MoEFlops(const RuleContext& ctx) {
  if (ctx.input_rank(2) != 3 || ctx.input_rank(4) != 3) return OutputElements(ctx);
  const std::vector<ir::Dim>& w1 = ctx.input_dims(2);
  const std::vector<ir::Dim>& w2 = ctx.input_dims(4);
  if (ctx.Size(w2[1]) <= 0) return OutputElements(ctx);
  const double tokens = OutputElements(ctx) / ctx.Size(w2[1]);
  const double k = static_cast<double>(ctx.node().attr_int("k", 1));
  return 2 * tokens * k * (ctx.Size(w1[1]) * ctx.Size(w1[2]) + ctx.Size(w2[1]) * ctx.Size(w2[2]));
}

}  // namespace tpc::shard::rules
