// onnxruntime's GroupQueryAttention (the attention of onnxruntime-genai's decoders) on the
// CPU: the layout of Q and the presents (math/gqa.h, shared with the CUDA kernels), one
// GEMM for each head's scores, the rows' masked softmax, one GEMM for its output.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels.h"
#include "softmax_rows.h"
#include "tpc/runtime/math/gqa.h"
#include "tpc/runtime/math/rotary.h"

namespace tpc::runtime::cpu {
namespace {

// A 0/1 attribute of onnxruntime's, which it sets only at 1 (`== 1`); `off` is another
// value it takes for 0 (smooth_softmax's schema default is -1). Any other value: an error,
// rather than a guess.
absl::StatusOr<bool> OrtFlag(const KernelContext& ctx, const char* name, int64_t off = 0) {
  const int64_t v = ctx.node().attr_int(name, 0);
  if (v != 0 && v != 1 && v != off) {
    return ctx.Error(absl::StrCat(name, " is ", v, "; onnxruntime reads it as 0 or 1"));
  }
  return v == 1;
}

}  // namespace

// onnxruntime's GroupQueryAttention: query [B, S, Hq·hd] (or Q, K and V packed in it),
// key and value [B, S, Hkv·hd], past_key/past_value [B, Hkv, P, hd], seqlens_k [B] (the
// keys of each row minus one), total_sequence_length, cos/sin caches ([positions, rd/2])
// when do_rotary. Outputs: [B, S, Hq·hd], present_key/present_value [B, Hkv, P + S, hd]
// (the past, then the new keys, rotated). Causal at the end of the past, within
// local_window_size when set; query head h reads K/V head h / (Hq / Hkv).
// Rows of a batch may hold fewer keys than P + S (padded batches, as onnxruntime): row b
// holds seqlens_k[b] + 1 keys, its own past is the first P_b = seqlens_k[b] + 1 - S rows
// of the past (0 in a first prompt, P = 0, whose padding is on the right), its new keys
// go to rows P_b .. P_b + S - 1 of the present, the rows after are zeros, and its
// queries see only its keys. total_sequence_length, when given, must be P + S.
// sliding_window_cache = 1: the past and the presents are a cache of C = P rows (its
// capacity, at least local_window_size) holding only a row's latest keys, laid out as
// onnxruntime lays it out (math::GqaWindowEnd); seqlens_k counts all of the row's keys, and
// the rotary positions are theirs. Attention runs over the resident rows and the new ones
// (the layout above, with the resident rows as the own past), then the presents keep the
// last rows of those (math::GqaWindowSource) and zeros after. A row of fewer keys than new
// ones is a padded first prompt, as without a window (onnxruntime refuses it).
// head_sink [Hq] (input 11; gpt-oss's attention sinks): a score of each query head's
// rows that takes part in the softmax and is then dropped (math::GqaSinkScore).
// q_norm_weight and k_norm_weight [hd] (inputs 14, 15, together; onnxruntime's CUDA
// exports of Qwen 3 and the like): Q's and K's heads RMS-normalized before the rotary
// (math::GqaNormHead; epsilons qk_norm_epsilon, or q_norm_epsilon and k_norm_epsilon).
GqaInputs GqaInputsOf(const KernelContext& ctx) {
  return {ctx.input(0),           ctx.optional_input(1),  ctx.optional_input(2),
          ctx.optional_input(3),  ctx.optional_input(4),  ctx.input(5),
          ctx.optional_input(7),  ctx.optional_input(8),  ctx.optional_input(9),
          ctx.optional_input(11), ctx.optional_input(14), ctx.optional_input(15)};
}

absl::StatusOr<math::GqaLayout> ReadGqaLayout(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const auto& [query, key, value, past_k, past_v, seqlens, cos, sin, position_ids, head_sink,
               q_norm, k_norm] = GqaInputsOf(ctx);
  if (ctx.optional_input(10) != nullptr) return ctx.Error("attention_bias is not supported");
  if (node.attr_int("qk_output", 0) != 0) return ctx.Error("qk_output is not supported");
  math::GqaLayout l;
  l.hq = node.attr_int("num_heads", 0);
  l.hkv = node.attr_int("kv_num_heads", 0);
  if (l.hq <= 0 || l.hkv <= 0 || l.hq % l.hkv != 0) {
    return ctx.Error(absl::StrCat("num_heads ", l.hq, " and kv_num_heads ", l.hkv,
                                  " must be positive, kv_num_heads dividing num_heads"));
  }
  if (query.rank() != 3) return ctx.Error("query must be [batch, seq, hidden]");
  l.packed = key == nullptr;
  if (l.packed != (value == nullptr)) return ctx.Error("key and value come together");
  l.batch = query.dim(0);
  l.seq = query.dim(1);
  l.q_row = query.dim(2);
  const int64_t width = l.packed ? l.hq + 2 * l.hkv : l.hq;
  l.hd = l.q_row / width;
  if (l.hd <= 0 || l.q_row != l.hd * width ||
      (!l.packed &&
       (key->shape() != Shape{l.batch, l.seq, l.hkv * l.hd} || value->shape() != key->shape() ||
        key->dtype() != query.dtype() || value->dtype() != query.dtype()))) {
    return ctx.Error(absl::StrCat("query ", query.TypeString(),
                                  key ? absl::StrCat(", key ", key->TypeString()) : "",
                                  " do not fit num_heads ", l.hq, " and kv_num_heads ", l.hkv));
  }
  if (head_sink != nullptr) {
    if (head_sink->shape() != Shape{l.hq} || head_sink->dtype() != query.dtype()) {
      return ctx.Error(absl::StrCat("head_sink ", head_sink->TypeString(), " must be [", l.hq,
                                    "] (num_heads) of the query's type"));
    }
    l.sink = true;
  }
  if ((q_norm == nullptr) != (k_norm == nullptr)) {
    return ctx.Error("q_norm_weight and k_norm_weight come together");
  }
  if (q_norm != nullptr) {
    for (const Tensor* w : {q_norm, k_norm}) {
      if (w->shape() != Shape{l.hd} || w->dtype() != query.dtype()) {
        return ctx.Error(absl::StrCat(w == q_norm ? "q" : "k", "_norm_weight ", w->TypeString(),
                                      " must be [", l.hd, "] (the head size) of the query's type"));
      }
    }
    l.qk_norm = true;
    const float both = node.attr_float("qk_norm_epsilon", 1e-6f);
    l.q_epsilon = node.has_attr("q_norm_epsilon") ? node.attr_float("q_norm_epsilon", 0) : both;
    l.k_epsilon = node.has_attr("k_norm_epsilon") ? node.attr_float("k_norm_epsilon", 0) : both;
    for (float e : {l.q_epsilon, l.k_epsilon}) {
      if (!std::isfinite(e) || e <= 0) {
        return ctx.Error(
            absl::StrCat("the Q/K norms' epsilon ", e, " must be finite and positive"));
      }
    }
  }
  if ((past_k == nullptr) != (past_v == nullptr)) {
    return ctx.Error("past_key and past_value come together");
  }
  if (past_k && (past_k->rank() != 4 || past_v->rank() != 4)) {
    return ctx.Error("past_key and past_value must be [batch, kv_num_heads, past, head_size]");
  }
  l.past = past_k ? past_k->dim(2) : 0;
  l.total = l.past + l.seq;
  if (past_k && (past_k->shape() != Shape{l.batch, l.hkv, l.past, l.hd} ||
                 past_v->shape() != past_k->shape() || past_k->dtype() != query.dtype() ||
                 past_v->dtype() != query.dtype())) {
    return ctx.Error(absl::StrCat("past_key ", past_k->TypeString(), " and past_value ",
                                  past_v->TypeString(), " must be [batch, kv_num_heads, past, ",
                                  l.hd, "]"));
  }
  if ((seqlens.dtype() != ir::DType::kI32 && seqlens.dtype() != ir::DType::kI64) ||
      seqlens.num_elements() != l.batch) {
    return ctx.Error("seqlens_k must be [batch] of int32 or int64");
  }
  TPC_ASSIGN_OR_RETURN(l.windowed, OrtFlag(ctx, "sliding_window_cache"));
  l.window = node.attr_int("local_window_size", -1);
  if (l.windowed && (l.window < 1 || past_k == nullptr || l.past < l.window)) {
    return ctx.Error(absl::StrCat("sliding_window_cache needs local_window_size >= 1 (it is ",
                                  l.window, ") and a past of at least as many rows (it has ",
                                  past_k ? absl::StrCat(l.past) : "none", ")"));
  }
  // (With a windowed cache it counts all the tokens, as seqlens_k does.)
  if (const Tensor* t = ctx.optional_input(6); t != nullptr && !l.windowed) {
    TPC_ASSIGN_OR_RETURN(std::vector<int64_t> given, ReadInts(ctx, *t));
    if (given.size() != 1 || given[0] != l.total) {
      return ctx.Error(absl::StrCat("total_sequence_length ", absl::StrJoin(given, ","),
                                    " is not past + seq = ", l.total));
    }
  }
  TPC_ASSIGN_OR_RETURN(l.rotary, OrtFlag(ctx, "do_rotary"));
  TPC_ASSIGN_OR_RETURN(l.interleaved, OrtFlag(ctx, "rotary_interleaved"));
  if (l.rotary) {
    if (cos == nullptr || sin == nullptr || cos->rank() != 2 || sin->shape() != cos->shape() ||
        cos->dtype() != query.dtype() || sin->dtype() != query.dtype() || 2 * cos->dim(1) > l.hd) {
      return ctx.Error("do_rotary needs cos_cache and sin_cache [positions, rotary_dim / 2]");
    }
    l.half = cos->dim(1);
    l.cache_rows = cos->dim(0);
    if (position_ids != nullptr) {
      if ((position_ids->dtype() != ir::DType::kI32 && position_ids->dtype() != ir::DType::kI64) ||
          position_ids->num_elements() != l.batch * l.seq) {
        return ctx.Error("position_ids must be [batch, seq]");
      }
      l.has_positions = true;
    }
  }
  l.softcap = node.attr_float("softcap", 0.0f);
  TPC_ASSIGN_OR_RETURN(l.smooth, OrtFlag(ctx, "smooth_softmax", -1));
  l.scale = node.has_attr("scale") && node.attr_float("scale", 0.0f) != 0.0f
                ? node.attr_float("scale", 1.0f)
                : 1.0f / std::sqrt(static_cast<float>(l.hd));
  return l;
}

int64_t GqaCacheRows(const ir::Node& node, int input) {
  if ((input != 3 && input != 4) || node.attr_int("sliding_window_cache", 0) != 1) return 0;
  return std::max<int64_t>(node.attr_int("local_window_size", -1), 0);
}

absl::Status GroupQueryAttention(KernelContext& ctx) {
  const auto& [query, key, value, past_k, past_v, seqlens, cos, sin, position_ids, head_sink,
               q_norm, k_norm] = GqaInputsOf(ctx);
  TPC_ASSIGN_OR_RETURN(const math::GqaLayout l, ReadGqaLayout(ctx));
  const int64_t batch = l.batch, seq = l.seq, hq = l.hq, hkv = l.hkv, hd = l.hd, past = l.past,
                total = l.total, half = l.half;
  const bool packed = l.packed, rotary = l.rotary;
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> lens, ReadInts(ctx, seqlens));
  // Row b's past among the keys (P_b): its keys are [0, P_b + S) in the present.
  std::vector<int64_t> row_past(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t keys = 0, own = 0;
    if (!math::GqaRowKeys(l, lens[static_cast<size_t>(b)], &keys, &own)) {
      if (l.windowed) {
        return ctx.Error(absl::StrCat("row ", b, " has seqlens_k ", lens[static_cast<size_t>(b)],
                                      ": it must be at least 0"));
      }
      return ctx.Error(absl::StrCat(
          "row ", b, " holds ", keys, " keys (seqlens_k + 1): it must be ",
          past == 0 ? int64_t{1} : seq, " to ", total, " with past ", past, " and seq ", seq));
    }
    row_past[static_cast<size_t>(b)] = own;
  }
  std::vector<int64_t> positions;
  if (rotary) {
    if (position_ids != nullptr) {
      TPC_ASSIGN_OR_RETURN(positions, ReadInts(ctx, *position_ids));
    } else {
      for (int64_t b = 0; b < batch; ++b) {
        const size_t at = static_cast<size_t>(b);
        const int64_t start = math::GqaRowStart(l, lens[at], row_past[at]);
        for (int64_t s = 0; s < seq; ++s) positions.push_back(start + s);
      }
    }
    for (int64_t p : positions) {
      if (p < 0 || p >= l.cache_rows) {
        return ctx.Error(
            absl::StrCat("position ", p, " is outside the caches' ", l.cache_rows, " positions"));
      }
    }
  }
  const bool interleaved = l.interleaved;
  const int64_t window = l.window;
  const double softcap = l.softcap;
  const double scale = l.scale;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {batch, seq, hq * hd}, query.dtype()));
  return VisitFloat(ctx, query.dtype(), [&]<typename T>() -> absl::Status {
    // Q [B, Hq, S, hd] and the presents [B, Hkv, total, hd], rotated (with a windowed
    // cache: the rows attention runs over, in scratch).
    std::vector<T> q(static_cast<size_t>(batch * hq * seq * hd));
    std::vector<T> k_scratch, v_scratch;
    auto present = [&](int i, std::vector<T>* scratch) -> absl::StatusOr<T*> {
      if (ctx.wants_output(i) && !l.windowed) {
        TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(i, {batch, hkv, total, hd}, query.dtype()));
        return p->data<T>();
      }
      scratch->resize(static_cast<size_t>(batch * hkv * total * hd));
      return scratch->data();
    };
    TPC_ASSIGN_OR_RETURN(T * pk, present(1, &k_scratch));
    TPC_ASSIGN_OR_RETURN(T * pv, present(2, &v_scratch));
    // The query and key inputs, their Q and K heads normalized when the node fuses the
    // per-head norms.
    const T* query_in = query.data<T>();
    const T* key_in = key != nullptr ? key->data<T>() : nullptr;
    std::vector<T> query_normed, key_normed;
    if (l.qk_norm) {
      auto normed = [&](const Tensor& t, bool key_input, std::vector<T>* out) {
        out->resize(static_cast<size_t>(t.num_elements()));
        for (int64_t j = 0; j < t.num_elements() / hd; ++j) {
          math::GqaNormHead<math::PlainIO<T>>(l, t.data<T>(), key_input, q_norm->data<T>(),
                                              k_norm->data<T>(), out->data(), j);
        }
        return out->data();
      };
      query_in = normed(query, false, &query_normed);
      if (!packed) key_in = normed(*key, true, &key_normed);
    }
    // Head h of row (b, s) of Q, K or V, as the device kernels find it.
    const T* value_in = value != nullptr ? value->data<T>() : nullptr;
    auto src = [&](int which, int64_t b, int64_t s, int64_t h) -> const T* {
      return math::GqaSource(l, query_in, key_in, value_in, which, b, s, h);
    };
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t own = row_past[static_cast<size_t>(b)];
      for (int64_t h = 0; h < hkv; ++h) {
        T* dk = pk + (b * hkv + h) * total * hd;
        T* dv = pv + (b * hkv + h) * total * hd;
        if (own > 0) {
          std::copy_n(past_k->data<T>() + (b * hkv + h) * past * hd, own * hd, dk);
          std::copy_n(past_v->data<T>() + (b * hkv + h) * past * hd, own * hd, dv);
        }
        std::fill(dk + (own + seq) * hd, dk + total * hd, T(0));
        std::fill(dv + (own + seq) * hd, dv + total * hd, T(0));
      }
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t pos = rotary ? positions[static_cast<size_t>(b * seq + s)] : 0;
        const T* c = rotary ? cos->data<T>() + pos * half : nullptr;
        const T* sn = rotary ? sin->data<T>() + pos * half : nullptr;
        for (int64_t h = 0; h < hq; ++h) {
          T* dq = q.data() + ((b * hq + h) * seq + s) * hd;
          std::copy_n(src(0, b, s, h), hd, dq);
          if (rotary) math::RotateHead(dq, c, sn, half, interleaved, dq);
        }
        for (int64_t h = 0; h < hkv; ++h) {
          T* dk = pk + ((b * hkv + h) * total + own + s) * hd;
          std::copy_n(src(1, b, s, h), hd, dk);
          if (rotary) math::RotateHead(dk, c, sn, half, interleaved, dk);
          std::copy_n(src(2, b, s, h), hd, pv + ((b * hkv + h) * total + own + s) * hd);
        }
      }
    }
    ctx.pool().ParallelFor(batch * hq, 1, [&](int64_t first, int64_t last) {
      std::vector<T> scores(static_cast<size_t>(seq * total));
      for (int64_t bh = first; bh < last; ++bh) {
        const int64_t b = bh / hq, h = bh % hq;
        const int64_t g = h / (hq / hkv);
        Gemm2D<T>(false, true, seq, total, hd, static_cast<T>(scale),
                  q.data() + (b * hq + h) * seq * hd, hd, pk + (b * hkv + g) * total * hd, hd, T(0),
                  scores.data(), total);
        ctx.pool().ParallelFor(seq, 16, [&](int64_t lo, int64_t hi) {
          const int64_t keys = lens[static_cast<size_t>(b)] + 1;
          for (int64_t i = lo; i < hi; ++i) {
            T* row = scores.data() + i * total;
            // This query's position among the keys; a padded query of a first prompt
            // (past its row's keys) sees all of them.
            const int64_t at = std::min(row_past[static_cast<size_t>(b)] + i, keys - 1);
            for (int64_t j = 0; j < total; ++j) {
              const bool open = j <= at && (window <= 0 || j > at - window);
              row[j] = open ? static_cast<T>(Softcap(static_cast<double>(row[j]), softcap))
                            : -std::numeric_limits<T>::infinity();
            }
            if (l.sink || l.smooth) {
              SinkSoftmaxRow(row, total,
                             math::GqaSinkScore<math::PlainIO<T>>(
                                 l, l.sink ? head_sink->data<T>() : nullptr, h));
            } else {
              SoftmaxRow(row, total);
            }
          }
        });
        Gemm2D<T>(false, false, seq, hd, total, T(1), scores.data(), total,
                  pv + (b * hkv + g) * total * hd, hd, T(0),
                  y->data<T>() + b * seq * hq * hd + h * hd, hq * hd);
      }
    });
    if (!l.windowed || (!ctx.wants_output(1) && !ctx.wants_output(2))) return absl::OkStatus();
    // The presents keep each row's latest rows of those attention ran over (one of them
    // may be unwanted: scratch).
    const Shape shape = {batch, hkv, past, hd};
    T* out_k = nullptr;
    T* out_v = nullptr;
    std::vector<T> unused;
    for (int i : {1, 2}) {
      T* p = nullptr;
      if (ctx.wants_output(i)) {
        TPC_ASSIGN_OR_RETURN(Tensor * t, ctx.Output(i, shape, query.dtype()));
        p = t->data<T>();
      } else {
        unused.resize(static_cast<size_t>(batch * hkv * past * hd));
        p = unused.data();
      }
      (i == 1 ? out_k : out_v) = p;
    }
    for (int64_t e = 0; e < batch * hkv * past * hd; ++e) {
      math::GqaWindowPresentElement(l, lens.data(), pk, pv, out_k, out_v, e);
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
