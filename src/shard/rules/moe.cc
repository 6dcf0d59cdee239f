// onnxruntime's MoE (mixture of experts), split as Megatron splits an MLP, in every expert
// at once: each rank holds its share of every expert's inner dim (FC1's rows, FC2's
// columns; SwiGLU's gate and linear rows are interleaved pairs, so a contiguous share of
// an even size keeps them together), routes every token itself (the router's logits are
// every rank's, so every rank picks the same experts and weights), and gives partial sums
// of the output; FC2's bias arrives partial (added once). Or split by tokens (the input's
// first dim and the router's rows, which are those tokens' rows in order). QMoE the same,
// its codes and scales with the weights they hold.
#include <string>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::shard::rules {

namespace {

// Where an MoE-like op's operands are: MoE's, or QMoE's with the scales of its codes.
struct MoeInputs {
  int fc1, fc1_bias, fc2, fc2_bias;
  int fc1_scales = -1, fc2_scales = -1;  // QMoE
  int first_unsupported;                 // FC3 and what follows
};
constexpr MoeInputs kMoeInputs{
    .fc1 = 2, .fc1_bias = 3, .fc2 = 4, .fc2_bias = 5, .first_unsupported = 6};
constexpr MoeInputs kQMoeInputs{.fc1 = 2,
                                .fc1_bias = 4,
                                .fc2 = 5,
                                .fc2_bias = 7,
                                .fc1_scales = 3,
                                .fc2_scales = 6,
                                .first_unsupported = 8};

void AddMoeStrategies(const RuleContext& ctx, const MoeInputs& in, std::vector<Strategy>* out) {
  for (int i = in.first_unsupported; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) return;
  }
  if (!ctx.has_input(in.fc1) || !ctx.has_input(in.fc2) || ctx.input_rank(0) < 2 ||
      ctx.input_rank(1) != 2 || ctx.input_rank(in.fc1) != 3 || ctx.input_rank(in.fc2) != 3 ||
      !OutputsTyped(ctx)) {
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
  // The activations the kernels have, each of one FC1 row (or, SwiGLU's and GeGLU's, of a
  // pair of adjacent rows: interleaved, swiglu_fusion = 1): a contiguous share of rows
  // keeps them.
  const std::string act = ctx.node().attr_string("activation_type", "relu");
  const bool per_row = act == "relu" || act == "gelu" || act == "silu" || act == "identity";
  const bool gated = act == "swiglu" || act == "geglu";
  if (!per_row && !(gated && ctx.node().attr_int("swiglu_fusion", 0) == 1)) return;
  // The inner dim I: FC2's columns (QMoE: their bytes, and whole blocks of them when the
  // scales are per block; one scale per row, [E, H], is every rank's).
  if (!ctx.Divisible(ctx.input_dims(in.fc2)[2]) || !ctx.Divisible(ctx.input_dims(in.fc1)[1])) {
    return;
  }
  const int scales_rank = in.fc2_scales >= 0 && ctx.has_input(in.fc2_scales)
                              ? static_cast<int>(ctx.input_rank(in.fc2_scales))
                              : 0;
  if (in.fc2_scales >= 0 && scales_rank != 2 && scales_rank != 3) return;
  const bool fc2_blocks = scales_rank == 3;
  if (fc2_blocks && !ctx.Divisible(ctx.input_dims(in.fc2_scales)[2])) return;
  Strategy s = ReplicatedInputs(ctx, "split every expert's inner dim");
  s.inputs[in.fc1] = ir::Placement::Shard(1);  // FC1 [E, F·I, H]
  if (ctx.has_input(in.fc1_bias)) s.inputs[in.fc1_bias] = ir::Placement::Shard(1);
  if (in.fc1_scales >= 0 && ctx.has_input(in.fc1_scales)) {
    s.inputs[in.fc1_scales] = ir::Placement::Shard(1);
  }
  s.inputs[in.fc2] = ir::Placement::Shard(2);  // FC2 [E, H, I]
  if (fc2_blocks) s.inputs[in.fc2_scales] = ir::Placement::Shard(2);
  if (ctx.has_input(in.fc2_bias)) {
    s.inputs[in.fc2_bias] = ir::Placement::Partial(ir::ReduceOp::kSum);
  }
  s.outputs = {ir::Placement::Partial(ir::ReduceOp::kSum)};
  s.compute_fraction = 1.0 / n;
  AddNamedStrategy(ctx, std::move(s), out);
}

}  // namespace

void MoE(const RuleContext& ctx, std::vector<Strategy>* out) {
  AddMoeStrategies(ctx, kMoeInputs, out);
}

void QMoE(const RuleContext& ctx, std::vector<Strategy>* out) {
  AddMoeStrategies(ctx, kQMoeInputs, out);
}

// Per token, its k experts' FC1 (F·I · H multiply-adds) and FC2 (H · I); QMoE's codes
// hold 8 / bits weights a byte.
double MoEFlops(const RuleContext& ctx) {
  const bool quantized = ctx.node().op_type() == "QMoE";
  const int fc2 = quantized ? 5 : 4;
  if (ctx.input_rank(2) != 3 || ctx.input_rank(fc2) != 3) return OutputElements(ctx);
  const std::vector<ir::Dim>& w1 = ctx.input_dims(2);
  const std::vector<ir::Dim>& w2 = ctx.input_dims(fc2);
  if (ctx.Size(w2[1]) <= 0) return OutputElements(ctx);
  // Weights a byte of FC `fc`'s codes (1 for float weights).
  auto per_byte = [&](int fc) {
    if (!quantized) return 1.0;
    const int64_t bits = ctx.node().attr_int(absl::StrCat("fc", fc, "_expert_weight_bits"),
                                             ctx.node().attr_int("expert_weight_bits", 4));
    return 8.0 / static_cast<double>(bits);
  };
  const double tokens = OutputElements(ctx) / ctx.Size(w2[1]);
  const double k = static_cast<double>(ctx.node().attr_int("k", 1));
  return 2 * tokens * k *
         (per_byte(1) * ctx.Size(w1[1]) * ctx.Size(w1[2]) +
          per_byte(2) * ctx.Size(w2[1]) * ctx.Size(w2[2]));
}

}  // namespace tpc::shard::rules
