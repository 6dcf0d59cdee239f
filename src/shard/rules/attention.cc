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

// Attention's operands.
enum AttentionInput { kQ, kK, kV, kMask, kPastK, kPastV, kNonpadKvSeqlen };
enum AttentionOutput { kY, kPresentK, kPresentV, kQk };

// An attention bias [B|1, H|1, S, T] (input `i`) against the split it would go with: its
// heads dim against `heads`, or its batch dim against the query's. kUnsure (1 or not, no
// telling) rules the strategy out; kCarries splits it with the heads (batch).
BroadcastFit AttentionBiasFit(const RuleContext& ctx, int i, int64_t heads, bool by_heads) {
  const std::vector<ir::Dim>& d = ctx.input_dims(i);
  return by_heads ? FitOf(d[1], ir::Dim(heads)) : FitOf(d[0], ctx.input_dims(0)[0]);
}

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
  // The mask broadcasts (right-aligned) to [batch, q heads, q seq, keys]: how its dim for
  // position `at` of that shape meets the full size `size` (FitOf; kBroadcast when it has
  // no such dim), and that dim unless it broadcasts. A factor the mask may or may not
  // broadcast along stays whole.
  auto mask_fit = [&](int64_t at, const ir::Dim& size) {
    if (!ctx.has_input(kMask)) return BroadcastFit::kBroadcast;
    const std::vector<ir::Dim>& m = ctx.input_dims(kMask);
    const int64_t d = at - (4 - static_cast<int64_t>(m.size()));
    return d >= 0 ? FitOf(m[static_cast<size_t>(d)], size) : BroadcastFit::kBroadcast;
  };
  auto mask_dim = [&](int64_t at, const ir::Dim& size) -> int64_t {
    if (mask_fit(at, size) == BroadcastFit::kBroadcast) return kNone;
    return at - (4 - static_cast<int64_t>(ctx.input_dims(kMask).size()));
  };
  auto kind = [&](bool whole, int64_t at, const ir::Dim& size) {
    return whole || mask_fit(at, size) == BroadcastFit::kUnsure ? Kind::kNeedWhole : Kind::kPass;
  };
  const ir::Dim heads = four ? q[1] : ir::Dim(1);
  FactorSpecBuilder b(ctx);
  // Inputs: Q, K, V, mask, past K, past V, nonpad_kv_seqlen; outputs: Y, present K,
  // present V, the QK product.
  b.Add(kind(false, 0, q[0]), {0, 0, 0, mask_dim(0, q[0]), 0, 0, 0}, {0, 0, 0, 0}, "batch");
  if (four) {
    const bool split = ctx.Divisible(q[1]) && ctx.Divisible(ctx.input_dims(kK)[1]);
    b.Add(kind(!split, 1, heads), {1, 1, 1, mask_dim(1, heads), 1, 1}, {1, 1, 1, 1}, "heads");
    b.Add(kind(causal, 2, q[2]), {2, kNone, kNone, mask_dim(2, q[2])}, {2, kNone, kNone, 2},
          "query rows");
    b.Add(Kind::kNeedWhole, {kNone, 2, 2, 3, 2, 2}, {kNone, 2, 2, 3}, "keys");
    b.Add(Kind::kNeedWhole, {3, 3, kNone, kNone, 3}, {kNone, 3}, "head size");
    b.Add(Kind::kPass, {kNone, kNone, 3, kNone, kNone, 3}, {3, kNone, 3}, "value size");
  } else {
    b.Add(kind(causal, 2, q[1]), {1, kNone, kNone, mask_dim(2, q[1])}, {1, kNone, kNone, 2},
          "query rows");
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

// onnxruntime's GroupQueryAttention(query, key, value, past_key, past_value, seqlens_k,
// total_sequence_length, cos_cache, sin_cache, position_ids): heads folded into the hidden
// dim of [batch, seq, heads · hd] and counted by num_heads / kv_num_heads, which the
// partition stage sets per rank (GroupQueryAttentionHeads). Split by heads as Megatron
// splits attention: the query's heads N ways and the K/V heads N ways when N divides
// them, else each K/V head on its group of N / Hkv ranks (S(d@Hkv)): rank r's query
// heads read exactly its K/V heads either way; head_sink [Hq] (input 11) with the query's
// heads. Or split by batch. Packed Q/K/V (one input) split by batch only. The fused Q/K
// norms' weights [hd] are every rank's.
void GroupQueryAttention(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (ctx.input_rank(0) != 3 || !OutputsTyped(ctx)) return;
  const ir::Node& node = ctx.node();
  const int64_t hq = node.attr_int("num_heads", 0), hkv = node.attr_int("kv_num_heads", 0);
  const int64_t n = ctx.n();
  if (hq <= 0 || hkv <= 0) return;
  const bool packed = !ctx.has_input(1);
  const bool past = ctx.has_input(3);
  auto strategy = [&](std::string name, const ir::Placement& q, const ir::Placement& kv,
                      const ir::Placement& cache, const ir::Placement& per_row, double fraction) {
    Strategy s = ReplicatedInputs(ctx, std::move(name));
    s.inputs[0] = q;
    if (!packed) s.inputs[1] = s.inputs[2] = kv;
    if (past) s.inputs[3] = s.inputs[4] = cache;
    s.inputs[5] = per_row;  // seqlens_k [batch]
    if (ctx.has_input(11) && q.kind == ir::Placement::Kind::kShard && q.dim == 2) {
      s.inputs[11] = ir::Placement::Shard(0);  // head_sink [Hq]
    }
    if (ctx.has_input(9))
      s.inputs[9] = per_row.kind == ir::Placement::Kind::kShard
                        ? ir::Placement::Shard(0)
                        : ir::Placement::Replicate();  // position_ids
    s.outputs.assign(static_cast<size_t>(node.num_outputs()), cache);
    s.outputs[0] = q;
    s.compute_fraction = fraction;
    AddNamedStrategy(ctx, std::move(s), out);
  };
  if (ctx.Divisible(ctx.input_dims(0)[0])) {
    const ir::Placement batch = ir::Placement::Shard(0);
    strategy("split batch", batch, batch, batch, batch, 1.0 / static_cast<double>(n));
  }
  if (packed || hq % n != 0) return;
  const ir::Placement heads = ir::Placement::Shard(2);
  if (hkv % n == 0) {
    strategy("split heads", heads, heads, ir::Placement::Shard(1), ir::Placement::Replicate(),
             1.0 / static_cast<double>(n));
  } else if (hkv < n && n % hkv == 0) {
    strategy("split heads, each K/V head on its group of ranks", heads,
             ir::Placement::ShardInGroups(2, hkv), ir::Placement::ShardInGroups(1, hkv),
             ir::Placement::Replicate(), 1.0 / static_cast<double>(n));
  }
}

// Per-rank num_heads and kv_num_heads of a GroupQueryAttention split by heads.
absl::Status GroupQueryAttentionHeads(LocalGraph& rw, ir::Node* node,
                                      const std::vector<ir::Placement>&,
                                      const std::vector<std::optional<ir::Placement>>& inputs) {
  auto heads_split = [&](size_t i) {
    return i < inputs.size() && inputs[i] && inputs[i]->kind == ir::Placement::Kind::kShard &&
           inputs[i]->dim == 2;
  };
  if (heads_split(0)) {
    node->attrs()["num_heads"] = node->attr_int("num_heads", 0) / inputs[0]->Parts(rw.n());
  }
  if (heads_split(1)) {
    node->attrs()["kv_num_heads"] = node->attr_int("kv_num_heads", 0) / inputs[1]->Parts(rw.n());
  }
  return absl::OkStatus();
}

// The presents are the pasts and the new keys joined on axis 2 (with a windowed cache,
// sliding_window_cache, the latest rows of both: the cache's rows, still on axis 2).
std::optional<int64_t> GroupQueryAttentionJoinAxis(const ir::Node&) { return 2; }

// K/V heads fewer than the ranks: each on its group of ranks (S(d@Hkv)).
std::vector<int64_t> GroupQueryAttentionGroupCounts(const ir::Node& node, int64_t n) {
  const int64_t hkv = node.attr_int("kv_num_heads", 0);
  if (hkv > 1 && hkv < n && n % hkv == 0) return {hkv};
  return {};
}

// 4 FLOPs per query head, query row, key and head element (Q·Kᵀ and P·V).
double GroupQueryAttentionFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& q = ctx.input_dims(0);
  if (q.size() != 3 || !OutputsTyped(ctx)) return OutputElements(ctx);
  double keys = ctx.Size(q[1]);
  if (ctx.has_input(3) && ctx.input_rank(3) == 4) keys += ctx.Size(ctx.input_dims(3)[2]);
  return 4 * ctx.Size(q[0]) * ctx.Size(q[1]) * keys * ctx.Size(ctx.output_dims(0)[2]);
}

