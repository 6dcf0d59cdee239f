// ONNX's Attention (opset 23): scaled dot-product attention over 3-D ([batch, seq, heads *
// head_size]) or 4-D ([batch, heads, seq, head_size]) Q, K, V, with grouped K/V heads, a
// boolean or additive mask (its last dim may be shorter than the keys: the rest is masked),
// causal masking aligned to the end of a past K/V cache, softcap, and the QK product as an
// optional output. Per (batch, head): one GEMM for the scores, the rows' softmax, one GEMM
// for the output. As onnx's reference: a row with every key masked gives zeros.
// Also onnxruntime's MultiHeadAttention and Attention (gqa.cc: its GroupQueryAttention).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels.h"
#include "softmax_rows.h"
#include "tpc/runtime/math/rotary.h"

namespace tpc::runtime::cpu {

absl::StatusOr<HeadLayout> Layout(const KernelContext& ctx, const Tensor& t, int64_t heads,
                                  const char* what) {
  HeadLayout l;
  if (t.rank() == 4) {
    l.heads = t.dim(1);
    l.seq = t.dim(2);
    l.size = t.dim(3);
    l.row_stride = l.size;
    l.head_stride = l.seq * l.size;
    l.batch_stride = l.heads * l.head_stride;
    return l;
  }
  if (heads <= 0 || t.dim(2) % heads != 0) {
    return ctx.Error(absl::StrCat(what, " ", t.TypeString(), " is 3-D: q_num_heads and ",
                                  "kv_num_heads must be set and divide its last dim"));
  }
  l.heads = heads;
  l.seq = t.dim(1);
  l.size = t.dim(2) / heads;
  l.row_stride = t.dim(2);
  l.head_stride = l.size;
  l.batch_stride = l.seq * t.dim(2);
  return l;
}

absl::StatusOr<AttentionShape> ReadAttentionShape(const KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past_k = ctx.optional_input(4);
  const Tensor* past_v = ctx.optional_input(5);
  const ir::Node& node = ctx.node();
  if ((q.rank() != 3 && q.rank() != 4) || k.rank() != q.rank() || v.rank() != q.rank()) {
    return ctx.Error(absl::StrCat("Q, K and V must all be 3-D or all 4-D, got ", q.TypeString(),
                                  ", ", k.TypeString(), ", ", v.TypeString()));
  }
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    return ctx.Error("Q, K and V differ in type");
  }
  if ((past_k == nullptr) != (past_v == nullptr)) {
    return ctx.Error("past_key and past_value come together");
  }
  AttentionShape a;
  TPC_ASSIGN_OR_RETURN(a.q, Layout(ctx, q, node.attr_int("q_num_heads", 0), "Q"));
  TPC_ASSIGN_OR_RETURN(a.k, Layout(ctx, k, node.attr_int("kv_num_heads", 0), "K"));
  TPC_ASSIGN_OR_RETURN(a.v, Layout(ctx, v, node.attr_int("kv_num_heads", 0), "V"));
  a.batch = q.dim(0);
  a.hq = a.q.heads;
  a.hkv = a.k.heads;
  a.hd = a.q.size;
  a.vd = a.v.size;
  if (k.dim(0) != a.batch || v.dim(0) != a.batch || a.k.size != a.hd || a.v.heads != a.hkv ||
      a.v.seq != a.k.seq || a.hkv == 0 || a.hq % a.hkv != 0) {
    return ctx.Error(absl::StrCat("Q ", q.TypeString(), ", K ", k.TypeString(), " and V ",
                                  v.TypeString(), " do not fit (batch, heads, head size)"));
  }
  a.past = past_k ? past_k->dim(2) : 0;
  a.total = a.past + a.k.seq;
  a.qs = a.q.seq;
  if (past_k && (past_k->shape() != Shape{a.batch, a.hkv, a.past, a.hd} ||
                 past_v->shape() != Shape{a.batch, a.hkv, a.past, a.vd} ||
                 past_k->dtype() != q.dtype() || past_v->dtype() != q.dtype())) {
    return ctx.Error(absl::StrCat("past_key ", past_k->TypeString(), " and past_value ",
                                  past_v->TypeString(), " do not fit K and V"));
  }
  // The mask, right-aligned to [batch, heads, q, its last dim].
  if (mask != nullptr) {
    if (mask->rank() < 1 || mask->rank() > 4) return ctx.Error("attn_mask must have rank 1 to 4");
    a.mask_cols = mask->shape().back();
    const Shape full = {a.batch, a.hq, a.qs, a.mask_cols};
    for (int64_t i = 0; i < mask->rank(); ++i) {
      const int64_t d = mask->dim(mask->rank() - 1 - i), want = full[static_cast<size_t>(3 - i)];
      if (d != want && d != 1) {
        return ctx.Error(absl::StrCat("attn_mask ", mask->TypeString(), " does not broadcast to ",
                                      "[batch, q_heads, q_seq, keys]"));
      }
    }
    if (a.mask_cols > a.total) return ctx.Error("attn_mask has more columns than there are keys");
    a.mask_strides = BroadcastStrides(mask->shape(), full);
    if (mask->dtype() != ir::DType::kBool && mask->dtype() != q.dtype()) {
      return ctx.Error("attn_mask must be bool or of Q's type");
    }
  }
  a.causal = node.attr_int("is_causal", 0) != 0;
  a.mode = node.attr_int("qk_matmul_output_mode", 0);
  a.softcap = node.attr_float("softcap", 0.0f);
  a.scale = node.has_attr("scale") ? node.attr_float("scale", 1.0f)
                                   : 1.0 / std::sqrt(static_cast<double>(a.hd));
  return a;
}

