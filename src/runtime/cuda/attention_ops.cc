// ONNX's Attention (opset 23) and onnxruntime's GroupQueryAttention on the GPU.
//
// Attention: Q laid out [B, Hq, qs, hd] and K/V with the past prepended [B, Hkv, total, d]
// by strided copies, the scores per K/V head's group of query heads by one strided-batched
// GEMM into f32 scratch, the masked softmax (rows.cu, math/sdpa.h), then P·V per group.
//
// GroupQueryAttention (the attention of onnxruntime-genai's decoders): Q and the present K/V laid
// out per head and rotated (gqa.cu), the scores of each K/V head's group of query heads by one
// strided-batched GEMM into f32 scratch, the masked softmax (rows.cu), then P·V per group into [B,
// S, Hq·hd]. seqlens_k and position_ids stay on the device (a row or position out of range fails
// the run at its end, naming the node); the checks and semantics are the CPU kernel's
// (cpu/attention.cc).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

bool IsIndex(ir::DType t) { return t == ir::DType::kI64 || t == ir::DType::kI32; }

// The f32 scores of at most this many bytes exist at once: batch entries go in chunks.
constexpr int64_t kScoreBytes = int64_t{256} << 20;

// Batch entries a chunk holds when one entry's scores are `per_entry` floats (at least 1).
int64_t ChunkOf(int64_t per_entry, int64_t batch) {
  return std::clamp<int64_t>(kScoreBytes / std::max<int64_t>(per_entry * 4, 1), 1,
                             std::max<int64_t>(batch, 1));
}

// Scores, softmax and P·V of each chunk of batch entries (both attentions): Q laid out
// [B, Hq, qs, hd], the presents [B, Hkv, total, d] (kind `kind`, element size es), Y's
// head h of entry b, row i at y + y_entry · b + y_head · h + ldy · i. `softmax(first, n,
// scores, probs)` runs the rows of entries [first, first + n).
template <typename Softmax>
absl::Status AttendChunks(const KernelContext& ctx, FloatKind kind, ir::DType dt, int64_t batch,
                          int64_t hq, int64_t hkv, int64_t qs, int64_t total, int64_t hd,
                          int64_t vd, float scale, const void* q, const void* pk, const void* pv,
                          void* y, int64_t y_entry, int64_t y_head, int64_t ldy,
                          const Softmax& softmax) {
  const int64_t group = hq / hkv;
  const size_t es = static_cast<size_t>(ir::DTypeSize(dt));
  const int64_t chunk = ChunkOf(hq * qs * total, batch);
  TPC_ASSIGN_OR_RETURN(Tensor scores, Scratch(ctx, ir::DType::kF32, {chunk, hq, qs, total}));
  Tensor probs_scratch;
  void* probs = scores.raw();
  if (kind != FloatKind::kF32) {
    TPC_ASSIGN_OR_RETURN(probs_scratch, Scratch(ctx, dt, {chunk, hq, qs, total}));
    probs = probs_scratch.raw();
  }
  const auto at = [es](const void* p, int64_t elements) {
    return static_cast<const uint8_t*>(p) + static_cast<size_t>(elements) * es;
  };
  for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
    const int64_t nb = std::min(chunk, batch - b0);
    // Per K/V head, its group of query heads is one [G·qs, hd] matrix of Q.
    Gemm2D s;
    s.tb = true;
    s.m = group * qs;
    s.n = total;
    s.k = hd;
    s.lda = hd;
    s.ldb = hd;
    s.ldc = total;
    s.stride_a = group * qs * hd;
    s.stride_b = total * hd;
    s.stride_c = group * qs * total;
    s.count = nb * hkv;
    s.alpha = scale;
    TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, FloatKind::kF32, s, at(q, b0 * hq * qs * hd),
                                at(pk, b0 * hkv * total * hd), scores.raw()));
    TPC_RETURN_IF_ERROR(softmax(b0, nb, scores.data<float>(), probs));
    // Y = P·V per (entry, K/V head): its G query heads in one strided batch, V shared.
    Gemm2D o;
    o.m = qs;
    o.n = vd;
    o.k = total;
    o.lda = total;
    o.ldb = vd;
    o.ldc = ldy;
    o.stride_a = qs * total;
    o.stride_b = 0;
    o.stride_c = y_head;
    o.count = group;
    for (int64_t b = b0; b < b0 + nb; ++b) {
      for (int64_t g = 0; g < hkv; ++g) {
        const int64_t h0 = g * group;
        TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, o, at(probs, ((b - b0) * hq + h0) * qs * total),
                                    at(pv, (b * hkv + g) * total * vd),
                                    const_cast<uint8_t*>(at(y, b * y_entry + h0 * y_head))));
      }
    }
  }
  return absl::OkStatus();
}

