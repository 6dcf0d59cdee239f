// onnxruntime's LinearAttention and LinearAttentionGate on the CPU (Gated DeltaNet's layers
// of Qwen 3.5): the recurrence a state head at a time, row by row; the gates an element at a
// time (math/linear_attention.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "isa_loops.h"
#include "kernels.h"
#include "tpc/runtime/math/linear_attention.h"

namespace tpc::runtime::cpu {

// LinearAttention(query [B, T, Hq · dk], key [B, T, Hk · dk], value [B, T, Hv · dv],
// past_state [B, Hv, dk, dv]?, decay?, beta?) -> (output [B, T, max(Hq, Hv) · dv],
// present_state [B, Hv, dk, dv]); Hv = kv_num_heads, Hq = q_num_heads, Hk = key's width /
// dk (Hq or Hv). No state window.
absl::StatusOr<math::LinearAttentionLayout> ReadLinearAttentionLayout(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* past = ctx.optional_input(3);
  const Tensor* decay = ctx.optional_input(4);
  const Tensor* rate = ctx.optional_input(5);
  math::LinearAttentionLayout l;
  const std::string rule = node.attr_string("update_rule", "gated_delta");
  if (rule == "linear") {
    l.rule = math::LinearRule::kLinear;
  } else if (rule == "gated") {
    l.rule = math::LinearRule::kGated;
  } else if (rule == "delta") {
    l.rule = math::LinearRule::kDelta;
  } else if (rule == "gated_delta") {
    l.rule = math::LinearRule::kGatedDelta;
  } else {
    return ctx.Error(
        absl::StrCat("update_rule '", rule, "' is not one of linear, gated, delta, gated_delta"));
  }
  if (node.attr_int("state_window", 0) != 0) {
    return ctx.Error("state_window (per-token states) is not implemented");
  }
  l.q_heads = node.attr_int("q_num_heads", 0);
  l.v_heads = node.attr_int("kv_num_heads", 0);
  const ir::DType t = q.dtype();
  if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 || k.dtype() != t || v.dtype() != t ||
      l.q_heads <= 0 || l.v_heads <= 0 || q.dim(2) % l.q_heads != 0 || v.dim(2) % l.v_heads != 0 ||
      k.dim(0) != q.dim(0) || v.dim(0) != q.dim(0) || k.dim(1) != q.dim(1) ||
      v.dim(1) != q.dim(1)) {
    return ctx.Error(absl::StrCat("query ", q.TypeString(), ", key ", k.TypeString(), " and value ",
                                  v.TypeString(),
                                  " must be [batch, tokens, heads · size] of one type, with "
                                  "q_num_heads and kv_num_heads dividing their widths"));
  }
  l.batch = q.dim(0);
  l.tokens = q.dim(1);
  l.dk = q.dim(2) / l.q_heads;
  l.dv = v.dim(2) / l.v_heads;
  l.k_heads = l.dk > 0 ? k.dim(2) / l.dk : 0;
  const int64_t more = l.q_heads > l.v_heads ? l.q_heads : l.v_heads;
  const int64_t fewer = l.q_heads > l.v_heads ? l.v_heads : l.q_heads;
  if (l.dk <= 0 || k.dim(2) != l.k_heads * l.dk || more % fewer != 0 ||
      (l.k_heads != l.v_heads && l.k_heads != l.q_heads) || l.v_heads % l.k_heads != 0) {
    return ctx.Error(absl::StrCat("key ", k.TypeString(), " does not fit ", l.q_heads,
                                  " query heads and ", l.v_heads,
                                  " value heads (one head count must divide the other; the "
                                  "key has the fewer heads of dk = ",
                                  l.dk, ")"));
  }
  if (l.dk > math::kLinearAttentionMaxKeyDim) {
    return ctx.Error(absl::StrCat("key head size ", l.dk, " is past the kernels' ",
                                  math::kLinearAttentionMaxKeyDim));
  }
  const Shape state{l.batch, l.v_heads, l.dk, l.dv};
  if (past != nullptr && (past->shape() != state || past->dtype() != t)) {
    return ctx.Error(absl::StrCat("past_state ", past->TypeString(), " must be [", l.batch, ", ",
                                  l.v_heads, ", ", l.dk, ", ", l.dv, "] of the query's type"));
  }
  l.has_past = past != nullptr;
  if (l.gated()) {
    const Shape head{l.batch, l.tokens, l.v_heads}, key{l.batch, l.tokens, l.v_heads * l.dk};
    if (decay == nullptr || decay->dtype() != t ||
        (decay->shape() != head && decay->shape() != key)) {
      return ctx.Error(absl::StrCat("update_rule ", rule, " needs decay [batch, tokens, ",
                                    l.v_heads, "] or [.., ", l.v_heads * l.dk,
                                    "] of the query's type",
                                    decay ? absl::StrCat(", got ", decay->TypeString()) : ""));
    }
    l.decay_per_key = decay->shape() == key && key != head;
  }
  if (l.delta()) {
    const Shape head{l.batch, l.tokens, l.v_heads}, one{l.batch, l.tokens, 1};
    if (rate == nullptr || rate->dtype() != t || (rate->shape() != head && rate->shape() != one)) {
      return ctx.Error(absl::StrCat("update_rule ", rule, " needs beta [batch, tokens, ", l.v_heads,
                                    "] or [.., 1] of the query's type",
                                    rate ? absl::StrCat(", got ", rate->TypeString()) : ""));
    }
    l.rate_per_head = rate->shape() == head;
  }
  const float scale = node.attr_float("scale", 0.0f);
  l.scale = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(l.dk));
  return l;
}