absl::Status Attention(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past_k = ctx.optional_input(4);
  const Tensor* past_v = ctx.optional_input(5);
  TPC_ASSIGN_OR_RETURN(const AttentionShape a, ReadAttentionShape(ctx));
  const HeadLayout &ql = a.q, &kl = a.k, &vl = a.v;
  const int64_t batch = a.batch, hq = a.hq, hkv = a.hkv, hd = a.hd, vd = a.vd, past = a.past,
                total = a.total, qs = a.qs, mask_cols = a.mask_cols;
  const Shape& mask_strides = a.mask_strides;
  const Shape y_shape = q.rank() == 4 ? Shape{batch, hq, qs, vd} : Shape{batch, qs, hq * vd};
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, y_shape, q.dtype()));
  const bool causal = a.causal;
  const int64_t mode = a.mode;
  const double softcap = a.softcap;
  const double scale = a.scale;
  return VisitFloat(ctx, q.dtype(), [&]<typename T>() -> absl::Status {
    // K and V with the past prepended, [batch, kv heads, total, size]: the present outputs
    // when they are wanted.
    std::vector<T> k_scratch, v_scratch;
    auto present = [&](int i, int64_t size, std::vector<T>* scratch) -> absl::StatusOr<T*> {
      if (ctx.wants_output(i)) {
        TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, {batch, hkv, total, size}, q.dtype()));
        return p->data<T>();
      }
      scratch->resize(static_cast<size_t>(batch * hkv * total * size));
      return scratch->data();
    };
    TPC_ASSIGN_OR_RETURN(T * pk, present(1, hd, &k_scratch));
    TPC_ASSIGN_OR_RETURN(T * pv, present(2, vd, &v_scratch));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < hkv; ++h) {
        T* dk = pk + (b * hkv + h) * total * hd;
        T* dv = pv + (b * hkv + h) * total * vd;
        if (past > 0) {
          std::copy_n(past_k->data<T>() + (b * hkv + h) * past * hd, past * hd, dk);
          std::copy_n(past_v->data<T>() + (b * hkv + h) * past * vd, past * vd, dv);
        }
        for (int64_t s = 0; s < kl.seq; ++s) {
          std::copy_n(k.data<T>() + kl.offset(b, h) + s * kl.row_stride, hd, dk + (past + s) * hd);
          std::copy_n(v.data<T>() + vl.offset(b, h) + s * vl.row_stride, vd, dv + (past + s) * vd);
        }
      }
    }
    T* qk_out = nullptr;
    if (ctx.wants_output(3)) {
      TPC_ASSIGN_OR_RETURN(Tensor * t, ctx.Output(3, {batch, hq, qs, total}, q.dtype()));
      qk_out = t->data<T>();
    }
    const int64_t y_row = q.rank() == 4 ? vd : hq * vd;
    // (batch, head) pairs over the pool's threads, each with its rows' scores only.
    ctx.pool().ParallelFor(batch * hq, 1, [&](int64_t first, int64_t last) {
      std::vector<T> scores(static_cast<size_t>(qs * total));
      for (int64_t bh = first; bh < last; ++bh) {
        const int64_t b = bh / hq, h = bh % hq;
        const int64_t g = h / (hq / hkv);  // the K/V head this query head reads
        Gemm2D<T>(false, true, qs, total, hd, static_cast<T>(scale), q.data<T>() + ql.offset(b, h),
                  ql.row_stride, pk + (b * hkv + g) * total * hd, hd, T(0), scores.data(), total);
        T* qk = qk_out ? qk_out + (b * hq + h) * qs * total : nullptr;
        ctx.pool().ParallelFor(qs, 16, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) {
            T* row = scores.data() + i * total;
            bool any_open = false;
            for (int64_t j = 0; j < total; ++j) {
              double bias = 0;
              if (mask != nullptr) {
                if (j >= mask_cols) {
                  bias = -std::numeric_limits<double>::infinity();
                } else {
                  const int64_t at = b * mask_strides[0] + h * mask_strides[1] +
                                     i * mask_strides[2] + j * mask_strides[3];
                  bias = mask->dtype() == ir::DType::kBool
                             ? (mask->data<bool>()[at] ? 0.0
                                                       : -std::numeric_limits<double>::infinity())
                             : static_cast<double>(mask->data<T>()[at]);
                }
              }
              if (causal && j > i + past) bias = -std::numeric_limits<double>::infinity();
              any_open = any_open || !(std::isinf(bias) && bias < 0);
              const double s = Softcap(static_cast<double>(row[j]), softcap);
              if (qk != nullptr && mode <= 1) qk[i * total + j] = static_cast<T>(s);
              row[j] = static_cast<T>(s + bias);
              if (qk != nullptr && mode == 2) qk[i * total + j] = row[j];
            }
            SoftmaxRow(row, total);
            if (!any_open) std::fill(row, row + total, T(0));
            if (qk != nullptr && mode == 3) std::copy_n(row, total, qk + i * total);
          }
        });
        const int64_t y_off = q.rank() == 4 ? (b * hq + h) * qs * vd : b * qs * hq * vd + h * vd;
        Gemm2D<T>(false, false, qs, vd, total, T(1), scores.data(), total,
                  pv + (b * hkv + g) * total * vd, vd, T(0), y->data<T>() + y_off, y_row);
      }
    });
    return absl::OkStatus();
  });
}

