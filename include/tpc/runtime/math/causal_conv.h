// onnxruntime's CausalConvWithState (the short convolutions of LFM2, Mamba and Gated
// DeltaNet layers): a depthwise 1-D convolution over the sequence that sees only the
// current and earlier positions, its earlier positions carried between steps in a state.
// Per element, as the CPU kernel and the CUDA kernel compute them (checked against
// onnxruntime by the contrib node tests).
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// Input and output [batch, channels, length]; weight [channels, 1, k]; the state
// [batch, channels, state] with state = (k - 1) · dilation.
struct CausalConvLayout {
  int64_t batch = 0, channels = 0, length = 0, k = 1, dilation = 1;
  bool silu = false;
  TPC_HOST_DEVICE int64_t state() const { return (k - 1) * dilation; }
};

// Position u of row r (= b · channels + c) of the sequence the convolution runs over: the
// past state (zeros without one), then the input.
template <typename Load>
TPC_HOST_DEVICE inline float CausalConvPadded(const CausalConvLayout& l, Load x, Load past,
                                              bool has_past, int64_t r, int64_t u) {
  const int64_t s = l.state();
  if (u >= s) return x(r * l.length + u - s);
  return has_past ? past(r * s + u) : 0.0f;
}

// Output element (r, t) (of [batch · channels, length]): bias + Σ_j w[c, j] · padded(t + j ·
// dilation), then SiLU when asked.
template <typename Load>
TPC_HOST_DEVICE inline float CausalConvAt(const CausalConvLayout& l, Load x, Load past,
                                          bool has_past, Load w, Load bias, bool has_bias,
                                          int64_t r, int64_t t) {
  const int64_t c = r % l.channels;
  float acc = has_bias ? bias(c) : 0.0f;
  for (int64_t j = 0; j < l.k; ++j) {
    acc += w(c * l.k + j) * CausalConvPadded(l, x, past, has_past, r, t + j * l.dilation);
  }
  return l.silu ? acc / (1.0f + expf(-acc)) : acc;
}

// Output element i (of [batch, channels, length]): CausalConvAt's (r, t).
template <typename Load>
TPC_HOST_DEVICE inline float CausalConvElement(const CausalConvLayout& l, Load x, Load past,
                                               bool has_past, Load w, Load bias, bool has_bias,
                                               int64_t i) {
  return CausalConvAt(l, x, past, has_past, w, bias, has_bias, i / l.length, i % l.length);
}

// Present state element i (of [batch, channels, state], so state() > 0): the last
// `state` positions of the padded sequence.
template <typename Load>
TPC_HOST_DEVICE inline float CausalConvStateElement(const CausalConvLayout& l, Load x, Load past,
                                                    bool has_past, int64_t i) {
  const int64_t s = l.state();
  return CausalConvPadded(l, x, past, has_past, i / s, l.length + i % s);
}

}  // namespace tpc::runtime::math
