// Per-element and per-row math of onnxruntime's GroupQueryAttention on the device, as the
// CPU kernel (cpu/attention.cc) computes it: the rows' keys from seqlens_k, the rotary
// positions, Q and the present K/V laid out per head (rotated), and which keys a query
// sees. The host tests compare each piece with the CPU kernel.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/rotary.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct GqaLayout {
  int64_t batch = 0, seq = 0, hq = 0, hkv = 0, hd = 0;
  // The past's rows; past + seq: the presents' rows, or with a windowed cache the rows
  // attention runs over (the resident rows and the new ones).
  int64_t past = 0, total = 0;
  // sliding_window_cache: the past and the presents are a cache of `past` rows (its
  // capacity) holding only the latest rows, as onnxruntime lays it out (GqaWindowEnd);
  // seqlens_k stays the absolute count of keys minus one.
  bool windowed = false;
  bool packed = false;  // Q, K and V packed in the query input
  int64_t q_row = 0;    // the query input's last dim
  bool rotary = false, interleaved = false, has_positions = false;
  int64_t half = 0, cache_rows = 0;  // the rotary caches: [cache_rows, half]
  int64_t window = -1;               // local_window_size (<= 0: none)
  float softcap = 0.0f;
  bool smooth = false;  // smooth softmax
  bool sink = false;    // head_sink: a score per query head in each row's softmax
  float scale = 1.0f;   // of the scores
  // The fused per-head Q/K RMS norms (q_norm_weight, k_norm_weight) and their epsilons.
  bool qk_norm = false;
  float q_epsilon = 1e-6f, k_epsilon = 1e-6f;
};

// onnxruntime's windowed cache (sliding_window_cache) after `len` tokens of a row: its rows
// [0, end) hold the latest `end` of them. It fills up to the capacity C; past it, whole blocks
// of gap = C - window + 1 rows are dropped from the front at once, which keeps at least
// window - 1 rows of history.
TPC_HOST_DEVICE inline int64_t GqaWindowEnd(const GqaLayout& l, int64_t len) {
  const int64_t capacity = l.past, gap = l.past - l.window + 1;
  return len <= capacity ? len : len - gap * ((len - capacity + gap - 1) / gap);
}

// Row b's keys (seqlens_k[b] + 1) and its own past (the first rows of the past that are
// its keys: 0 for a first prompt); false when they do not fit the layout. With a windowed
// cache, the keys are the row's resident rows (its own past) and its new ones: the rows
// attention runs over, in which distances are those of the whole sequence. A row with
// fewer keys than new rows is read as a padded first prompt (its keys first, no past), as
// without a window; onnxruntime refuses it.
TPC_HOST_DEVICE inline bool GqaRowKeys(const GqaLayout& l, int64_t len, int64_t* keys,
                                       int64_t* own) {
  if (l.windowed) {
    const int64_t absolute_past = len + 1 - l.seq;
    *own = absolute_past < 0 ? 0 : GqaWindowEnd(l, absolute_past);
    *keys = absolute_past < 0 ? len + 1 : *own + l.seq;
    return len >= 0;
  }
  *keys = len + 1;
  *own = l.past == 0 ? 0 : *keys - l.seq;
  return *keys >= 1 && *keys <= l.total && *own >= 0;
}

// The position in the whole sequence of row b's first new token, given its seqlens_k and
// own past: the own past, or with a windowed cache all the tokens before.
TPC_HOST_DEVICE inline int64_t GqaRowStart(const GqaLayout& l, int64_t len, int64_t own) {
  return !l.windowed ? own : len + 1 < l.seq ? 0 : len + 1 - l.seq;
}

// The rotary position of row (b, s), given where row b's new tokens start
// (GqaRowStart); false outside the caches.
template <typename P>
TPC_HOST_DEVICE inline bool GqaPosition(const GqaLayout& l, const P* positions, int64_t start,
                                        int64_t b, int64_t s, int64_t* pos) {
  *pos = l.has_positions ? static_cast<int64_t>(positions[b * l.seq + s]) : start + s;
  return *pos >= 0 && *pos < l.cache_rows;
}

// With a windowed cache: the row of the rows attention ran over (the own past, then the new
// rows: GqaPresentElement's layout) that row t of row b's present holds after this step,
// or -1 where the present holds nothing (zeros): the rows [0, end) of the present are the
// last `end` of the row's keys.
TPC_HOST_DEVICE inline int64_t GqaWindowSource(const GqaLayout& l, int64_t len, int64_t t) {
  int64_t keys = 0, own = 0;
  if (!GqaRowKeys(l, len, &keys, &own)) return -1;
  const int64_t end = GqaWindowEnd(l, len + 1);
  return t < end ? keys - end + t : -1;
}