namespace {

// How onnxruntime's attention operators mask the scores: mask_filter_value added where
// the key is padded and again where, unidirectional, it comes after the query's position
// at the end of the past; then the attention bias [B|1, H|1, S, total] added.
struct OrtMasking {
  int64_t past = 0, total = 0;
  bool causal = false;
  double filter = -10000.0;
  const Tensor* attn_bias = nullptr;
  Shape bias_strides;
};

// Per (batch, head), over the pool's threads: scores = scale·q·kᵀ masked as `masking` and
// `padded(b, key)` say, their softmax, times v into y [B, S, H·vd]. q [B, H, S, hd]; pk and
// pv [B, H, total, hd|vd].
template <typename T, typename Padded>
void AttendHeads(ThreadPool& pool, const T* q, const T* pk, const T* pv, int64_t batch,
                 int64_t heads, int64_t qs, int64_t hd, int64_t vd, double scale,
                 const OrtMasking& masking, Padded padded, T* y) {
  const int64_t total = masking.total;
  pool.ParallelFor(batch * heads, 1, [&](int64_t first, int64_t last) {
    std::vector<T> scores(static_cast<size_t>(qs * total));
    for (int64_t bh = first; bh < last; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      Gemm2D<T>(false, true, qs, total, hd, static_cast<T>(scale), q + bh * qs * hd, hd,
                pk + bh * total * hd, hd, T(0), scores.data(), total);
      for (int64_t i = 0; i < qs; ++i) {
        T* row = scores.data() + i * total;
        for (int64_t j = 0; j < total; ++j) {
          double s = static_cast<double>(row[j]);
          if (padded(b, j)) s += masking.filter;
          if (masking.causal && j > masking.past + i) s += masking.filter;
          if (masking.attn_bias != nullptr) {
            const Shape& st = masking.bias_strides;
            s += static_cast<double>(
                masking.attn_bias->data<T>()[b * st[0] + h * st[1] + i * st[2] + j * st[3]]);
          }
          row[j] = static_cast<T>(s);
        }
        SoftmaxRow(row, total);
      }
      Gemm2D<T>(false, false, qs, vd, total, T(1), scores.data(), total, pv + bh * total * vd, vd,
                T(0), y + b * qs * heads * vd + h * vd, heads * vd);
    }
  });
}

// The attention bias [B|1, H|1, S, total] of onnxruntime's attention operators: its
// strides over [B, H, S, total], or an error.
absl::StatusOr<Shape> AttentionBiasStrides(const KernelContext& ctx, const Tensor& bias,
                                           ir::DType dtype, int64_t batch, int64_t heads,
                                           int64_t qs, int64_t total) {
  if (bias.rank() != 4 || bias.dtype() != dtype || (bias.dim(0) != batch && bias.dim(0) != 1) ||
      (bias.dim(1) != heads && bias.dim(1) != 1) || bias.dim(2) != qs || bias.dim(3) != total) {
    return ctx.Error(absl::StrCat("attention_bias ", bias.TypeString(),
                                  " must be [batch or 1, num_heads or 1, ", qs, ", ", total,
                                  "] of the input's type"));
  }
  return BroadcastStrides(bias.shape(), {batch, heads, qs, total});
}

}  // namespace

