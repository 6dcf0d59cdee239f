// QuantizeLinear and DequantizeLinear: elementwise in x. A per-tensor scale and zero
// point (scalars) stay whole on every rank; a per-axis one (1-D, as long as x's `axis`)
// is split with that axis. Blocked quantization (block_size > 0: a scale as large as x
// with one dim divided into blocks) gets no split here (it runs replicated). Neither
// op is linear (the zero point), so a partial x is never passed through.
#include <optional>
#include <string>

#include "rules.h"

namespace tpc::shard::rules {

void QuantizeLinear(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (!OutputsTyped(ctx) || ctx.node().attr_int("block_size", 0) != 0) return;
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t scale_rank = ctx.input_type(1).rank();
  int64_t axis = -1;  // none: per tensor
  if (scale_rank == 1) {
    axis = NormalizeAxis(ctx.node().attr_int("axis", 1), rank);
    if (axis < 0 || !(ctx.input_dims(1)[0] == x[static_cast<size_t>(axis)])) return;
  } else if (scale_rank != 0) {
    return;
  }
  using Kind = FactorSpec::Kind;
  FactorSpecBuilder spec(ctx);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t scale_dim = d == axis ? 0 : kNone;
    spec.Add(Kind::kPass, {d, scale_dim, scale_dim}, {d}, "d" + std::to_string(d));
  }
  AddFactorStrategies(ctx, spec.Build(), out);
}

// onnxruntime's GatherBlockQuantized (the builder's tied int4 embedding): rows of a table
// of codes [rows, K · bits / 8], scales [rows, blocks] and packed zero points gathered by
// `indices`. The indices' dims pass to the output; the table's K (its code bytes, scales
// and zero points with it) splits the output's last dim when each rank's share is whole
// blocks (and whole bytes of packed zero points); or its rows split, a masked lookup as
// Gather's (embedding.cc).
void GatherBlockQuantized(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (!OutputsTyped(ctx) || ctx.input_type(0).rank() != 2 || ctx.input_type(2).rank() != 2) {
    return;
  }
  const std::vector<ir::Dim>& idx = ctx.input_dims(1);
  const int64_t rank = static_cast<int64_t>(idx.size());
  using Kind = FactorSpec::Kind;
  FactorSpecBuilder spec(ctx);
  for (int64_t d = 0; d < rank; ++d) {
    spec.Add(Kind::kPass, {kNone, d}, {d}, "indices d" + std::to_string(d));
  }
  const ir::Dim& blocks = ctx.input_dims(2)[1];
  const int64_t bits = ctx.node().attr_int("bits", 4);
  const bool zero_points = ctx.has_input(3);
  if (blocks.is_static() && ctx.Divisible(blocks) &&
      (!zero_points || (blocks.value() / ctx.n() * bits) % 8 == 0)) {
    spec.Add(Kind::kPass, {1, kNone, 1, zero_points ? 1 : kNone}, {rank}, "k (blocks)");
  }
  AddFactorStrategies(ctx, spec.Build(), out);
  // The table's rows split (a tied embedding's vocab, as the logits' MatMulNBits splits its
  // columns): Gather's masked lookup, each rank's rows with their scales and zero points.
  const std::vector<ir::Dim>& table = ctx.input_dims(0);
  if (ir::IsFloating(ctx.node().output(0)->type().dtype) && ctx.Divisible(table[0])) {
    Strategy s;
    s.name = "vocab-parallel (masked lookup)";
    s.lowering = LowerMaskedGather;
    s.inputs = {ir::Placement::Shard(0), ir::Placement::Replicate(), ir::Placement::Shard(0)};
    if (ctx.num_inputs() > 3) {  // zero points, or an explicitly absent fourth input
      s.inputs.push_back(zero_points ? std::optional<ir::Placement>(ir::Placement::Shard(0))
                                     : std::nullopt);
    }
    s.outputs = {ir::Placement::Partial(ir::ReduceOp::kSum)};
    s.compute_fraction = 1.0;
    AddNamedStrategy(ctx, std::move(s), out);
  }
}

}  // namespace tpc::shard::rules
