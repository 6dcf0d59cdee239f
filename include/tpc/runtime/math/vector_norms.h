// Normalizing short vectors: onnxruntime's GatedRMSNorm (the per-head norm of a Gated
// DeltaNet or Mamba2 layer's output, times a gate) and ONNX's LpNormalization. One vector
// at a time, as the CPU and the CUDA kernels compute them (in f32).
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// GatedRMSNorm over group g (elements [g · C, (g + 1) · C) of x and gate, C = the scale's
// length): y = x · rsqrt(mean(x²) + epsilon) · scale · act(gate), act silu (z · σ(z)) or
// sigmoid (σ(z)).
template <typename Load, typename Store>
TPC_HOST_DEVICE inline void GatedRmsNormGroup(Load x, Load scale, Load gate, int64_t c,
                                              float epsilon, bool silu, Store y, int64_t g) {
  const int64_t first = g * c;
  float sum = 0.0f;
  for (int64_t i = 0; i < c; ++i) {
    const float v = x(first + i);
    sum += v * v;
  }
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(c) + epsilon);
  for (int64_t i = 0; i < c; ++i) {
    const float z = gate(first + i);
    const float sig = 1.0f / (1.0f + expf(-z));
    y(first + i, x(first + i) * inv * scale(i) * (silu ? z * sig : sig));
  }
}

// LpNormalization of the line through element `first` with `count` elements `stride`
// apart: y = x / ‖x‖ₚ (p 1 or 2), zeros where the norm is 0 (onnxruntime's).
template <typename Load, typename Store>
TPC_HOST_DEVICE inline void LpNormalizeLine(Load x, int64_t first, int64_t count, int64_t stride,
                                            int p, Store y) {
  float norm = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    const float v = x(first + i * stride);
    norm += p == 1 ? fabsf(v) : v * v;
  }
  if (p == 2) norm = sqrtf(norm);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = first + i * stride;
    y(at, norm == 0.0f ? 0.0f : x(at) / norm);
  }
}

}  // namespace tpc::runtime::math