// onnxruntime's MultiHeadAttention: query [B, S, H·hd]; key and value [B, L, H·hd] (or
// [B, H, L, hd], already in heads); bias [3·H·hd] added to the query, key and value
// projections; key_padding_mask int32 [B, P + L] (0: masked); attention_bias [B|1, H|1,
// S, P + L] added to the scores; past_key/past_value [B, H, P, hd]. Outputs [B, S, H·vd]
// and present_key/present_value [B, H, P + L, hd]. As onnxruntime computes it: scores
// scale·q·kᵀ, plus mask_filter_value (default -10000) where the key is padded and again
// where (unidirectional) it comes after the query's position, plus the attention bias,
// then the softmax. The filter is added, not substituted: a row padded throughout keeps
// its softmax (over the keys up to its position, when causal).
absl::StatusOr<OrtAttentionShape> ReadMultiHeadAttentionShape(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& query = ctx.input(0);
  const Tensor* key = ctx.optional_input(1);
  const Tensor* value = ctx.optional_input(2);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* padding = ctx.optional_input(4);
  const Tensor* attn_bias = ctx.optional_input(5);
  const Tensor* past_k = ctx.optional_input(6);
  const Tensor* past_v = ctx.optional_input(7);
  for (int i = 8; i < node.num_inputs(); ++i) {
    if (ctx.optional_input(i) != nullptr) {
      return ctx.Error(absl::StrCat("input ", i, " (past_sequence_length, cache_indirection) ",
                                    "is not supported"));
    }
  }
  if (ctx.wants_output(3)) return ctx.Error("the qk output is not supported");
  const int64_t heads = node.attr_int("num_heads", 0);
  if (heads <= 0) return ctx.Error("num_heads must be positive");
  if (key == nullptr || value == nullptr || query.rank() != 3) {
    return ctx.Error(
        "query [batch, seq, hidden] with key and value is supported (packed Q/K/V "
        "is not)");
  }
  if (key->dtype() != query.dtype() || value->dtype() != query.dtype() ||
      key->rank() != value->rank() || (key->rank() != 3 && key->rank() != 4)) {
    return ctx.Error(absl::StrCat("key ", key->TypeString(), " and value ", value->TypeString(),
                                  " must be of query's type, both 3-D or both 4-D"));
  }
  TPC_ASSIGN_OR_RETURN(const HeadLayout ql, Layout(ctx, query, heads, "query"));
  TPC_ASSIGN_OR_RETURN(const HeadLayout kl, Layout(ctx, *key, heads, "key"));
  TPC_ASSIGN_OR_RETURN(const HeadLayout vl, Layout(ctx, *value, heads, "value"));
  const int64_t batch = query.dim(0), qs = ql.seq, hd = ql.size, vd = vl.size, kv = kl.seq;
  if (key->dim(0) != batch || value->dim(0) != batch || kl.heads != heads || vl.heads != heads ||
      kl.size != hd || vl.seq != kv) {
    return ctx.Error(absl::StrCat("query ", query.TypeString(), ", key ", key->TypeString(),
                                  " and value ", value->TypeString(), " do not fit num_heads ",
                                  heads));
  }
  if (bias != nullptr && (key->rank() != 3 || bias->dtype() != query.dtype() ||
                          bias->shape() != Shape{heads * (2 * hd + vd)})) {
    return ctx.Error(absl::StrCat("bias ", bias->TypeString(), " must be [q + k + v hidden] of ",
                                  "query's type, with 3-D key and value"));
  }
  if ((past_k == nullptr) != (past_v == nullptr)) {
    return ctx.Error("past_key and past_value come together");
  }
  const int64_t past = past_k ? past_k->rank() == 4 ? past_k->dim(2) : -1 : 0;
  if (past_k && (past < 0 || past_k->shape() != Shape{batch, heads, past, hd} ||
                 past_v->shape() != Shape{batch, heads, past, vd} ||
                 past_k->dtype() != query.dtype() || past_v->dtype() != query.dtype())) {
    return ctx.Error(absl::StrCat("past_key ", past_k->TypeString(), " and past_value ",
                                  past_v->TypeString(), " must be [batch, num_heads, past, ", hd,
                                  "]"));
  }
  const int64_t total = past + kv;
  if (padding != nullptr &&
      (padding->dtype() != ir::DType::kI32 || padding->shape() != Shape{batch, total})) {
    return ctx.Error(absl::StrCat("key_padding_mask ", padding->TypeString(),
                                  " is supported as int32 [batch, past + kv_seq] = [", batch, ", ",
                                  total, "]"));
  }
  Shape bias_strides;
  if (attn_bias != nullptr) {
    TPC_ASSIGN_OR_RETURN(bias_strides, AttentionBiasStrides(ctx, *attn_bias, query.dtype(), batch,
                                                            heads, qs, total));
  }
  OrtAttentionShape a;
  a.q = ql;
  a.k = kl;
  a.v = vl;
  a.batch = batch;
  a.heads = heads;
  a.qs = qs;
  a.hd = hd;
  a.vd = vd;
  a.kv = kv;
  a.past = past;
  a.total = total;
  a.bias_strides = bias_strides;
  a.causal = node.attr_int("unidirectional", 0) != 0;
  a.filter = node.attr_float("mask_filter_value", -10000.0f);
  const float scale_attr = node.attr_float("scale", 0.0f);
  a.scale = scale_attr != 0.0f ? scale_attr : 1.0 / std::sqrt(static_cast<double>(hd));
  return a;
}