// A Q/K/V operand's view over [batch, heads, seq, size].
StridedView HeadsView(int64_t batch, const cpu::HeadLayout& h) {
  return math::ViewOf({batch, h.heads, h.seq, h.size},
                      {h.batch_stride, h.head_stride, h.row_stride, 1});
}

// dst [batch, heads, rows, size] from row `first` on = src viewed as [batch, heads, n, size].
absl::Status CopyRows(const KernelContext& ctx, ir::DType dt, const void* src, StridedView vs,
                      void* dst, int64_t batch, int64_t heads, int64_t rows, int64_t first,
                      int64_t n, int64_t size) {
  if (batch * heads * n * size == 0) return absl::OkStatus();
  StridedView vd =
      math::ViewOf({batch, heads, n, size}, {heads * rows * size, rows * size, size, 1});
  vd.offset = first * size;
  math::Simplify({&vs, &vd});
  return Check(ctx, LaunchCopy(ir::DTypeSize(dt), src, vs, dst, vd, batch * heads * n * size,
                               StreamOf(ctx)));
}

// src (viewed over [batch, heads, seq, size]) plus, when `bias` is not null, the bias row
// of each head (bias + h · size + d) into dst [batch, heads, seq, size], contiguous.
absl::Status HeadsWithBias(const KernelContext& ctx, FloatKind kind, ir::DType dt, const void* src,
                           StridedView vs, const void* bias, int64_t batch, int64_t heads,
                           int64_t seq, int64_t size, void* dst) {
  if (bias == nullptr) return CopyRows(ctx, dt, src, vs, dst, batch, heads, seq, 0, seq, size);
  StridedView vb = math::ViewOf({batch, heads, seq, size}, {0, size, 0, 1});
  StridedView vo = math::ContiguousView({batch, heads, seq, size});
  math::Simplify({&vs, &vb, &vo});
  return Check(ctx, LaunchBinary(kind, BinaryOp::kAdd, src, vs, bias, vb, dst,
                                 batch * heads * seq * size, StreamOf(ctx)));
}

// onnxruntime's masking of both its attentions, over the presents [B, H, total, d]: Q laid
// out [B, H, qs, hd], then AttendChunks into y [B, qs, H · vd].
absl::Status OrtAttend(const KernelContext& ctx, FloatKind kind, ir::DType dt,
                       const cpu::OrtAttentionShape& a, const void* q, const void* pk,
                       const void* pv, const Tensor* padding, int pad_mode, const Tensor* attn_bias,
                       void* y) {
  math::SdpaLayout l;
  l.batch = a.batch;
  l.hq = a.heads;
  l.qs = a.qs;
  l.total = a.total;
  l.past = a.past;
  l.causal = a.causal;
  l.ort = true;
  l.filter = static_cast<float>(a.filter);
  l.pad_mode = padding != nullptr ? pad_mode : 0;
  if (attn_bias != nullptr) {
    l.mask = 2;
    l.mask_cols = a.total;
    for (int d = 0; d < 4; ++d) l.mask_strides[d] = a.bias_strides[static_cast<size_t>(d)];
  }
  const void* bias_data = attn_bias != nullptr ? attn_bias->raw() : nullptr;
  const int32_t* pad = padding != nullptr ? padding->data<int32_t>() : nullptr;
  return AttendChunks(ctx, kind, dt, a.batch, a.heads, a.heads, a.qs, a.total, a.hd, a.vd,
                      static_cast<float>(a.scale), q, pk, pv, y, a.qs * a.heads * a.vd, a.vd,
                      a.heads * a.vd,
                      [&](int64_t first, int64_t n, const float* scores, void* probs) {
                        return Check(ctx, LaunchSdpaSoftmax(kind, scores, probs, l, bias_data, pad,
                                                            nullptr, first, n, StreamOf(ctx)));
                      });
}

}  // namespace

