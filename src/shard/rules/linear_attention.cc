// Gated DeltaNet's layer (Qwen 3.5, as onnxruntime-genai's builder writes it): the
// recurrence (LinearAttention), its gates (LinearAttentionGate) and the gated per-head
// norm of its output (GatedRMSNorm). Split by heads as Megatron splits attention (each
// rank its query, key and value heads and their states), or by batch.
#include <algorithm>
#include <string>
#include <vector>

#include "rules.h"

namespace tpc::shard::rules {
namespace {

using Kind = FactorSpec::Kind;

}  // namespace

// onnxruntime's LinearAttention(query [B, T, Hq · dk], key [B, T, Hk · dk], value [B, T,
// Hv · dv], past_state [B, Hv, dk, dv]?, decay [B, T, Hv] or [.., Hv · dk]?, beta [B, T,
// Hv] or [.., 1]?) -> (output [B, T, max(Hq, Hv) · dv], present_state). The key's heads
// are the fewer of Hq and Hv, and value head h reads query and key head h / (Hv / Hq) (or
// query heads [h · Hq / Hv, ..) read state h): contiguous groups, so splitting every head
// count N ways gives rank r the query, key and value heads that read each other (Megatron's
// attention); q_num_heads and kv_num_heads are then set per rank (LinearAttentionHeads).
// With fewer query (or value) heads than ranks, each of those heads is on its group of
// N / heads ranks (S(d@g)), as GroupQueryAttention's K/V heads are. Or split by batch.
void LinearAttention(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (ctx.input_rank(0) != 3 || ctx.input_rank(1) != 3 || ctx.input_rank(2) != 3 ||
      !OutputsTyped(ctx)) {
    return;
  }
  const ir::Node& node = ctx.node();
  const int64_t hq = node.attr_int("q_num_heads", 0), hv = node.attr_int("kv_num_heads", 0);
  const int64_t n = ctx.n();
  if (hq <= 0 || hv <= 0) return;
  // A rate of [B, T, 1] is every head's.
  const bool rate_per_head =
      ctx.has_input(5) && ctx.input_rank(5) == 3 &&
      !(ctx.input_dims(5)[2].is_static() && ctx.input_dims(5)[2].value() == 1);
  // The placements of the query, the key, the value (and the decay and a per-head rate
  // with it), the state (past and present) and the output.
  auto strategy = [&](std::string name, const ir::Placement& q, const ir::Placement& k,
                      const ir::Placement& v, const ir::Placement& state,
                      const ir::Placement& output, double fraction) {
    Strategy s = ReplicatedInputs(ctx, std::move(name));
    s.inputs[0] = q;
    s.inputs[1] = k;
    s.inputs[2] = v;
    if (ctx.has_input(3)) s.inputs[3] = state;
    if (ctx.has_input(4)) s.inputs[4] = v;
    // A rate of one value per token splits with the batch only.
    const bool by_batch = v.kind == ir::Placement::Kind::kShard && v.dim == 0;
    if (ctx.has_input(5) && (rate_per_head || by_batch)) s.inputs[5] = v;
    s.outputs.assign(static_cast<size_t>(node.num_outputs()), state);
    s.outputs[0] = output;
    s.compute_fraction = fraction;
    AddNamedStrategy(ctx, std::move(s), out);
  };
  const double share = 1.0 / static_cast<double>(n);
  if (ctx.Divisible(ctx.input_dims(0)[0])) {
    const ir::Placement batch = ir::Placement::Shard(0);
    strategy("split batch", batch, batch, batch, batch, batch, share);
  }
  const ir::Placement heads = ir::Placement::Shard(2), state = ir::Placement::Shard(1);
  if (hq % n == 0 && hv % n == 0) {  // the key's heads are Hq or Hv: divided too
    strategy("split heads", heads, heads, heads, state, heads, share);
    return;
  }
  const int64_t fewer = std::min(hq, hv);
  if (fewer >= n || n % fewer != 0 || std::max(hq, hv) % n != 0) return;
  // The key's heads (its width / dk): the fewer heads (Qwen 3.5's), or Hv, which
  // onnxruntime takes too (key head = value head); unknown widths offer nothing here.
  const ir::Dim& qw = ctx.input_dims(0)[2];
  const ir::Dim& kw = ctx.input_dims(1)[2];
  if (!qw.is_static() || !kw.is_static() || qw.value() % hq != 0 || qw.value() < hq) return;
  const int64_t dk = qw.value() / hq;
  const int64_t hk = kw.value() % dk == 0 ? kw.value() / dk : 0;
  if (hk != fewer && hk != hv) return;
  // Each of the fewer heads on its group of N / fewer ranks (one head: every rank's).
  auto grouped = [&](int64_t d) {
    return fewer == 1 ? ir::Placement::Replicate() : ir::Placement::ShardInGroups(d, fewer);
  };
  if (hv > hq) {  // inverse GQA (Qwen 3.5): value heads split, query and key heads grouped
    strategy("split value heads, each query/key head on its group of ranks", grouped(2),
             hk == hv ? heads : grouped(2), heads, state, heads, share);
  } else {  // GQA: query heads split, key/value heads and their states grouped
    strategy("split query heads, each key/value head on its group of ranks", heads, grouped(2),
             grouped(2), grouped(1), heads, share);
  }
}

// Per-rank q_num_heads and kv_num_heads of a LinearAttention split by heads (the query's
// parts, and the value's).
absl::Status LinearAttentionHeads(LocalGraph& rw, ir::Node* node, const std::vector<ir::Placement>&,
                                  const std::vector<std::optional<ir::Placement>>& inputs) {
  auto heads_parts = [&](size_t i) -> int64_t {
    if (i >= inputs.size() || !inputs[i] || inputs[i]->kind != ir::Placement::Kind::kShard ||
        inputs[i]->dim != 2) {
      return 1;
    }
    return inputs[i]->Parts(rw.n());
  };
  node->attrs()["q_num_heads"] = node->attr_int("q_num_heads", 0) / heads_parts(0);
  node->attrs()["kv_num_heads"] = node->attr_int("kv_num_heads", 0) / heads_parts(2);
  return absl::OkStatus();
}

// The fewer of the query and value heads, when fewer than the ranks: each on its group.
std::vector<int64_t> LinearAttentionGroupCounts(const ir::Node& node, int64_t n) {
  const int64_t fewer = std::min(node.attr_int("q_num_heads", 0), node.attr_int("kv_num_heads", 0));
  if (fewer > 1 && fewer < n && n % fewer == 0) return {fewer};
  return {};
}

// The recurrent state [B, Hv, dk, dv] is carried between steps (paired with its past as a
// KV cache is, so it may stay split on its heads); its key rows are never split.
std::optional<int64_t> LinearAttentionStateAxis(const ir::Node&) { return 2; }

// 4 FLOPs per token, state head and state element (the decay, the update, Sᵀk and Sᵀq).
double LinearAttentionFlops(const RuleContext& ctx) {
  if (ctx.input_rank(0) != 3 || ctx.input_rank(2) != 3 || !OutputsTyped(ctx)) {
    return OutputElements(ctx);
  }
  const std::vector<ir::Dim>& q = ctx.input_dims(0);
  const std::vector<ir::Dim>& v = ctx.input_dims(2);
  const int64_t hq = std::max<int64_t>(ctx.node().attr_int("q_num_heads", 1), 1);
  return 4 * ctx.Size(q[0]) * ctx.Size(q[1]) * ctx.Size(v[2]) * ctx.Size(q[2]) /
         static_cast<double>(hq);
}

// onnxruntime's LinearAttentionGate(a [.., H], dt_bias [H], decay_scale [H], b [.., H]?)
// -> (decay, beta): every dim passes; the heads carry the two per-head vectors with them.
void LinearAttentionGate(const RuleContext& ctx, std::vector<Strategy>* out) {
  const int64_t rank = ctx.input_rank(0);
  if (rank < 1 || ctx.input_rank(1) != 1 || ctx.input_rank(2) != 1 || !OutputsTyped(ctx)) return;
  if (ctx.has_input(3) && ctx.input_rank(3) != rank) return;
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d + 1 < rank; ++d) b.Add(Kind::kPass, {d, kNone, kNone, d}, {d, d});
  b.Add(Kind::kPass, {rank - 1, 0, 0, rank - 1}, {rank - 1, rank - 1}, "heads");
  AddFactorStrategies(ctx, b.Build(), out);
}

// onnxruntime's GatedRMSNorm(X [..., G · C], scale [C], gate): groups of C normalized on
// their own, so the last dim splits in whole groups (G divisible by N: a head per group,
// Megatron's heads); the scale is every rank's.
void GatedRMSNorm(const RuleContext& ctx, std::vector<Strategy>* out) {
  const int64_t rank = ctx.input_rank(0);
  if (rank < 1 || ctx.input_rank(1) != 1 || ctx.input_rank(2) != rank || !OutputsTyped(ctx)) {
    return;
  }
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d + 1 < rank; ++d) b.Add(Kind::kPass, {d, kNone, d}, {d});
  const ir::Dim& width = ctx.input_dims(0)[static_cast<size_t>(rank - 1)];
  const ir::Dim& c = ctx.input_dims(1)[0];
  const bool whole_groups = width.is_static() && c.is_static() && c.value() > 0 &&
                            width.value() % c.value() == 0 &&
                            (width.value() / c.value()) % ctx.n() == 0;
  b.Add(whole_groups ? Kind::kPass : Kind::kNeedWhole, {rank - 1, kNone, rank - 1}, {rank - 1},
        "groups");
  AddFactorStrategies(ctx, b.Build(), out);
}

}  // namespace tpc::shard::rules
