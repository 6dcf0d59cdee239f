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

}  // namespace tpc::runtime::math
