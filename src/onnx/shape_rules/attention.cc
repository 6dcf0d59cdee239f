// ONNX's Attention (opset 23, newer than libonnx knows): Y, the present K/V (past + new keys)
// and the QK product, from 3-D ([batch, seq, heads * size]) or 4-D ([batch, heads, seq, size])
// Q, K, V.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {

using ir::Dim;
using ir::TensorType;

absl::Status InferAttention(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  const TensorType& q = ctx.input_type(0);
  const TensorType& k = ctx.input_type(1);
  const TensorType& v = ctx.input_type(2);
  const int wanted = std::min(ctx.num_outputs(), 4);
  if (!q.shape || !k.shape || !v.shape) {
    for (int i = 0; i < wanted; ++i) SetUnknownRank(ctx, i, q.dtype);
    return absl::OkStatus();
  }
  const int64_t rank = q.rank();
  if ((rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank) {
    return ctx.Error(absl::StrCat("Q ", q.ToString(), ", K ", k.ToString(), " and V ", v.ToString(),
                                  " must all be 3-D or all 4-D"));
  }
  const Dims& qd = *q.shape;
  const Dims& kd = *k.shape;
  const Dims& vd = *v.shape;
  Dim hq, hkv, q_seq, kv_seq, head, v_head;
  Dims y;
  if (rank == 4) {
    hq = qd[1];
    hkv = kd[1];
    q_seq = qd[2];
    kv_seq = kd[2];
    head = kd[3];
    v_head = vd[3];
    y = {qd[0], hq, q_seq, v_head};
  } else {
    const int64_t nq = ctx.node().attr_int("q_num_heads", 0);
    const int64_t nkv = ctx.node().attr_int("kv_num_heads", 0);
    if (nq <= 0 || nkv <= 0) {
      return ctx.Error("3-D Q, K and V need the q_num_heads and kv_num_heads attributes");
    }
    hq = Dim(nq);
    hkv = Dim(nkv);
    q_seq = qd[1];
    kv_seq = kd[1];
    head = kd[2].DivExact(hkv).value_or(Dim::Unknown());
    v_head = vd[2].DivExact(hkv).value_or(Dim::Unknown());
    y = {qd[0], q_seq, (vd[2] * hq).DivExact(hkv).value_or(Dim::Unknown())};
  }
  Dim total = kv_seq;
  if (ctx.has_input(4)) {
    const TensorType& past = ctx.input_type(4);
    total = past.shape && past.rank() == 4 ? (*past.shape)[2] + kv_seq : Dim::Unknown();
  }
  ctx.set_output_type(0, TensorType(q.dtype, std::move(y)));
  if (wanted > 1) ctx.set_output_type(1, TensorType(k.dtype, {qd[0], hkv, total, head}));
  if (wanted > 2) ctx.set_output_type(2, TensorType(v.dtype, {qd[0], hkv, total, v_head}));
  if (wanted > 3) ctx.set_output_type(3, TensorType(q.dtype, {qd[0], hq, q_seq, total}));
  return absl::OkStatus();
}

// onnxruntime's GroupQueryAttention: output [B, S, num_heads · hd]; present_key and
// present_value [B, kv_num_heads, past + S, hd] (hd from query, packed or not), or with
// sliding_window_cache [B, kv_num_heads, past, hd].
absl::Status InferGroupQueryAttention(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* q, RankedInput(ctx, 0));
  const int64_t hq = ctx.node().attr_int("num_heads", 0);
  const int64_t hkv = ctx.node().attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0) {
    return ctx.Error(absl::StrCat("num_heads ", hq, " and kv_num_heads ", hkv,
                                  " must be positive, kv_num_heads dividing num_heads"));
  }
  if (q->size() != 3) return ctx.Error("query must be [batch, seq, hidden]");
  const bool packed = !ctx.has_input(1);
  const Dim& hidden = (*q)[2];
  std::optional<Dim> hd;
  if (hidden.is_static()) {
    const int64_t parts = packed ? hq + 2 * hkv : hq;
    if (hidden.value() % parts != 0) {
      return ctx.Error(absl::StrCat("query's last dim ", hidden.value(), " is not ", parts,
                                    " heads of equal size"));
    }
    hd = Dim(hidden.value() / parts);
  }
  const ir::DType t = ctx.input_type(0).dtype;
  ctx.set_output_type(0, TensorType(t, {(*q)[0], (*q)[1], hd ? Dim(hq * hd->value()) : Dim()}));
  Dim total = (*q)[1];
  if (ctx.has_input(3) && ctx.input_type(3).shape && ctx.input_type(3).shape->size() == 4) {
    // A windowed cache (sliding_window_cache) keeps its capacity, the past's rows.
    const Dim& past = (*ctx.input_type(3).shape)[2];
    total = ctx.node().attr_int("sliding_window_cache", 0) == 1 ? past : past + (*q)[1];
  }
  for (int i : {1, 2}) {
    if (i < ctx.num_outputs()) {
      ctx.set_output_type(i, TensorType(t, {(*q)[0], Dim(hkv), total, hd ? *hd : Dim()}));
    }
  }
  return absl::OkStatus();
}