absl::Status Attention(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past_k = ctx.optional_input(4);
  const Tensor* past_v = ctx.optional_input(5);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, q.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::AttentionShape a, cpu::ReadAttentionShape(ctx));
  const int64_t batch = a.batch, hq = a.hq, hkv = a.hkv, hd = a.hd, vd = a.vd, past = a.past,
                total = a.total, qs = a.qs;
  math::SdpaLayout l;
  l.batch = batch;
  l.hq = hq;
  l.qs = qs;
  l.total = total;
  l.past = past;
  l.causal = a.causal;
  l.softcap = static_cast<float>(a.softcap);
  if (mask != nullptr) {
    l.mask = mask->dtype() == ir::DType::kBool ? 1 : 2;
    l.mask_cols = a.mask_cols;
    for (int d = 0; d < 4; ++d) l.mask_strides[d] = a.mask_strides[static_cast<size_t>(d)];
  }
  const Shape y_shape = q.rank() == 4 ? Shape{batch, hq, qs, vd} : Shape{batch, qs, hq * vd};
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, y_shape, q.dtype()));
  const float scale = static_cast<float>(a.scale);
  // K and V with the past prepended, [batch, kv heads, total, size]: the present outputs
  // when they are wanted.
  Tensor k_scratch, v_scratch;
  auto present = [&](int i, int64_t size, Tensor* scratch) -> absl::StatusOr<void*> {
    const Shape shape = {batch, hkv, total, size};
    if (ctx.wants_output(i)) {
      TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, shape, q.dtype()));
      return p->raw();
    }
    TPC_ASSIGN_OR_RETURN(*scratch, Scratch(ctx, q.dtype(), shape));
    return scratch->raw();
  };
  TPC_ASSIGN_OR_RETURN(void* pk, present(1, hd, &k_scratch));
  TPC_ASSIGN_OR_RETURN(void* pv, present(2, vd, &v_scratch));
  void* qk = nullptr;
  if (ctx.wants_output(3)) {
    l.qk_mode = static_cast<int>(a.mode);
    TPC_ASSIGN_OR_RETURN(Tensor * t, ctx.Output(3, {batch, hq, qs, total}, q.dtype()));
    qk = t->raw();
  }
  const ir::DType dt = q.dtype();
  if (past > 0) {
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, past_k->raw(), math::ContiguousView(past_k->shape()), pk,
                                 batch, hkv, total, 0, past, hd));
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, past_v->raw(), math::ContiguousView(past_v->shape()), pv,
                                 batch, hkv, total, 0, past, vd));
  }
  TPC_RETURN_IF_ERROR(
      CopyRows(ctx, dt, k.raw(), HeadsView(batch, a.k), pk, batch, hkv, total, past, a.k.seq, hd));
  TPC_RETURN_IF_ERROR(
      CopyRows(ctx, dt, v.raw(), HeadsView(batch, a.v), pv, batch, hkv, total, past, a.v.seq, vd));
  if (y->num_elements() == 0 && qk == nullptr) return absl::OkStatus();
  // Q as [batch, hq, qs, hd]: itself when 4-D, else a copy.
  Tensor q_scratch;
  const void* qh = q.raw();
  if (q.rank() == 3) {
    TPC_ASSIGN_OR_RETURN(q_scratch, Scratch(ctx, dt, {batch, hq, qs, hd}));
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, q.raw(), HeadsView(batch, a.q), q_scratch.raw(), batch,
                                 hq, qs, 0, qs, hd));
    qh = q_scratch.raw();
  }
  const size_t es = static_cast<size_t>(ir::DTypeSize(dt));
  const void* mask_data = mask != nullptr ? mask->raw() : nullptr;
  return AttendChunks(
      ctx, kind, dt, batch, hq, hkv, qs, total, hd, vd, scale, qh, pk, pv, y->raw(),
      q.rank() == 4 ? hq * qs * vd : qs * hq * vd, q.rank() == 4 ? qs * vd : vd,
      q.rank() == 4 ? vd : hq * vd,
      [&](int64_t first, int64_t n, const float* scores, void* probs) {
        void* qk_chunk = qk != nullptr ? static_cast<uint8_t*>(qk) +
                                             static_cast<size_t>(first * hq * qs * total) * es
                                       : nullptr;
        return Check(ctx, LaunchSdpaSoftmax(kind, scores, probs, l, mask_data, nullptr, qk_chunk,
                                            first, n, StreamOf(ctx)));
      });
}

