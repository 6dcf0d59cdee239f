// onnxruntime's LinearAttention (the recurrent form of linear attention: Gated DeltaNet's
// layers in Qwen 3.5 and Qwen3-Next, DeltaNet, RetNet, GLA) and LinearAttentionGate (the
// decay and update rate that feed it): the layout both backends read, the recurrence a
// state column at a time (the CUDA kernel's: a column a thread; the CPU kernel runs the
// same sums, in the same order of the key rows, a state head's rows at a time, and the
// contrib node tests check both against onnxruntime), and the gates per element.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// The recurrence, per token t, state head h (a [dk, dv] matrix S), g = decay, β = rate:
//   linear       S = S + k ⊗ v
//   gated        S = exp(g) · S + k ⊗ v
//   delta        S = S + β · k ⊗ (v − Sᵀk)
//   gated_delta  S = exp(g) · S + β · k ⊗ (v − exp(g) · Sᵀk)   (Sᵀk after the decay)
// and o = scale · Sᵀq. Each column j of S evolves on its own (its dk entries, v[j] and the
// column's output element), which is how both kernels divide the work.
enum class LinearRule : int { kLinear = 0, kGated = 1, kDelta = 2, kGatedDelta = 3 };

// The largest key head size a column's state may have (it lives in a thread's registers
// or stack as dk floats).
inline constexpr int64_t kLinearAttentionMaxKeyDim = 256;

// Inputs packed [batch, tokens, heads · size]: query Hq heads of dk, key Hk heads of dk,
// value Hv heads of dv; the state [batch, Hv, dk, dv] (one per value head). Either the
// query heads are a multiple of the value heads (GQA: query head i reads state i / (Hq /
// Hv), key head = value head) or the value heads of the query heads (inverse GQA, Qwen
// 3.5: value head h reads query and key head h / (Hv / Hq)). The output has max(Hq, Hv)
// heads of dv. decay [batch, tokens, Hv] (per head) or [.., Hv · dk] (per key row); rate
// [.., Hv] or [.., 1].
struct LinearAttentionLayout {
  int64_t batch = 0, tokens = 0, q_heads = 0, k_heads = 0, v_heads = 0, dk = 0, dv = 0;
  LinearRule rule = LinearRule::kGatedDelta;
  float scale = 1.0f;
  bool has_past = false, decay_per_key = false, rate_per_head = true;
  TPC_HOST_DEVICE bool gated() const {
    return rule == LinearRule::kGated || rule == LinearRule::kGatedDelta;
  }
  TPC_HOST_DEVICE bool delta() const {
    return rule == LinearRule::kDelta || rule == LinearRule::kGatedDelta;
  }
  TPC_HOST_DEVICE int64_t out_heads() const { return q_heads > v_heads ? q_heads : v_heads; }
  // The query heads that read state h: [first, first + count).
  TPC_HOST_DEVICE int64_t first_query(int64_t h) const {
    return q_heads > v_heads ? h * (q_heads / v_heads) : h / (v_heads / q_heads);
  }
  TPC_HOST_DEVICE int64_t query_count() const { return q_heads > v_heads ? q_heads / v_heads : 1; }
  TPC_HOST_DEVICE int64_t key_head(int64_t h) const { return h / (v_heads / k_heads); }
};

// Column j of state head h of batch entry b, over every token: reads its past column (or
// zeros), writes its output elements and its present column. Loads are functors of a flat
// index returning float; stores take (index, float).
template <typename Load, typename StoreOut, typename StoreState>
TPC_HOST_DEVICE inline void LinearAttentionColumn(const LinearAttentionLayout& l, Load q, Load k,
                                                  Load v, Load past, Load decay, Load rate,
                                                  StoreOut out, StoreState present, int64_t b,
                                                  int64_t h, int64_t j) {
  float s[kLinearAttentionMaxKeyDim];
  const int64_t dk = l.dk, dv = l.dv;
  const int64_t state = ((b * l.v_heads + h) * dk) * dv + j;  // S[b, h, 0, j]
  for (int64_t i = 0; i < dk; ++i) s[i] = l.has_past ? past(state + i * dv) : 0.0f;
  const int64_t kh = l.key_head(h), q0 = l.first_query(h), qn = l.query_count();
  const int64_t oh = l.out_heads();
  for (int64_t t = 0; t < l.tokens; ++t) {
    const int64_t bt = b * l.tokens + t;
    const int64_t krow = (bt * l.k_heads + kh) * dk;
    if (l.gated()) {
      if (l.decay_per_key) {
        const int64_t g0 = (bt * l.v_heads + h) * dk;
        for (int64_t i = 0; i < dk; ++i) s[i] *= expf(decay(g0 + i));
      } else {
        const float e = expf(decay(bt * l.v_heads + h));
        for (int64_t i = 0; i < dk; ++i) s[i] *= e;
      }
    }
    float update = v((bt * l.v_heads + h) * dv + j);
    if (l.delta()) {
      float mem = 0.0f;
      for (int64_t i = 0; i < dk; ++i) mem += s[i] * k(krow + i);
      update = (update - mem) * rate(l.rate_per_head ? bt * l.v_heads + h : bt);
    }
    for (int64_t i = 0; i < dk; ++i) s[i] += k(krow + i) * update;
    for (int64_t qi = q0; qi < q0 + qn; ++qi) {
      const int64_t qrow = (bt * l.q_heads + qi) * dk;
      float o = 0.0f;
      for (int64_t i = 0; i < dk; ++i) o += s[i] * q(qrow + i);
      out((bt * oh + (l.q_heads > l.v_heads ? qi : h)) * dv + j, l.scale * o);
    }
  }
  for (int64_t i = 0; i < dk; ++i) present(state + i * dv, s[i]);
}

// softplus(x) = log(1 + eˣ), as torch computes it (x itself above 20).
TPC_HOST_DEVICE inline float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// LinearAttentionGate, element i of a [..., H]: decay = decay_scale[h] · softplus(a +
// dt_bias[h]) and beta = sigmoid(b), h = i mod H.
TPC_HOST_DEVICE inline float LinearGateDecay(float a, float dt_bias, float decay_scale) {
  return decay_scale * Softplus(a + dt_bias);
}
TPC_HOST_DEVICE inline float LinearGateRate(float b) { return 1.0f / (1.0f + expf(-b)); }

}  // namespace tpc::runtime::math