absl::Status MultiHeadAttention(KernelContext& ctx) {
  const Tensor& query = ctx.input(0);
  const Tensor* key = ctx.optional_input(1);
  const Tensor* value = ctx.optional_input(2);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* padding = ctx.optional_input(4);
  const Tensor* attn_bias = ctx.optional_input(5);
  const Tensor* past_k = ctx.optional_input(6);
  const Tensor* past_v = ctx.optional_input(7);
  TPC_ASSIGN_OR_RETURN(const OrtAttentionShape a, ReadMultiHeadAttentionShape(ctx));
  const HeadLayout &ql = a.q, &kl = a.k, &vl = a.v;
  const int64_t batch = a.batch, heads = a.heads, qs = a.qs, hd = a.hd, vd = a.vd, kv = a.kv,
                past = a.past, total = a.total;
  const Shape& bias_strides = a.bias_strides;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {batch, qs, heads * vd}, query.dtype()));
  const bool causal = a.causal;
  const double filter = a.filter;
  const double scale = a.scale;
  return VisitFloat(ctx, query.dtype(), [&]<typename T>() -> absl::Status {
    // The present K and V ([batch, heads, total, size], the past then the new keys with
    // their bias), and the query with its bias, per head.
    std::vector<T> k_scratch, v_scratch;
    auto present = [&](int i, int64_t size, std::vector<T>* scratch) -> absl::StatusOr<T*> {
      if (ctx.wants_output(i)) {
        TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, {batch, heads, total, size}, query.dtype()));
        return p->data<T>();
      }
      scratch->resize(static_cast<size_t>(batch * heads * total * size));
      return scratch->data();
    };
    TPC_ASSIGN_OR_RETURN(T * pk, present(1, hd, &k_scratch));
    TPC_ASSIGN_OR_RETURN(T * pv, present(2, vd, &v_scratch));
    const T* pb = bias != nullptr ? bias->data<T>() : nullptr;
    std::vector<T> q(static_cast<size_t>(batch * heads * qs * hd));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        T* dq = q.data() + (b * heads + h) * qs * hd;
        for (int64_t s = 0; s < qs; ++s) {
          for (int64_t d = 0; d < hd; ++d) {
            dq[s * hd + d] = query.data<T>()[ql.offset(b, h) + s * ql.row_stride + d] +
                             (pb ? pb[h * hd + d] : T(0));
          }
        }
        T* dk = pk + (b * heads + h) * total * hd;
        T* dv = pv + (b * heads + h) * total * vd;
        if (past > 0) {
          std::copy_n(past_k->data<T>() + (b * heads + h) * past * hd, past * hd, dk);
          std::copy_n(past_v->data<T>() + (b * heads + h) * past * vd, past * vd, dv);
        }
        for (int64_t s = 0; s < kv; ++s) {
          for (int64_t d = 0; d < hd; ++d) {
            dk[(past + s) * hd + d] = key->data<T>()[kl.offset(b, h) + s * kl.row_stride + d] +
                                      (pb ? pb[heads * hd + h * hd + d] : T(0));
          }
          for (int64_t d = 0; d < vd; ++d) {
            dv[(past + s) * vd + d] = value->data<T>()[vl.offset(b, h) + s * vl.row_stride + d] +
                                      (pb ? pb[2 * heads * hd + h * vd + d] : T(0));
          }
        }
      }
    }
    const int32_t* pad = padding != nullptr ? padding->data<int32_t>() : nullptr;
    const OrtMasking masking{past, total, causal, filter, attn_bias, bias_strides};
    AttendHeads<T>(
        ctx.pool(), q.data(), pk, pv, batch, heads, qs, hd, vd, scale, masking,
        [&](int64_t b, int64_t j) { return pad != nullptr && pad[b * total + j] == 0; },
        y->data<T>());
    return absl::OkStatus();
  });
}