// onnxruntime's MultiHeadAttention: query [B, S, H·hd]; key and value [B, L, H·hd] (or
// [B, H, L, hd], already split into heads); past_key/past_value [B, H, P, hd]. Outputs
// [B, S, H·vd] and present_key/present_value [B, H, P + L, hd].
absl::Status InferMultiHeadAttention(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* q, RankedInput(ctx, 0));
  const int64_t heads = ctx.node().attr_int("num_heads", 0);
  if (heads <= 0) return ctx.Error("num_heads must be positive");
  if (q->size() != 3) return ctx.Error("query must be [batch, seq, hidden]");
  if (!ctx.has_input(1) || !ctx.has_input(2)) {
    return ctx.Error("key and value must be given (packed Q/K/V is not supported)");
  }
  TPC_ASSIGN_OR_RETURN(const Dims* k, RankedInput(ctx, 1));
  TPC_ASSIGN_OR_RETURN(const Dims* v, RankedInput(ctx, 2));
  if ((k->size() != 3 && k->size() != 4) || v->size() != k->size()) {
    return ctx.Error(
        "key and value must both be [batch, seq, hidden] or [batch, heads, seq, size]");
  }
  const Dim h(heads);
  const Dim hd = (*q)[2].DivExact(h).value_or(Dim::Unknown());
  const bool split = k->size() == 4;
  const Dim kv_seq = split ? (*k)[2] : (*k)[1];
  const Dim vd = split ? (*v)[3] : (*v)[2].DivExact(h).value_or(Dim::Unknown());
  const ir::DType t = ctx.input_type(0).dtype;
  ctx.set_output_type(0, TensorType(t, {(*q)[0], (*q)[1], vd * h}));
  Dim total = kv_seq;
  if (ctx.has_input(6) && ctx.input_type(6).shape && ctx.input_type(6).shape->size() == 4) {
    total = (*ctx.input_type(6).shape)[2] + kv_seq;
  }
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, TensorType(t, {(*q)[0], h, total, hd}));
  if (ctx.num_outputs() > 2) ctx.set_output_type(2, TensorType(t, {(*q)[0], h, total, vd}));
  return absl::OkStatus();
}

// onnxruntime's Attention: input [B, S, D], weights [D, q + k + v hidden] (qkv_hidden_sizes,
// else three equal parts). Outputs [B, S, v hidden] and present [2, B, H, P + S, hd] (past
// [2, B, H, P, hd]).
absl::Status InferMsAttention(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* x, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(const Dims* w, RankedInput(ctx, 1));
  const int64_t heads = ctx.node().attr_int("num_heads", 0);
  if (heads <= 0) return ctx.Error("num_heads must be positive");
  if (x->size() != 3 || w->size() != 2) {
    return ctx.Error("input must be [batch, seq, D] and weights [D, q + k + v hidden]");
  }
  std::vector<int64_t> sizes = ctx.node().attr_ints("qkv_hidden_sizes");
  std::optional<int64_t> qh, vh;
  if (sizes.size() == 3) {
    qh = sizes[0];
    vh = sizes[2];
  } else if ((*w)[1].is_static()) {
    qh = vh = (*w)[1].value() / 3;
  }
  const ir::DType t = ctx.input_type(0).dtype;
  ctx.set_output_type(0, TensorType(t, {(*x)[0], (*x)[1], vh ? Dim(*vh) : Dim()}));
  if (ctx.num_outputs() > 1) {
    Dim total = (*x)[1];
    if (ctx.has_input(4) && ctx.input_type(4).shape && ctx.input_type(4).shape->size() == 5) {
      total = (*ctx.input_type(4).shape)[3] + (*x)[1];
    }
    ctx.set_output_type(
        1, TensorType(t, {Dim(2), (*x)[0], Dim(heads), total, qh ? Dim(*qh / heads) : Dim()}));
  }
  return absl::OkStatus();
}

// onnxruntime's LinearAttention: output [B, T, max(q_num_heads, kv_num_heads) · dv] (dv =
// value's width / kv_num_heads); present_state [B, kv_num_heads, dk, dv] (dk = query's
// width / q_num_heads).
absl::Status InferLinearAttention(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  TPC_ASSIGN_OR_RETURN(const Dims* q, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(const Dims* v, RankedInput(ctx, 2));
  const int64_t hq = ctx.node().attr_int("q_num_heads", 0);
  const int64_t hv = ctx.node().attr_int("kv_num_heads", 0);
  if (hq <= 0 || hv <= 0 || q->size() != 3 || v->size() != 3) {
    return ctx.Error(
        "q_num_heads and kv_num_heads must be positive, query and value [batch, "
        "tokens, heads · size]");
  }
  auto per_head = [&](const Dim& width, int64_t heads) -> absl::StatusOr<Dim> {
    if (!width.is_static()) return Dim();
    if (width.value() % heads != 0) {
      return ctx.Error(absl::StrCat("width ", width.value(), " is not ", heads, " heads"));
    }
    return Dim(width.value() / heads);
  };
  TPC_ASSIGN_OR_RETURN(const Dim dk, per_head((*q)[2], hq));
  TPC_ASSIGN_OR_RETURN(const Dim dv, per_head((*v)[2], hv));
  const ir::DType t = ctx.input_type(0).dtype;
  const int64_t heads = std::max(hq, hv);
  ctx.set_output_type(
      0, TensorType(t, {(*q)[0], (*q)[1], dv.is_static() ? Dim(heads * dv.value()) : Dim()}));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, TensorType(t, {(*q)[0], Dim(hv), dk, dv}));
  return absl::OkStatus();
}

// onnxruntime's LinearAttentionGate: decay and beta of a's type.
absl::Status InferLinearAttentionGate(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output_type(i, ctx.input_type(0));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