namespace {

// State head h of batch entry b over every token, its [dk, dv] state a row at a time (the
// rows contiguous: each step's sums run along a row, vectorized), in `state` (the present),
// starting from `past` (this head's past state; null: zeros), which the first token's first
// pass reads in place of a copy. The same sums, in the same order of the key rows, as
// math::LinearAttentionColumn, which the GPU runs a column a thread (the AVX-512 clone
// contracts them into FMAs, so its last bits differ). Compiled per ISA (TPC_ISA_CLONES): the
// bench's Qwen 3.5 32-token prefill spent 4.8-5.4 ms here against 7.2 in the baseline build's
// 4-wide loops. (Blocks of 32 columns kept in L1 were slower, 8.8-9.3: the sums along a row's 2
// vectors wait on their FMAs' latency.)
TPC_ISA_CLONES void LinearAttentionHead(const math::LinearAttentionLayout& l, const float* q,
                                        const float* k, const float* v, const float* decay,
                                        const float* rate, float* out, const float* past,
                                        float* state, int64_t b, int64_t h, float* mem) {
  const int64_t dk = l.dk, dv = l.dv, oh = l.out_heads();
  const int64_t kh = l.key_head(h), q0 = l.first_query(h), qn = l.query_count();
  for (int64_t t = 0; t < l.tokens; ++t) {
    const int64_t bt = b * l.tokens + t;
    const float* kr = k + (bt * l.k_heads + kh) * dk;
    const float* vr = v + (bt * l.v_heads + h) * dv;
    const float* g =
        l.gated() ? decay + (l.decay_per_key ? (bt * l.v_heads + h) * dk : bt * l.v_heads + h)
                  : nullptr;
    // One pass over the rows: the decay, and Sᵀk of the decayed state (delta rules).
    std::fill(mem, mem + dv, 0.0f);
    // (A head's decay once, not per row: expf may set errno, so it is not hoisted for us.)
    const float head_decay = g != nullptr && !l.decay_per_key ? expf(g[0]) : 1.0f;
    for (int64_t i = 0; i < dk; ++i) {
      float* row = state + i * dv;
      // The row as the last token left it (the first token: the past's, or zeros).
      const float* from = t > 0 ? row : past != nullptr ? past + i * dv : nullptr;
      if (g != nullptr) {  // (zeros decayed too: 0 · e, NaN for an e of NaN or infinity)
        const float e = l.decay_per_key ? expf(g[i]) : head_decay;
        if (from == nullptr) {
          std::fill(row, row + dv, 0.0f * e);
        } else {
          for (int64_t j = 0; j < dv; ++j) row[j] = from[j] * e;
        }
      } else if (from == nullptr) {
        std::fill(row, row + dv, 0.0f);
      } else if (from != row) {
        std::copy_n(from, dv, row);
      }
      if (l.delta()) {
        for (int64_t j = 0; j < dv; ++j) mem[j] += row[j] * kr[i];
      }
    }
    if (l.delta()) {  // mem becomes the update, β · (v − Sᵀk)
      const float beta = rate[l.rate_per_head ? bt * l.v_heads + h : bt];
      for (int64_t j = 0; j < dv; ++j) mem[j] = (vr[j] - mem[j]) * beta;
    } else {
      std::copy_n(vr, dv, mem);
    }
    // Another: the update, and Sᵀq of the updated state for each query head reading it.
    float* first = out + (bt * oh + (l.q_heads > l.v_heads ? q0 : h)) * dv;
    std::fill(first, first + qn * dv, 0.0f);  // the query heads of state h are adjacent
    for (int64_t i = 0; i < dk; ++i) {
      float* row = state + i * dv;
      for (int64_t j = 0; j < dv; ++j) row[j] += kr[i] * mem[j];
      for (int64_t qi = 0; qi < qn; ++qi) {
        const float qv = q[(bt * l.q_heads + q0 + qi) * dk + i];
        float* o = first + qi * dv;
        for (int64_t j = 0; j < dv; ++j) o[j] += row[j] * qv;
      }
    }
    for (int64_t j = 0; j < qn * dv; ++j) first[j] *= l.scale;
  }
}

#if defined(__x86_64__)
#define TPC_AVX512 __attribute__((target("avx512f")))

// LinearAttentionHead for V · 16 value columns and one query head per state head (Qwen
// 3.5's inverse GQA), with AVX-512, in one pass over the state per token: the delta rule's
// Sᵀk, the update and the output row stay in registers over the key rows, and the pass
// that writes token t's state also sums the next token's Sᵀk from it (decayed by the next
// token's decay, as the generic loop's first pass decays it), so each token reads and
// writes the state once. The same products and sums in the same order of the key rows as
// the generic loop's AVX-512 clone (its outputs bit-identical to the two-pass form's). A
// head's decay is one expf per token, not one per key row (expf may set errno, so the
// compiler keeps a call in the loop). The bench's Qwen 3.5 32-token prefill (heads of
// 128 × 128, 2 threads, interleaved medians of 8): 3.7 ms in LinearAttention with two
// passes and an expf per row, 1.95 now; onnxruntime's 2.2 (bench/executor_bench.py).
template <int V>
TPC_AVX512 void LinearAttentionHeadRegisters(const math::LinearAttentionLayout& l, const float* q,
                                             const float* k, const float* v, const float* decay,
                                             const float* rate, float* out, const float* past,
                                             float* state, int64_t b, int64_t h) {
  const int64_t dk = l.dk, dv = l.dv, oh = l.out_heads();
  const int64_t kh = l.key_head(h), q0 = l.first_query(h);
  auto key_row = [&](int64_t t) { return k + ((b * l.tokens + t) * l.k_heads + kh) * dk; };
  // Token t's decay of key row i, through `e` (expf of each row's, or of the head's).
  auto decays = [&](int64_t t, float* e) {
    if (!l.gated()) return;
    const int64_t bt = b * l.tokens + t;
    const float* g = decay + (l.decay_per_key ? (bt * l.v_heads + h) * dk : bt * l.v_heads + h);
    if (l.decay_per_key) {
      for (int64_t i = 0; i < dk; ++i) e[i] = expf(g[i]);
    } else {
      std::fill(e, e + dk, expf(g[0]));
    }
  };
  float e_now[math::kLinearAttentionMaxKeyDim], e_next[math::kLinearAttentionMaxKeyDim];
  decays(0, e_now);
  // Sᵀk of the first token's decayed past (zeros decayed too: 0 · e, NaN for an e of NaN
  // or infinity).
  __m512 u[V];
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j) u[j] = _mm512_setzero_ps();
  if (l.delta()) {
    const float* k0 = key_row(0);
    for (int64_t i = 0; i < dk; ++i) {
      const __m512 e = _mm512_set1_ps(l.gated() ? e_now[i] : 1.0f), ki = _mm512_set1_ps(k0[i]);
#pragma GCC unroll 8
      for (int j = 0; j < V; ++j) {
        const __m512 x =
            past != nullptr ? _mm512_loadu_ps(past + i * dv + 16 * j) : _mm512_setzero_ps();
        u[j] = _mm512_fmadd_ps(l.gated() ? _mm512_mul_ps(x, e) : x, ki, u[j]);
      }
    }
  }
  for (int64_t t = 0; t < l.tokens; ++t) {
    const int64_t bt = b * l.tokens + t;
    const float* kr = key_row(t);
    const float* qr = q + (bt * l.q_heads + q0) * dk;
    const float* vr = v + (bt * l.v_heads + h) * dv;
    // The update: β · (v − Sᵀk), or v.
    const __m512 beta =
        _mm512_set1_ps(l.delta() ? rate[l.rate_per_head ? bt * l.v_heads + h : bt] : 1.0f);
    __m512 d[V];
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j) {
      const __m512 vj = _mm512_loadu_ps(vr + 16 * j);
      d[j] = l.delta() ? _mm512_mul_ps(_mm512_sub_ps(vj, u[j]), beta) : vj;
    }
    // The pass: decay and update each row, Sᵀq of the updated state, and the next
    // token's Sᵀk of its decay of it.
    const bool later = t + 1 < l.tokens, next = l.delta() && later;
    const float* kn = next ? key_row(t + 1) : nullptr;
    if (later) decays(t + 1, e_next);
    __m512 o[V];
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j) {
      o[j] = _mm512_setzero_ps();
      u[j] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < dk; ++i) {
      float* row = state + i * dv;
      // The row as the last token left it (the first token: the past's, or zeros).
      const float* from = t > 0 ? row : past != nullptr ? past + i * dv : nullptr;
      const __m512 e = _mm512_set1_ps(l.gated() ? e_now[i] : 1.0f);
      const __m512 ki = _mm512_set1_ps(kr[i]), qi = _mm512_set1_ps(qr[i]);
      const __m512 en = _mm512_set1_ps(next && l.gated() ? e_next[i] : 1.0f);
      const __m512 kni = _mm512_set1_ps(next ? kn[i] : 0.0f);
#pragma GCC unroll 8
      for (int j = 0; j < V; ++j) {
        const __m512 x = from != nullptr ? _mm512_loadu_ps(from + 16 * j) : _mm512_setzero_ps();
        const __m512 r = _mm512_fmadd_ps(ki, d[j], l.gated() ? _mm512_mul_ps(x, e) : x);
        _mm512_storeu_ps(row + 16 * j, r);
        o[j] = _mm512_fmadd_ps(r, qi, o[j]);
        if (next) u[j] = _mm512_fmadd_ps(l.gated() ? _mm512_mul_ps(r, en) : r, kni, u[j]);
      }
    }
    float* first = out + (bt * oh + (l.q_heads > l.v_heads ? q0 : h)) * dv;
    const __m512 scale = _mm512_set1_ps(l.scale);
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j) _mm512_storeu_ps(first + 16 * j, _mm512_mul_ps(o[j], scale));
    if (later && l.gated()) std::copy_n(e_next, dk, e_now);
  }
}