// onnxruntime's Attention (the attention of its BERT and GPT-2 optimizations): input [B,
// S, D] projected by weights [D, q + k + v hidden] (+ bias) into Q, K and V of num_heads
// heads (qkv_hidden_sizes when they differ), attended as MultiHeadAttention attends.
// mask_index: int32 [B] (the keys of each row: the rest is padding) or [B, P + S] (0:
// padded); past [2, B, H, P, hd] and present [2, B, H, P + S, hd] (keys, then values);
// attention_bias [B|1, H|1, S, P + S]. Rotary and a shared past/present buffer are not
// supported.
absl::StatusOr<OrtAttentionShape> ReadMsAttentionShape(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& input = ctx.input(0);
  const Tensor& weights = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past = ctx.optional_input(4);
  const Tensor* attn_bias = ctx.optional_input(5);
  if (ctx.optional_input(6) != nullptr) return ctx.Error("past_sequence_length is not supported");
  if (node.attr_int("do_rotary", 0) != 0) return ctx.Error("do_rotary is not supported");
  if (node.attr_int("past_present_share_buffer", 0) != 0) {
    return ctx.Error("past_present_share_buffer is not supported");
  }
  const int64_t heads = node.attr_int("num_heads", 0);
  if (heads <= 0) return ctx.Error("num_heads must be positive");
  if (input.rank() != 3 || weights.rank() != 2 || weights.dim(0) != input.dim(2) ||
      weights.dtype() != input.dtype()) {
    return ctx.Error(absl::StrCat("input ", input.TypeString(), " and weights ",
                                  weights.TypeString(), " must be [batch, seq, D] and [D, ",
                                  "q + k + v hidden] of one type"));
  }
  std::vector<int64_t> sizes = node.attr_ints("qkv_hidden_sizes");
  if (sizes.empty()) sizes.assign(3, weights.dim(1) / 3);
  if (sizes.size() != 3 || sizes[0] != sizes[1] ||
      sizes[0] + sizes[1] + sizes[2] != weights.dim(1) || sizes[0] % heads != 0 ||
      sizes[2] % heads != 0 || sizes[0] == 0 || sizes[2] == 0) {
    return ctx.Error(absl::StrCat("weights ", weights.TypeString(),
                                  " are not Q, K and V of num_heads ", heads,
                                  " (qkv_hidden_sizes: Q and K alike, each divisible)"));
  }
  const int64_t batch = input.dim(0), qs = input.dim(1), width = weights.dim(1);
  const int64_t hd = sizes[0] / heads, vd = sizes[2] / heads;
  if (bias != nullptr && (bias->dtype() != input.dtype() || bias->shape() != Shape{width})) {
    return ctx.Error(absl::StrCat("bias ", bias->TypeString(), " must be [", width, "]"));
  }
  if (past != nullptr &&
      (vd != hd || past->rank() != 5 || past->dim(0) != 2 || past->dim(1) != batch ||
       past->dim(2) != heads || past->dim(4) != hd || past->dtype() != input.dtype())) {
    return ctx.Error(absl::StrCat("past ", past->TypeString(), " must be [2, ", batch, ", ", heads,
                                  ", past, ", hd, "] (keys and values of one size)"));
  }
  const int64_t past_len = past != nullptr ? past->dim(3) : 0, total = past_len + qs;
  if (mask != nullptr &&
      (mask->dtype() != ir::DType::kI32 ||
       (mask->shape() != Shape{batch} && mask->shape() != Shape{batch, total}))) {
    return ctx.Error(absl::StrCat("mask_index ", mask->TypeString(), " is supported as int32 [",
                                  batch, "] (key counts) or [", batch, ", ", total, "]"));
  }
  Shape bias_strides;
  if (attn_bias != nullptr) {
    TPC_ASSIGN_OR_RETURN(bias_strides, AttentionBiasStrides(ctx, *attn_bias, input.dtype(), batch,
                                                            heads, qs, total));
  }
  if (ctx.wants_output(1) && past == nullptr && vd != hd) {
    return ctx.Error("present needs keys and values of one size");
  }
  OrtAttentionShape a;
  a.batch = batch;
  a.heads = heads;
  a.qs = qs;
  a.hd = hd;
  a.vd = vd;
  a.kv = qs;
  a.past = past_len;
  a.total = total;
  a.width = width;
  a.sizes = sizes;
  a.bias_strides = bias_strides;
  a.causal = node.attr_int("unidirectional", 0) != 0;
  a.filter = node.attr_float("mask_filter_value", -10000.0f);
  const float scale_attr = node.attr_float("scale", 0.0f);
  a.scale = scale_attr != 0.0f ? scale_attr : 1.0 / std::sqrt(static_cast<double>(hd));
  return a;
}

