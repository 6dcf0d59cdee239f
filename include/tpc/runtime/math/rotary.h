// Rotary position embedding of one head: the element arithmetic CPU and CUDA kernels share.
#pragma once

#include <cstdint>

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

}  // namespace tpc::runtime::math