// LinearAttentionHeadRegisters<dv / 16>, where the CPU has AVX-512 and the head fits;
// false otherwise.
bool LinearAttentionHeadFast(const math::LinearAttentionLayout& l, const float* q, const float* k,
                             const float* v, const float* decay, const float* rate, float* out,
                             const float* past, float* state, int64_t b, int64_t h) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
  }();
  if (!avx512 || l.query_count() != 1 || l.dv % 16 != 0) return false;
  switch (l.dv / 16) {
#define TPC_HEAD_CASE(V)                                                              \
  case V:                                                                             \
    LinearAttentionHeadRegisters<V>(l, q, k, v, decay, rate, out, past, state, b, h); \
    return true;
    TPC_HEAD_CASE(1)
    TPC_HEAD_CASE(2)
    TPC_HEAD_CASE(3)
    TPC_HEAD_CASE(4)
    TPC_HEAD_CASE(5)
    TPC_HEAD_CASE(6)
    TPC_HEAD_CASE(7)
    TPC_HEAD_CASE(8)
#undef TPC_HEAD_CASE
    default:
      return false;
  }
}
#else
bool LinearAttentionHeadFast(const math::LinearAttentionLayout&, const float*, const float*,
                             const float*, const float*, const float*, float*, const float*, float*,
                             int64_t, int64_t) {
  return false;
}
#endif

}  // namespace