// onnxruntime's MultiHeadAttention(query, key, value, bias, key_padding_mask,
// attention_bias, past_key, past_value): heads folded into the hidden dim of query [B, S,
// H·hd] (key and value the same, or [B, H, L, hd]) and counted by num_heads, which the
// partition stage sets per rank (MultiHeadAttentionHeads). Split by heads as Megatron
// splits attention: Q, K and V by their heads, the bias [3·H·hd] as three blocks (each
// rank its heads' part of the Q, K and V biases), attention_bias [B|1, H|1, S, T] by its
// heads when it has them, the caches by heads; the key padding mask [B, T] is every
// rank's. Or split by batch.
void MultiHeadAttention(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (ctx.input_rank(0) != 3 || !ctx.has_input(1) || !ctx.has_input(2) || !OutputsTyped(ctx)) {
    return;
  }
  const ir::Node& node = ctx.node();
  const int64_t heads = node.attr_int("num_heads", 0);
  const int64_t n = ctx.n();
  if (heads <= 0) return;
  const bool kv_split_heads = ctx.input_rank(1) == 4;
  auto strategy = [&](std::string name, bool by_heads) {
    Strategy s = ReplicatedInputs(ctx, std::move(name));
    const ir::Placement batch = ir::Placement::Shard(0);
    const ir::Placement q = by_heads ? ir::Placement::Shard(2) : batch;
    const ir::Placement kv = by_heads ? ir::Placement::Shard(kv_split_heads ? 1 : 2) : batch;
    const ir::Placement cache = by_heads ? ir::Placement::Shard(1) : batch;
    s.inputs[0] = q;
    s.inputs[1] = s.inputs[2] = kv;
    if (ctx.has_input(3) && by_heads) s.inputs[3] = ir::Placement::Shard(0, 3);  // [3·H·hd]
    if (ctx.has_input(4) && !by_heads) s.inputs[4] = batch;
    if (ctx.has_input(5) && ctx.input_rank(5) == 4) {
      const BroadcastFit fit = AttentionBiasFit(ctx, 5, heads, by_heads);
      if (fit == BroadcastFit::kUnsure) return;
      if (fit == BroadcastFit::kCarries) s.inputs[5] = by_heads ? ir::Placement::Shard(1) : batch;
    }
    for (int i : {6, 7}) {
      if (ctx.has_input(i)) s.inputs[static_cast<size_t>(i)] = cache;
    }
    s.outputs.assign(static_cast<size_t>(node.num_outputs()), cache);
    s.outputs[0] = q;
    s.compute_fraction = 1.0 / static_cast<double>(n);
    AddNamedStrategy(ctx, std::move(s), out);
  };
  if (ctx.Divisible(ctx.input_dims(0)[0])) strategy("split batch", false);
  if (heads % n == 0) strategy("split heads", true);
}

