// ONNX's Attention and RotaryEmbedding (opset 23). With 4-D operands ([batch, heads, seq,
// head size]) the batch and the heads pass: each rank attends with its heads, as
// Megatron's attention does. Grouped-query attention reads K/V head h / (Hq / Hkv) for
// query head h, so the heads split only when both Hq and Hkv divide N (rank r's query
// heads then read exactly its K/V heads). With 3-D operands the heads are folded into
// the hidden dim and counted by an attribute (q_num_heads, num_heads) that a split
// would have to change: the hidden dim needs whole. The keys (softmax's axis) and the
// head size (a dot product inside a softmax) need whole; the query rows pass unless the
// mask is causal (its diagonal is placed by the row's position in the whole sequence).
#include "rules.h"

namespace tpc::shard::rules {
namespace {

using Kind = FactorSpec::Kind;
constexpr int64_t kNone = FactorSpecBuilder::kNone;

// Attention's operands.
enum AttentionInput { kQ, kK, kV, kMask, kPastK, kPastV, kNonpadKvSeqlen };
enum AttentionOutput { kY, kPresentK, kPresentV, kQk };

}  // namespace

void Attention(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& q = ctx.input_dims(kQ);
  const int64_t rank = static_cast<int64_t>(q.size());
  if ((rank != 3 && rank != 4) || ctx.input_rank(kK) != rank || ctx.input_rank(kV) != rank ||
      !OutputsTyped(ctx)) {
    return;
  }
  const bool four = rank == 4;
  const bool causal = ctx.node().attr_int("is_causal", 0) != 0;
  // The mask broadcasts (right-aligned) to [batch, q heads, q seq, keys]: its dim for
  // position `at` of that shape when it has one of the full size `size`.
  auto mask_dim = [&](int64_t at, const ir::Dim& size) -> int64_t {
    if (!ctx.has_input(kMask)) return kNone;
    const std::vector<ir::Dim>& m = ctx.input_dims(kMask);
    const int64_t d = at - (4 - static_cast<int64_t>(m.size()));
    return d >= 0 && m[static_cast<size_t>(d)] == size ? d : kNone;
  };
  const ir::Dim heads = four ? q[1] : ir::Dim(1);
  FactorSpecBuilder b(ctx);
  // Inputs: Q, K, V, mask, past K, past V, nonpad_kv_seqlen; outputs: Y, present K,
  // present V, the QK product.
  b.Add(Kind::kPass, {0, 0, 0, mask_dim(0, q[0]), 0, 0, 0}, {0, 0, 0, 0}, "batch");
  if (four) {
    const bool split = ctx.Divisible(q[1]) && ctx.Divisible(ctx.input_dims(kK)[1]);
    b.Add(split ? Kind::kPass : Kind::kNeedWhole, {1, 1, 1, mask_dim(1, heads), 1, 1}, {1, 1, 1, 1},
          "heads");
    b.Add(causal ? Kind::kNeedWhole : Kind::kPass, {2, kNone, kNone, mask_dim(2, q[2])},
          {2, kNone, kNone, 2}, "query rows");
    b.Add(Kind::kNeedWhole, {kNone, 2, 2, 3, 2, 2}, {kNone, 2, 2, 3}, "keys");
    b.Add(Kind::kNeedWhole, {3, 3, kNone, kNone, 3}, {kNone, 3}, "head size");
    b.Add(Kind::kPass, {kNone, kNone, 3, kNone, kNone, 3}, {3, kNone, 3}, "value size");
  } else {
    b.Add(causal ? Kind::kNeedWhole : Kind::kPass, {1, kNone, kNone, mask_dim(2, q[1])},
          {1, kNone, kNone, 2}, "query rows");
    b.Add(Kind::kNeedWhole, {kNone, 1, 1, 3, 2, 2}, {kNone, 2, 2, 3}, "keys");
    b.Add(Kind::kNeedWhole, {2, 2, 2}, {2}, "heads × head size");
    b.Add(Kind::kNeedWhole, {kNone, kNone, kNone, kNone, 1, 1}, {kNone, 1, 1, 1}, "heads");
    b.Add(Kind::kNeedWhole, {kNone, kNone, kNone, kNone, 3, 3}, {kNone, 3, 3}, "head sizes");
  }
  AddFactorStrategies(ctx, b.Build(), out);
}

// 2 FLOPs per query row, key and element of the Q·Kᵀ and P·V products.
double AttentionFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& q = ctx.input_dims(kQ);
  const std::vector<ir::Dim>& k = ctx.input_dims(kK);
  if (q.size() < 3 || k.size() != q.size() || !OutputsTyped(ctx)) return OutputElements(ctx);
  const std::vector<ir::Dim>& y = ctx.output_dims(kY);
  const bool four = q.size() == 4;
  double keys = ctx.Size(k[four ? 2 : 1]);
  if (ctx.has_input(kPastK) && ctx.input_rank(kPastK) == 4)
    keys += ctx.Size(ctx.input_dims(kPastK)[2]);
  double rows = 1;  // batch · query rows (· heads, 4-D)
  for (size_t d = 0; d + 1 < q.size(); ++d) rows *= ctx.Size(q[d]);
  const double per_row = ctx.Size(q.back()) + ctx.Size(y.back());  // heads·(hd + vd) in 3-D
  return 2 * rows * keys * per_row;
}

// RotaryEmbedding(X, cos, sin, position_ids): X is [batch, heads, seq, head] or
// [batch, seq, heads·head] (num_heads); the caches are [positions, rotary/2] read by
// position_ids [batch, seq], or [batch, seq, rotary/2] without them. Batch, heads (4-D)
// and seq pass; the head dim (the rotated pairs) needs whole.
void RotaryEmbedding(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if ((rank != 3 && rank != 4) || !OutputsTyped(ctx)) return;
  const bool pos = ctx.has_input(3);
  const int64_t seq = rank == 4 ? 2 : 1;
  FactorSpecBuilder b(ctx);
  // Inputs: X, cos, sin, position ids.
  b.Add(Kind::kPass, {0, pos ? kNone : 0, pos ? kNone : 0, 0}, {0}, "batch");
  if (rank == 4) b.Add(Kind::kPass, {1}, {1}, "heads");
  b.Add(Kind::kPass, {seq, pos ? kNone : 1, pos ? kNone : 1, 1}, {seq}, "seq");
  b.Add(Kind::kNeedWhole, {rank - 1, pos ? 1 : 2, pos ? 1 : 2}, {rank - 1}, "head");
  if (pos) b.Add(Kind::kNeedWhole, {kNone, 0, 0}, {}, "positions");
  AddFactorStrategies(ctx, b.Build(), out);
}

}  // namespace tpc::shard::rules