// Where head h of row (b, s) of Q (which 0), K (1) or V (2) is in the inputs.
template <typename S>
TPC_HOST_DEVICE inline const S* GqaSource(const GqaLayout& l, const S* query, const S* key,
                                          const S* value, int which, int64_t b, int64_t s,
                                          int64_t h) {
  const int64_t row = b * l.seq + s;
  if (which == 0) return query + row * l.q_row + h * l.hd;
  if (l.packed) return query + row * l.q_row + (l.hq + (which - 1) * l.hkv + h) * l.hd;
  return (which == 1 ? key : value) + row * l.hkv * l.hd + h * l.hd;
}

TPC_HOST_DEVICE inline float GqaSqrt(float v) { return sqrtf(v); }
TPC_HOST_DEVICE inline double GqaSqrt(double v) { return sqrt(v); }

// The fused per-head Q/K norms (onnxruntime's CUDA exports of Qwen 3 and the like), before
// the rotary: head j of the query input (Q's heads, then, packed, K's and V's; `key_input`:
// of the key input, K's heads), its hd elements x -> x · w / sqrt(mean(x²) + ε) with Q's or
// K's weight and epsilon, accumulated in IO's load type (f32; the CPU's f64 in f64) and
// stored; a V head is copied. As the unfused graph computes it: a SimplifiedLayerNormalization
// over each head (its output in the input's type), then the attention.
template <typename IO>
TPC_HOST_DEVICE inline void GqaNormHead(const GqaLayout& l, const typename IO::Storage* in,
                                        bool key_input, const typename IO::Storage* q_weight,
                                        const typename IO::Storage* k_weight,
                                        typename IO::Storage* out, int64_t j) {
  using A = decltype(IO::Load(typename IO::Storage{}));
  const int64_t per_row = key_input ? l.hkv : DivIndex(l.q_row, l.hd);
  const int64_t h = j - DivIndex(j, per_row) * per_row;
  const bool is_q = !key_input && h < l.hq;
  const bool is_k = key_input || (h >= l.hq && h < l.hq + l.hkv);
  const typename IO::Storage* x = in + j * l.hd;
  typename IO::Storage* y = out + j * l.hd;
  if (!is_q && !is_k) {
    for (int64_t d = 0; d < l.hd; ++d) y[d] = x[d];
    return;
  }
  const typename IO::Storage* w = is_q ? q_weight : k_weight;
  A sum = 0;
  for (int64_t d = 0; d < l.hd; ++d) sum += IO::Load(x[d]) * IO::Load(x[d]);
  const A eps = static_cast<A>(is_q ? l.q_epsilon : l.k_epsilon);
  const A inv = static_cast<A>(1) / GqaSqrt(sum / static_cast<A>(l.hd) + eps);
  for (int64_t d = 0; d < l.hd; ++d) y[d] = IO::Store(IO::Load(x[d]) * inv * IO::Load(w[d]));
}

// Element i of Q laid out [B, Hq, S, hd], rotated; false when row b's keys or the
// position do not fit (the element is then written unrotated).
template <FloatKind K, typename L, typename P>
TPC_HOST_DEVICE inline bool GqaQueryElement(
    const GqaLayout& l, const typename FloatIO<K>::Storage* query,
    const typename FloatIO<K>::Storage* key, const typename FloatIO<K>::Storage* value,
    const L* lens, const P* positions, const typename FloatIO<K>::Storage* cos,
    const typename FloatIO<K>::Storage* sin, typename FloatIO<K>::Storage* q, int64_t i) {
  using IO = FloatIO<K>;
  const int64_t d = i - DivIndex(i, l.hd) * l.hd;
  const int64_t r = DivIndex(i, l.hd);  // (b, h, s)
  const int64_t s = r - DivIndex(r, l.seq) * l.seq;
  const int64_t bh = DivIndex(r, l.seq);
  const int64_t h = bh - DivIndex(bh, l.hq) * l.hq;
  const int64_t b = DivIndex(bh, l.hq);
  const typename IO::Storage* x = GqaSource(l, query, key, value, 0, b, s, h);
  int64_t keys = 0, own = 0, pos = 0;
  const bool ok =
      GqaRowKeys(l, static_cast<int64_t>(lens[b]), &keys, &own) &&
      (!l.rotary ||
       GqaPosition(l, positions, GqaRowStart(l, static_cast<int64_t>(lens[b]), own), b, s, &pos));
  if (!l.rotary || !ok) {
    q[i] = x[d];
    return ok;
  }
  q[i] = IO::Store(
      RotatedElement<K>(x, cos + pos * l.half, sin + pos * l.half, l.half, l.interleaved, d));
  return true;
}