// Per-rank num_heads of a MultiHeadAttention split by heads.
absl::Status MultiHeadAttentionHeads(LocalGraph& rw, ir::Node* node,
                                     const std::vector<ir::Placement>&,
                                     const std::vector<std::optional<ir::Placement>>& inputs) {
  if (!inputs.empty() && inputs[0] && inputs[0]->kind == ir::Placement::Kind::kShard &&
      inputs[0]->dim == 2) {
    node->attrs()["num_heads"] = node->attr_int("num_heads", 0) / inputs[0]->Parts(rw.n());
  }
  return absl::OkStatus();
}

// 4 FLOPs per head, query row, key and head element (Q·Kᵀ and P·V).
double MultiHeadAttentionFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& q = ctx.input_dims(0);
  if (q.size() != 3 || !OutputsTyped(ctx)) return OutputElements(ctx);
  double keys = ctx.Size(ctx.input_rank(1) == 4 ? ctx.input_dims(1)[2] : ctx.input_dims(1)[1]);
  if (ctx.has_input(6) && ctx.input_rank(6) == 4) keys += ctx.Size(ctx.input_dims(6)[2]);
  return 4 * ctx.Size(q[0]) * ctx.Size(q[1]) * keys * ctx.Size(q[2]);
}

// onnxruntime's Attention(input, weights, bias, mask_index, past, attention_bias): the
// Q, K and V projections fused into weights [D, 3·H·hd] and counted by num_heads (and
// qkv_hidden_sizes), which the partition stage sets per rank (MsAttentionHeads). Split
// by heads as Megatron splits attention: the input whole, the weights' columns and the
// bias as three blocks (each rank its heads' Q, K and V), the cache [2, B, H, P, hd] and
// the attention bias by heads; the output [B, S, H·vd] by its heads. Or split by batch.
void MsAttention(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (ctx.input_rank(0) != 3 || ctx.input_rank(1) != 2 || !OutputsTyped(ctx)) return;
  const ir::Node& node = ctx.node();
  const int64_t heads = node.attr_int("num_heads", 0);
  if (heads <= 0) return;
  const std::vector<int64_t> sizes = node.attr_ints("qkv_hidden_sizes");
  const bool equal =
      sizes.empty() || (sizes.size() == 3 && sizes[0] == sizes[1] && sizes[1] == sizes[2]);
  auto strategy = [&](std::string name, bool by_heads) {
    Strategy s = ReplicatedInputs(ctx, std::move(name));
    const ir::Placement batch = ir::Placement::Shard(0);
    if (by_heads) {
      s.inputs[1] = ir::Placement::Shard(1, 3);
      if (ctx.has_input(2)) s.inputs[2] = ir::Placement::Shard(0, 3);
    } else {
      s.inputs[0] = batch;
      if (ctx.has_input(3)) s.inputs[3] = batch;
    }
    if (ctx.has_input(4)) s.inputs[4] = ir::Placement::Shard(by_heads ? 2 : 1);
    if (ctx.has_input(5) && ctx.input_rank(5) == 4) {
      const BroadcastFit fit = AttentionBiasFit(ctx, 5, heads, by_heads);
      if (fit == BroadcastFit::kUnsure) return;
      if (fit == BroadcastFit::kCarries) s.inputs[5] = ir::Placement::Shard(by_heads ? 1 : 0);
    }
    s.outputs.assign(static_cast<size_t>(node.num_outputs()),
                     ir::Placement::Shard(by_heads ? 2 : 1));
    s.outputs[0] = by_heads ? ir::Placement::Shard(2) : batch;
    s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
    AddNamedStrategy(ctx, std::move(s), out);
  };
  if (ctx.Divisible(ctx.input_dims(0)[0])) strategy("split batch", false);
  if (equal && heads % ctx.n() == 0 && ctx.DivisibleInBlocks(ctx.input_dims(1)[1], 3)) {
    strategy("split heads", true);
  }
}