absl::Status GroupQueryAttention(KernelContext& ctx) {
  const auto& [query, key, value, past_k, past_v, seqlens, cos, sin, position_ids, head_sink,
               q_norm, k_norm] = cpu::GqaInputsOf(ctx);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, query.dtype()));
  TPC_ASSIGN_OR_RETURN(const math::GqaLayout l, cpu::ReadGqaLayout(ctx));
  const float scale = l.scale;

  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {l.batch, l.seq, l.hq * l.hd}, query.dtype()));
  const Shape present_shape = {l.batch, l.hkv, l.total, l.hd};
  Tensor k_scratch, v_scratch;
  // (With a windowed cache these are the rows attention runs over, in scratch.)
  auto present = [&](int i, Tensor* scratch) -> absl::StatusOr<void*> {
    if (ctx.wants_output(i) && !l.windowed) {
      TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, present_shape, query.dtype()));
      return p->raw();
    }
    TPC_ASSIGN_OR_RETURN(*scratch, Scratch(ctx, query.dtype(), present_shape));
    return scratch->raw();
  };
  TPC_ASSIGN_OR_RETURN(void* pk, present(1, &k_scratch));
  TPC_ASSIGN_OR_RETURN(void* pv, present(2, &v_scratch));
  // The windowed presents keep each row's latest rows of those (after the attention, which
  // reads pk and pv; one stream orders them).
  auto window_presents = [&]() -> absl::Status {
    if (!l.windowed) return absl::OkStatus();
    const Shape shape = {l.batch, l.hkv, l.past, l.hd};
    Tensor unused_k, unused_v;
    void* out[2] = {nullptr, nullptr};
    for (int i : {1, 2}) {
      if (ctx.wants_output(i)) {
        TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, shape, query.dtype()));
        out[i - 1] = p->raw();
      } else {
        Tensor& t = i == 1 ? unused_k : unused_v;
        TPC_ASSIGN_OR_RETURN(t, Scratch(ctx, query.dtype(), shape));
        out[i - 1] = t.raw();
      }
    }
    const int window_code =
        BackendOf(ctx).Expect(std::string(ctx.Error("a row's seqlens_k is negative").message()));
    return Check(ctx, LaunchGqaWindowPresents(
                          kind, l, seqlens.raw(), seqlens.dtype() == ir::DType::kI64, pk, pv,
                          out[0], out[1], BackendOf(ctx).flag(), window_code, StreamOf(ctx)));
  };
  TPC_ASSIGN_OR_RETURN(Tensor q, Scratch(ctx, query.dtype(), {l.batch, l.hq, l.seq, l.hd}));
  GqaOperands o;
  o.query = query.raw();
  o.key = key != nullptr ? key->raw() : nullptr;
  // The fused per-head Q/K norms: the layout reads normalized copies of the query and key.
  Tensor query_normed, key_normed;
  if (l.qk_norm) {
    for (const Tensor* in : {&query, key}) {
      if (in == nullptr) continue;  // packed: K's heads are in the query
      Tensor& out = in == &query ? query_normed : key_normed;
      TPC_ASSIGN_OR_RETURN(out, Scratch(ctx, query.dtype(), in->shape()));
      TPC_RETURN_IF_ERROR(Check(
          ctx, LaunchGqaNormHeads(kind, l, in->raw(), in != &query, q_norm->raw(), k_norm->raw(),
                                  out.raw(), in->num_elements() / l.hd, StreamOf(ctx))));
      (in == &query ? o.query : o.key) = out.raw();
    }
  }
  o.value = value != nullptr ? value->raw() : nullptr;
  o.past_k = past_k != nullptr ? past_k->raw() : nullptr;
  o.past_v = past_v != nullptr ? past_v->raw() : nullptr;
  o.cos = l.rotary ? cos->raw() : nullptr;
  o.sin = l.rotary ? sin->raw() : nullptr;
  o.q = q.raw();
  o.present_k = pk;
  o.present_v = pv;
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("a row's keys (seqlens_k + 1) or a rotary position do not fit past ",
                             l.past, ", seq ", l.seq, l.rotary ? " and the caches" : ""))
          .message()));
  TPC_RETURN_IF_ERROR(
      Check(ctx, LaunchGqaLayout(kind, l, o, seqlens.raw(), seqlens.dtype() == ir::DType::kI64,
                                 l.has_positions ? position_ids->raw() : nullptr,
                                 l.has_positions && position_ids->dtype() == ir::DType::kI64,
                                 BackendOf(ctx).flag(), code, StreamOf(ctx))));
  // With no new rows the presents are the past (and zeros): written above; nothing to attend.
  if (y->num_elements() == 0) return window_presents();

  TPC_RETURN_IF_ERROR(AttendChunks(
      ctx, kind, query.dtype(), l.batch, l.hq, l.hkv, l.seq, l.total, l.hd, l.hd, scale, q.raw(),
      pk, pv, y->raw(), l.seq * l.hq * l.hd, l.hd, l.hq * l.hd,
      [&](int64_t first, int64_t n, const float* scores, void* probs) {
        return Check(
            ctx, LaunchGqaSoftmax(kind, scores, probs, l, seqlens.raw(),
                                  seqlens.dtype() == ir::DType::kI64,
                                  l.sink ? head_sink->raw() : nullptr, first, n, StreamOf(ctx)));
      }));
  return window_presents();
}