absl::Status LinearAttention(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::LinearAttentionLayout l, ReadLinearAttentionLayout(ctx));
  if (ctx.input(0).dtype() != ir::DType::kF32) {
    return ctx.Error("the CPU kernel takes float32 only");
  }
  auto data = [](const Tensor* t) { return t != nullptr ? t->data<float>() : nullptr; };
  TPC_ASSIGN_OR_RETURN(Tensor * y,
                       ctx.Output(0, {l.batch, l.tokens, l.out_heads() * l.dv}, ir::DType::kF32));
  float* out = y->data<float>();
  std::vector<float> unwanted;
  float* state = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * p,
                         ctx.Output(1, {l.batch, l.v_heads, l.dk, l.dv}, ir::DType::kF32));
    state = p->data<float>();
  } else {
    unwanted.resize(static_cast<size_t>(l.batch * l.v_heads * l.dk * l.dv));
    state = unwanted.data();
  }
  const float* past = data(ctx.optional_input(3));
  const int64_t head = l.dk * l.dv;
  // A task is one state head of one batch entry, over every token.
  ctx.pool().ParallelFor(l.batch * l.v_heads, 1, [&](int64_t first, int64_t last) {
    std::vector<float> mem(static_cast<size_t>(l.dv));
    for (int64_t bh = first; bh < last; ++bh) {
      if (l.tokens == 0) {  // no token: the present is the past
        float* s = state + bh * head;
        if (past != nullptr) {
          std::copy_n(past + bh * head, head, s);
        } else {
          std::fill(s, s + head, 0.0f);
        }
        continue;
      }
      const float* head_past = past != nullptr ? past + bh * head : nullptr;
      if (LinearAttentionHeadFast(l, data(&ctx.input(0)), data(&ctx.input(1)), data(&ctx.input(2)),
                                  data(ctx.optional_input(4)), data(ctx.optional_input(5)), out,
                                  head_past, state + bh * head, bh / l.v_heads, bh % l.v_heads)) {
        continue;
      }
      LinearAttentionHead(l, data(&ctx.input(0)), data(&ctx.input(1)), data(&ctx.input(2)),
                          data(ctx.optional_input(4)), data(ctx.optional_input(5)), out, head_past,
                          state + bh * head, bh / l.v_heads, bh % l.v_heads, mem.data());
    }
  });
  return absl::OkStatus();
}