// Per-rank num_heads and qkv_hidden_sizes of an Attention split by heads.
absl::Status MsAttentionHeads(LocalGraph& rw, ir::Node* node, const std::vector<ir::Placement>&,
                              const std::vector<std::optional<ir::Placement>>& inputs) {
  if (inputs.size() < 2 || !inputs[1] || inputs[1]->kind != ir::Placement::Kind::kShard ||
      inputs[1]->dim != 1) {
    return absl::OkStatus();
  }
  const int64_t parts = inputs[1]->Parts(rw.n());
  node->attrs()["num_heads"] = node->attr_int("num_heads", 0) / parts;
  std::vector<int64_t> sizes = node->attr_ints("qkv_hidden_sizes");
  if (!sizes.empty()) {
    for (int64_t& v : sizes) v /= parts;
    node->attrs()["qkv_hidden_sizes"] = sizes;
  }
  return absl::OkStatus();
}

// The projection (2·B·S·D·3·H·hd) and the attention (4 per head, row, key and element).
double MsAttentionFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  if (x.size() != 3 || ctx.input_rank(1) != 2 || !OutputsTyped(ctx)) return OutputElements(ctx);
  const double rows = ctx.Size(x[0]) * ctx.Size(x[1]);
  double keys = ctx.Size(x[1]);
  if (ctx.has_input(4) && ctx.input_rank(4) == 5) keys += ctx.Size(ctx.input_dims(4)[3]);
  const double width = ctx.Size(ctx.input_dims(1)[1]);
  return 2 * rows * ctx.Size(x[2]) * width + 4 * rows * keys * width / 3;
}

// The Q, K and V parts of Attention's weights and bias (and MultiHeadAttention's bias):
// the solver then considers their blocked split S(d/3) as a constant's placement, each
// rank holding its heads' part of each.
int64_t QkvBlocks(const ir::Node&) { return 3; }

// The present is the past and the new keys joined on axis 3.
std::optional<int64_t> MsAttentionJoinAxis(const ir::Node&) { return 3; }