// Element i of the presents [B, Hkv, total, hd]: row b's own past, then its new keys
// (rotated) and values, then zeros. Writes pk[i] and pv[i]; false as GqaQueryElement.
template <FloatKind K, typename L, typename P>
TPC_HOST_DEVICE inline bool GqaPresentElement(
    const GqaLayout& l, const typename FloatIO<K>::Storage* query,
    const typename FloatIO<K>::Storage* key, const typename FloatIO<K>::Storage* value,
    const typename FloatIO<K>::Storage* past_k, const typename FloatIO<K>::Storage* past_v,
    const L* lens, const P* positions, const typename FloatIO<K>::Storage* cos,
    const typename FloatIO<K>::Storage* sin, typename FloatIO<K>::Storage* pk,
    typename FloatIO<K>::Storage* pv, int64_t i) {
  using IO = FloatIO<K>;
  using S = typename IO::Storage;
  const int64_t d = i - DivIndex(i, l.hd) * l.hd;
  const int64_t r = DivIndex(i, l.hd);  // (b, g, t)
  const int64_t t = r - DivIndex(r, l.total) * l.total;
  const int64_t bg = DivIndex(r, l.total);
  const int64_t g = bg - DivIndex(bg, l.hkv) * l.hkv;
  const int64_t b = DivIndex(bg, l.hkv);
  int64_t keys = 0, own = 0;
  if (!GqaRowKeys(l, static_cast<int64_t>(lens[b]), &keys, &own)) {
    pk[i] = pv[i] = S{};
    return false;
  }
  if (t < own) {
    const int64_t at = ((b * l.hkv + g) * l.past + t) * l.hd + d;
    pk[i] = past_k[at];
    pv[i] = past_v[at];
    return true;
  }
  if (t >= own + l.seq) {
    pk[i] = pv[i] = S{};
    return true;
  }
  const int64_t s = t - own;
  const S* xk = GqaSource(l, query, key, value, 1, b, s, g);
  pv[i] = GqaSource(l, query, key, value, 2, b, s, g)[d];
  int64_t pos = 0;
  if (!l.rotary) {
    pk[i] = xk[d];
    return true;
  }
  if (!GqaPosition(l, positions, GqaRowStart(l, static_cast<int64_t>(lens[b]), own), b, s, &pos)) {
    pk[i] = xk[d];
    return false;
  }
  pk[i] = IO::Store(
      RotatedElement<K>(xk, cos + pos * l.half, sin + pos * l.half, l.half, l.interleaved, d));
  return true;
}

// Element i of a windowed cache's presents [B, Hkv, past, hd] after the step, from the rows
// attention ran over (sk and sv [B, Hkv, total, hd], GqaPresentElement's): GqaWindowSource's
// row, or zero. False when row b's keys do not fit (the element is then zero).
template <typename S, typename L>
TPC_HOST_DEVICE inline bool GqaWindowPresentElement(const GqaLayout& l, const L* lens, const S* sk,
                                                    const S* sv, S* pk, S* pv, int64_t i) {
  const int64_t d = i - DivIndex(i, l.hd) * l.hd;
  const int64_t r = DivIndex(i, l.hd);  // (b, g, t)
  const int64_t t = r - DivIndex(r, l.past) * l.past;
  const int64_t bg = DivIndex(r, l.past);
  const int64_t b = DivIndex(bg, l.hkv);
  const int64_t len = static_cast<int64_t>(lens[b]);
  const int64_t u = GqaWindowSource(l, len, t);
  if (u < 0) {
    pk[i] = pv[i] = S{};
    return len >= 0;
  }
  const int64_t at = (bg * l.total + u) * l.hd + d;
  pk[i] = sk[at];
  pv[i] = sv[at];
  return true;
}

// Whether query i of a row with `keys` keys and own past `own` sees key j: causal at its
// position among the keys (a padded query of a first prompt, past its row's keys, sees
// all of them), within the local window when there is one.
TPC_HOST_DEVICE inline bool GqaOpen(const GqaLayout& l, int64_t keys, int64_t own, int64_t i,
                                    int64_t j) {
  const int64_t at = own + i < keys - 1 ? own + i : keys - 1;
  return j <= at && (l.window <= 0 || j > at - l.window);
}

// The extra score of query head h's softmax rows, in the max and the sum but given no
// probability (a row may attend to "nothing"): head_sink[h], or 0 with smooth_softmax (a
// head_sink wins over it, as in onnxruntime), or none (-inf).
template <typename IO>
TPC_HOST_DEVICE inline auto GqaSinkScore(const GqaLayout& l, const typename IO::Storage* sink,
                                         int64_t h) -> decltype(IO::Load(sink[0])) {
  using A = decltype(IO::Load(sink[0]));
  return l.sink ? IO::Load(sink[h]) : l.smooth ? A(0) : -static_cast<A>(INFINITY);
}

// A score after softcap (softcap · tanh(x / softcap); 0 leaves it).
TPC_HOST_DEVICE inline float GqaSoftcap(const GqaLayout& l, float x) {
  return l.softcap > 0.0f ? l.softcap * tanhf(x / l.softcap) : x;
}

}  // namespace tpc::runtime::math