absl::Status MsAttention(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& weights = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past = ctx.optional_input(4);
  const Tensor* attn_bias = ctx.optional_input(5);
  TPC_ASSIGN_OR_RETURN(const OrtAttentionShape a, ReadMsAttentionShape(ctx));
  const int64_t batch = a.batch, heads = a.heads, qs = a.qs, hd = a.hd, vd = a.vd,
                past_len = a.past, total = a.total, width = a.width;
  const std::vector<int64_t>& sizes = a.sizes;
  const Shape& bias_strides = a.bias_strides;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {batch, qs, heads * vd}, input.dtype()));
  const bool causal = a.causal;
  const double filter = a.filter;
  const double scale = a.scale;
  return VisitFloat(ctx, input.dtype(), [&]<typename T>() -> absl::Status {
    // Q, K and V of every token: one GEMM, then the bias.
    std::vector<T> qkv(static_cast<size_t>(batch * qs * width));
    ParallelGemm2D<T>(ctx.pool(), false, false, batch * qs, width, input.dim(2), T(1),
                      input.data<T>(), input.dim(2), weights.data<T>(), width, T(0), qkv.data(),
                      width);
    if (bias != nullptr) {
      for (int64_t r = 0; r < batch * qs; ++r) {
        for (int64_t c = 0; c < width; ++c)
          qkv[static_cast<size_t>(r * width + c)] += bias->data<T>()[c];
      }
    }
    // Per head: q [B, H, S, hd]; the present keys and values [B, H, total, hd|vd] (in the
    // present output when it is wanted: keys at [0], values at [1]).
    std::vector<T> q(static_cast<size_t>(batch * heads * qs * hd)), kv_scratch;
    T* pk = nullptr;
    if (ctx.wants_output(1)) {
      TPC_ASSIGN_OR_RETURN(Tensor * present,
                           ctx.Output(1, {2, batch, heads, total, hd}, input.dtype()));
      pk = present->data<T>();
    } else {
      kv_scratch.resize(static_cast<size_t>(batch * heads * total * (hd + vd)));
      pk = kv_scratch.data();
    }
    T* pv = pk + batch * heads * total * hd;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t bh = b * heads + h;
        T* dk = pk + bh * total * hd;
        T* dv = pv + bh * total * vd;
        if (past_len > 0) {
          const T* pp = past->data<T>();
          std::copy_n(pp + bh * past_len * hd, past_len * hd, dk);
          std::copy_n(pp + (batch * heads + bh) * past_len * hd, past_len * vd, dv);
        }
        for (int64_t s = 0; s < qs; ++s) {
          const T* row = qkv.data() + (b * qs + s) * width;
          std::copy_n(row + h * hd, hd, q.data() + (bh * qs + s) * hd);
          std::copy_n(row + sizes[0] + h * hd, hd, dk + (past_len + s) * hd);
          std::copy_n(row + 2 * sizes[0] + h * vd, vd, dv + (past_len + s) * vd);
        }
      }
    }
    const int32_t* pm = mask != nullptr ? mask->data<int32_t>() : nullptr;
    const bool lengths = mask != nullptr && mask->rank() == 1;
    const OrtMasking masking{past_len, total, causal, filter, attn_bias, bias_strides};
    AttendHeads<T>(
        ctx.pool(), q.data(), pk, pv, batch, heads, qs, hd, vd, scale, masking,
        [&](int64_t b, int64_t j) {
          if (pm == nullptr) return false;
          return lengths ? j >= pm[b] : pm[b * total + j] == 0;
        },
        y->data<T>());
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