// LinearAttentionGate(a [.., H], dt_bias [H], decay_scale [H], b [.., H]?) -> (decay,
// beta). The two vectors are f32 (onnxruntime's) or, in a half plan, a's type.
absl::Status CheckLinearGate(const KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& dt = ctx.input(1);
  const Tensor& ds = ctx.input(2);
  const Tensor* b = ctx.optional_input(3);
  const int64_t h = a.rank() > 0 ? a.dim(a.rank() - 1) : 0;
  if (a.rank() < 1 || dt.shape() != Shape{h} || ds.shape() != Shape{h} ||
      (dt.dtype() != ir::DType::kF32 && dt.dtype() != a.dtype()) || ds.dtype() != dt.dtype() ||
      (b != nullptr && (b->shape() != a.shape() || b->dtype() != a.dtype()))) {
    return ctx.Error(absl::StrCat("a ", a.TypeString(), ", dt_bias ", dt.TypeString(),
                                  ", decay_scale ", ds.TypeString(),
                                  b ? absl::StrCat(" and b ", b->TypeString()) : "",
                                  ": dt_bias and decay_scale must be [heads] of a's last dim, "
                                  "both f32 or a's type, b a's shape and type"));
  }
  if (ctx.wants_output(1) && b == nullptr) return ctx.Error("output beta needs input b");
  return absl::OkStatus();
}

absl::Status LinearAttentionGate(KernelContext& ctx) {
  TPC_RETURN_IF_ERROR(CheckLinearGate(ctx));
  const Tensor& a = ctx.input(0);
  if (a.dtype() != ir::DType::kF32) return ctx.Error("the CPU kernel takes float32 only");
  const int64_t n = a.num_elements(), h = a.dim(a.rank() - 1);
  const float* pa = a.data<float>();
  const float* dt = ctx.input(1).data<float>();
  const float* ds = ctx.input(2).data<float>();
  TPC_ASSIGN_OR_RETURN(Tensor * decay, ctx.Output(0, a.shape(), a.dtype()));
  float* pd = decay->data<float>();
  for (int64_t i = 0; i < n; ++i) pd[i] = math::LinearGateDecay(pa[i], dt[i % h], ds[i % h]);
  if (ctx.wants_output(1)) {
    const float* pb = ctx.optional_input(3)->data<float>();
    TPC_ASSIGN_OR_RETURN(Tensor * beta, ctx.Output(1, a.shape(), a.dtype()));
    float* pr = beta->data<float>();
    for (int64_t i = 0; i < n; ++i) pr[i] = math::LinearGateRate(pb[i]);
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