absl::Status MultiHeadAttention(KernelContext& ctx) {
  const Tensor& query = ctx.input(0);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* padding = ctx.optional_input(4);
  const Tensor* attn_bias = ctx.optional_input(5);
  const Tensor* past_k = ctx.optional_input(6);
  const Tensor* past_v = ctx.optional_input(7);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, query.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::OrtAttentionShape a, cpu::ReadMultiHeadAttentionShape(ctx));
  const Tensor& key = ctx.input(1);  // both there (checked)
  const Tensor& value = ctx.input(2);
  const ir::DType dt = query.dtype();
  const size_t es = static_cast<size_t>(ir::DTypeSize(dt));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {a.batch, a.qs, a.heads * a.vd}, dt));
  Tensor k_scratch, v_scratch;
  auto present = [&](int i, int64_t size, Tensor* scratch) -> absl::StatusOr<void*> {
    const Shape shape = {a.batch, a.heads, a.total, size};
    if (ctx.wants_output(i)) {
      TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, shape, dt));
      return p->raw();
    }
    TPC_ASSIGN_OR_RETURN(*scratch, Scratch(ctx, dt, shape));
    return scratch->raw();
  };
  TPC_ASSIGN_OR_RETURN(void* pk, present(1, a.hd, &k_scratch));
  TPC_ASSIGN_OR_RETURN(void* pv, present(2, a.vd, &v_scratch));
  // The bias: [Q's heads · hd, K's heads · hd, V's heads · vd].
  const auto* b = bias != nullptr ? static_cast<const uint8_t*>(bias->raw()) : nullptr;
  const void* bq = b;
  const void* bk = b != nullptr ? b + static_cast<size_t>(a.heads * a.hd) * es : nullptr;
  const void* bv = b != nullptr ? b + static_cast<size_t>(2 * a.heads * a.hd) * es : nullptr;
  if (a.past > 0) {
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, past_k->raw(), math::ContiguousView(past_k->shape()), pk,
                                 a.batch, a.heads, a.total, 0, a.past, a.hd));
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, past_v->raw(), math::ContiguousView(past_v->shape()), pv,
                                 a.batch, a.heads, a.total, 0, a.past, a.vd));
  }
  // The new keys and values (with their bias, through scratch) after the past.
  for (const auto& [src, layout, bias_row, dst, size] :
       {std::tuple{&key, &a.k, bk, pk, a.hd}, std::tuple{&value, &a.v, bv, pv, a.vd}}) {
    if (bias_row == nullptr) {
      TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, src->raw(), HeadsView(a.batch, *layout), dst, a.batch,
                                   a.heads, a.total, a.past, a.kv, size));
      continue;
    }
    TPC_ASSIGN_OR_RETURN(Tensor with_bias, Scratch(ctx, dt, {a.batch, a.heads, a.kv, size}));
    TPC_RETURN_IF_ERROR(HeadsWithBias(ctx, kind, dt, src->raw(), HeadsView(a.batch, *layout),
                                      bias_row, a.batch, a.heads, a.kv, size, with_bias.raw()));
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, with_bias.raw(),
                                 math::ContiguousView({a.batch, a.heads, a.kv, size}), dst, a.batch,
                                 a.heads, a.total, a.past, a.kv, size));
  }
  if (y->num_elements() == 0) return absl::OkStatus();
  TPC_ASSIGN_OR_RETURN(Tensor q, Scratch(ctx, dt, {a.batch, a.heads, a.qs, a.hd}));
  TPC_RETURN_IF_ERROR(HeadsWithBias(ctx, kind, dt, query.raw(), HeadsView(a.batch, a.q), bq,
                                    a.batch, a.heads, a.qs, a.hd, q.raw()));
  return OrtAttend(ctx, kind, dt, a, q.raw(), pk, pv, padding, 1, attn_bias, y->raw());
}

