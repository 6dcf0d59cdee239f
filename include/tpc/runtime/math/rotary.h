// Rotary position embedding of one head: the element arithmetic CPU and CUDA kernels share.
#pragma once

#include <cstdint>

#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// y = x rotated by the angles whose cosines and sines are `c` and `s` (`half` of each), for
// the first 2 · half elements (the rest is left to the caller); pairs are (i, i + half),
// or (2i, 2i + 1) when interleaved. y may be x.
template <typename T>
TPC_HOST_DEVICE void RotateHead(const T* x, const T* c, const T* s, int64_t half, bool interleaved,
                                T* y) {
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const T x1 = x[a], x2 = x[b];
    y[a] = c[i] * x1 - s[i] * x2;
    y[b] = s[i] * x1 + c[i] * x2;
  }
}

// Element i of Llama's rotate_half embedding (tpc::RotaryHalf) over contiguous rows of
// d = 2h of x: y = x·cos + rotate_half(x)·sin, rotate_half(x) = (-x[h:], x[:h]); cos and
// sin are read through their broadcast views of x's dims.
template <FloatKind K>
TPC_HOST_DEVICE inline void RotaryHalfElement(const typename FloatIO<K>::Storage* x,
                                              const typename FloatIO<K>::Storage* cos,
                                              const StridedView& vc,
                                              const typename FloatIO<K>::Storage* sin,
                                              const StridedView& vs, int64_t d,
                                              typename FloatIO<K>::Storage* y, int64_t i) {
  using IO = FloatIO<K>;
  const int64_t h = d / 2;
  const int64_t j = i - DivIndex(i, d) * d;
  const float rotated = j < h ? -IO::Load(x[i + h]) : IO::Load(x[i - h]);
  y[i] = IO::Store(IO::Load(x[i]) * IO::Load(cos[vc.At(i)]) + rotated * IO::Load(sin[vs.At(i)]));
}

// Element d of head row x rotated by the angles of cosines c and sines s (`half` each):
// pairs (i, i + half), or (2i, 2i + 1) when interleaved; elements past 2 · half as they
// are. As math::RotateHead, in f32.
template <FloatKind K>
TPC_HOST_DEVICE inline float RotatedElement(const typename FloatIO<K>::Storage* x,
                                            const typename FloatIO<K>::Storage* c,
                                            const typename FloatIO<K>::Storage* s, int64_t half,
                                            bool interleaved, int64_t d) {
  using IO = FloatIO<K>;
  if (d >= 2 * half) return IO::Load(x[d]);
  if (interleaved) {
    const int64_t i = d / 2;
    return d % 2 == 0 ? IO::Load(c[i]) * IO::Load(x[d]) - IO::Load(s[i]) * IO::Load(x[d + 1])
                      : IO::Load(s[i]) * IO::Load(x[d - 1]) + IO::Load(c[i]) * IO::Load(x[d]);
  }
  if (d < half) return IO::Load(c[d]) * IO::Load(x[d]) - IO::Load(s[d]) * IO::Load(x[d + half]);
  const int64_t i = d - half;
  return IO::Load(s[i]) * IO::Load(x[i]) + IO::Load(c[i]) * IO::Load(x[d]);
}

// RotaryEmbedding's layout (ONNX opset 23 and onnxruntime's): x is [batch, heads, seq,
// hd] (four_d) or [batch, seq, heads · hd]; the cache row of (b, s) is b · seq + s (mode
// 0: ONNX's caches [batch, seq, half] without position ids), positions[b · seq + s] (1),
// or positions[0] + s (2: onnxruntime's [1] offset).
struct RotaryLayout {
  int64_t batch = 0, heads = 0, seq = 0, hd = 0, half = 0, cache_rows = 0;
  bool four_d = false, interleaved = false;
  int pos_mode = 0;
};

// Element i of RotaryEmbedding's output: x[i] rotated with the rest of its head row by
// its cache row's angles (past 2 · half, as it is); false when the row is outside the
// caches (x[i] then copied).
template <FloatKind K, typename P>
TPC_HOST_DEVICE inline bool RotaryEmbeddingElement(const RotaryLayout& l,
                                                   const typename FloatIO<K>::Storage* x,
                                                   const P* positions,
                                                   const typename FloatIO<K>::Storage* cos,
                                                   const typename FloatIO<K>::Storage* sin,
                                                   typename FloatIO<K>::Storage* y, int64_t i) {
  const int64_t r = DivIndex(i, l.hd);
  const int64_t d = i - r * l.hd;
  int64_t b = 0, s = 0;
  if (l.four_d) {  // r = (b · heads + h) · seq + s
    s = r - DivIndex(r, l.seq) * l.seq;
    b = DivIndex(DivIndex(r, l.seq), l.heads);
  } else {  // r = (b · seq + s) · heads + h
    const int64_t bs = DivIndex(r, l.heads);
    s = bs - DivIndex(bs, l.seq) * l.seq;
    b = DivIndex(bs, l.seq);
  }
  const int64_t row = l.pos_mode == 0   ? b * l.seq + s
                      : l.pos_mode == 1 ? static_cast<int64_t>(positions[b * l.seq + s])
                                        : static_cast<int64_t>(positions[0]) + s;
  if (row < 0 || row >= l.cache_rows) {
    y[i] = x[i];
    return false;
  }
  y[i] = FloatIO<K>::Store(RotatedElement<K>(x + (i - d), cos + row * l.half, sin + row * l.half,
                                             l.half, l.interleaved, d));
  return true;
}

// onnxruntime's MRotaryEmbedding (M-RoPE: Qwen2-VL, Qwen3-VL, Qwen 3.5): each token has
// three positions (temporal, height, width: position_ids [3, batch, seq]) and each of the
// `half` angles of a head takes its cos/sin from one of them: sections t, h, w of the half
// in turn (chunked), or, interleaved, t everywhere but every third index from 1 below 3h
// (height) and from 2 below 3w (width).
struct MRopeSections {
  int64_t t = 0, h = 0, w = 0;
  bool interleaved = false;
};

// The position stream (0 t, 1 h, 2 w) of angle i.
TPC_HOST_DEVICE inline int MRopeStream(const MRopeSections& s, int64_t i) {
  if (!s.interleaved) return i < s.t ? 0 : (i < s.t + s.h ? 1 : 2);
  if (i % 3 == 1 && i < 3 * s.h) return 1;
  if (i % 3 == 2 && i < 3 * s.w) return 2;
  return 0;
}

// Element e of the token-by-token caches [tokens, half] M-RoPE rotates with (RotaryLayout's
// mode 0): the cache row angle e mod half of token e / half reads, its stream's position.
template <typename P>
TPC_HOST_DEVICE inline int64_t MRopeCacheRow(const MRopeSections& s, const P* positions,
                                             int64_t tokens, int64_t half, int64_t e) {
  const int64_t token = e / half;
  return static_cast<int64_t>(positions[MRopeStream(s, e - token * half) * tokens + token]);
}

}  // namespace tpc::runtime::math