// onnxruntime's RotaryEmbedding(input, position_ids, cos_cache, sin_cache): input
// [batch, seq, heads · head] or [batch, heads, seq, head]; position_ids [batch, seq] or
// [1] (the first position). Batch, seq and the heads pass (3-D: when N divides the heads,
// each rank rotating whole heads; num_heads is then set per rank by MsRotaryHeads); the
// head dim needs whole, and the caches stay whole.
void MsRotaryEmbedding(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if ((rank != 3 && rank != 4) || ctx.input_rank(2) != 2 || !OutputsTyped(ctx)) return;
  const bool rows = ctx.input_rank(1) == 2;  // position_ids per row and token
  const int64_t seq = rank == 4 ? 2 : 1;
  FactorSpecBuilder b(ctx);
  b.Add(Kind::kPass, {0, rows ? 0 : kNone}, {0}, "batch");
  // A first position ([1]) numbers the tokens of the whole sequence: a rank holding part
  // of it would number its own from that position again.
  b.Add(rows ? Kind::kPass : Kind::kNeedWhole, {seq, rows ? 1 : kNone}, {seq}, "seq");
  if (rank == 4) {
    b.Add(Kind::kPass, {1}, {1}, "heads");
    b.Add(Kind::kNeedWhole, {3}, {3}, "head");
  } else {
    const ir::Dim& hidden = x[2];
    const std::vector<ir::Dim>& c = ctx.input_dims(2);
    int64_t heads = ctx.node().attr_int("num_heads", 0);
    const int64_t rd = ctx.node().attr_int("rotary_embedding_dim", 0) > 0
                           ? ctx.node().attr_int("rotary_embedding_dim", 0)
                           : (c[1].is_static() ? 2 * c[1].value() : 0);
    if (heads == 0 && hidden.is_static() && rd > 0) heads = hidden.value() / rd;
    const bool whole_heads = heads > 0 && heads % ctx.n() == 0;
    b.Add(whole_heads ? Kind::kPass : Kind::kNeedWhole, {2}, {2}, "heads · head");
  }
  b.Add(Kind::kNeedWhole, {kNone, kNone, 0, 0}, {}, "positions");
  AddFactorStrategies(ctx, b.Build(), out);
}

// onnxruntime's MRotaryEmbedding(input, position_ids [3, batch, seq], cos_cache,
// sin_cache): as its RotaryEmbedding, the three position streams of a token read with it
// (batch and seq pass into the ids' dims 1 and 2, the streams' dim whole).
void MRotaryEmbedding(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if ((rank != 3 && rank != 4) || ctx.input_rank(1) != 3 || ctx.input_rank(2) != 2 ||
      !OutputsTyped(ctx)) {
    return;
  }
  const int64_t seq = rank == 4 ? 2 : 1;
  FactorSpecBuilder b(ctx);
  b.Add(Kind::kPass, {0, 1}, {0}, "batch");
  b.Add(Kind::kPass, {seq, 2}, {seq}, "seq");
  b.Add(Kind::kNeedWhole, {kNone, 0}, {}, "streams");
  if (rank == 4) {
    b.Add(Kind::kPass, {1}, {1}, "heads");
    b.Add(Kind::kNeedWhole, {3}, {3}, "head");
  } else {
    const int64_t heads = ctx.node().attr_int("num_heads", 0);
    const bool whole_heads = heads > 0 && heads % ctx.n() == 0;
    b.Add(whole_heads ? Kind::kPass : Kind::kNeedWhole, {2}, {2}, "heads · head");
  }
  b.Add(Kind::kNeedWhole, {kNone, kNone, 0, 0}, {}, "positions");
  b.Add(Kind::kNeedWhole, {kNone, kNone, 1, 1}, {}, "angles");
  AddFactorStrategies(ctx, b.Build(), out);
}

// A 3-D RotaryEmbedding split by heads rotates num_heads / N heads on each rank.
absl::Status MsRotaryHeads(LocalGraph& rw, ir::Node* node, const std::vector<ir::Placement>&,
                           const std::vector<std::optional<ir::Placement>>& inputs) {
  if (inputs.empty() || !inputs[0] || inputs[0]->kind != ir::Placement::Kind::kShard ||
      inputs[0]->dim != 2 || node->input(0)->type().rank() != 3 ||
      node->attr_int("num_heads", 0) == 0) {
    return absl::OkStatus();
  }
  node->attrs()["num_heads"] = node->attr_int("num_heads", 0) / inputs[0]->Parts(rw.n());
  return absl::OkStatus();
}

}  // namespace tpc::shard::rules