absl::Status MsAttention(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& weights = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past = ctx.optional_input(4);
  const Tensor* attn_bias = ctx.optional_input(5);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, input.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::OrtAttentionShape a, cpu::ReadMsAttentionShape(ctx));
  const ir::DType dt = input.dtype();
  const size_t es = static_cast<size_t>(ir::DTypeSize(dt));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {a.batch, a.qs, a.heads * a.vd}, dt));
  // Q, K and V of every token: one GEMM, then the bias.
  const int64_t d_in = input.dim(2);
  TPC_ASSIGN_OR_RETURN(Tensor qkv, Scratch(ctx, dt, {a.batch, a.qs, a.width}));
  Gemm2D g;
  g.m = a.batch * a.qs;
  g.n = a.width;
  g.k = d_in;
  g.lda = d_in;
  g.ldb = a.width;
  g.ldc = a.width;
  TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, g, input.raw(), weights.raw(), qkv.raw()));
  if (bias != nullptr && qkv.num_elements() > 0) {
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchBiasActivation(kind, UnaryOp::kIdentity, bias->raw(), a.width, qkv.raw(),
                                        qkv.num_elements(), StreamOf(ctx))));
  }
  // The presents [2, B, H, total, hd] (keys, then values), or scratch.
  const int64_t key_elems = a.batch * a.heads * a.total * a.hd;
  Tensor kv_scratch;
  uint8_t* pk = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(1, {2, a.batch, a.heads, a.total, a.hd}, dt));
    pk = static_cast<uint8_t*>(p->raw());
  } else {
    TPC_ASSIGN_OR_RETURN(kv_scratch,
                         Scratch(ctx, dt, {a.batch * a.heads * a.total * (a.hd + a.vd)}));
    pk = static_cast<uint8_t*>(kv_scratch.raw());
  }
  uint8_t* pv = pk + static_cast<size_t>(key_elems) * es;
  if (a.past > 0) {
    const auto* pp = static_cast<const uint8_t*>(past->raw());
    const StridedView vp = math::ContiguousView({a.batch, a.heads, a.past, a.hd});
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, pp, vp, pk, a.batch, a.heads, a.total, 0, a.past, a.hd));
    TPC_RETURN_IF_ERROR(CopyRows(ctx, dt,
                                 pp + static_cast<size_t>(a.batch * a.heads * a.past * a.hd) * es,
                                 vp, pv, a.batch, a.heads, a.total, 0, a.past, a.vd));
  }
  // Head h of token (b, s): Q at column h · hd of its row, K at sizes[0] + h · hd, V at
  // 2 · sizes[0] + h · vd.
  auto heads_of = [&](int64_t column, int64_t size) {
    StridedView v =
        math::ViewOf({a.batch, a.heads, a.qs, size}, {a.qs * a.width, size, a.width, 1});
    v.offset = column;
    return v;
  };
  TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, qkv.raw(), heads_of(a.sizes[0], a.hd), pk, a.batch, a.heads,
                               a.total, a.past, a.qs, a.hd));
  TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, qkv.raw(), heads_of(2 * a.sizes[0], a.vd), pv, a.batch,
                               a.heads, a.total, a.past, a.qs, a.vd));
  if (y->num_elements() == 0) return absl::OkStatus();
  TPC_ASSIGN_OR_RETURN(Tensor q, Scratch(ctx, dt, {a.batch, a.heads, a.qs, a.hd}));
  TPC_RETURN_IF_ERROR(CopyRows(ctx, dt, qkv.raw(), heads_of(0, a.hd), q.raw(), a.batch, a.heads,
                               a.qs, 0, a.qs, a.hd));
  // mask_index: the keys of each row ([batch]) or 0 where padded ([batch, total]).
  const int pad_mode = mask != nullptr && mask->rank() == 1 ? 2 : 1;
  return OrtAttend(ctx, kind, dt, a, q.raw(), pk, pv, mask, pad_mode, attn_bias, y->raw());
}

}  // namespace tpc::runtime::cuda
