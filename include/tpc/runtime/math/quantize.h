// Element math of linear quantization (QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear), shared by the CPU kernels (cpu/quantize.cc) and the CUDA ones
// (cuda/quantize.cu). Rounding is to nearest, ties to even (rint in the default FP
// mode), as ONNX's reference rounds.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// Which element of a scale (and zero point) applies to element i of x: one for the whole
// tensor, one per index of the axis (`dim` long, `inner` elements after it), or (blocked,
// opset 21) one per `block` consecutive indices of the axis with the other dims matching
// x's (the scale is x's shape with the axis cut to `blocks`).
struct QuantIndex {
  enum class Mode : int { kTensor, kAxis, kBlocked };
  Mode mode = Mode::kTensor;
  int64_t dim = 1, inner = 1, block = 1, blocks = 1;

  TPC_HOST_DEVICE int64_t At(int64_t i) const {
    switch (mode) {
      case Mode::kTensor:
        return 0;
      case Mode::kAxis:
        return (i / inner) % dim;
      case Mode::kBlocked: {
        const int64_t outer = i / (dim * inner), a = (i / inner) % dim, r = i % inner;
        return (outer * blocks + a / block) * inner + r;
      }
    }
    return 0;
  }
};

// A rounded value clamped to [lo, hi], the range of the quantized type (which holds 0);
// NaN gives 0 (its conversion to an integer would be undefined).
TPC_HOST_DEVICE inline double Saturate(double v, double lo, double hi) {
  if (v != v) return 0.0;
  return v < lo ? lo : (v > hi ? hi : v);
}

// QuantizeLinear of an f32 element: x / scale in f32, rounded, plus the zero point,
// saturated (the value the integer output holds).
TPC_HOST_DEVICE inline double QuantizeElement(float x, float scale, double zero_point, double lo,
                                              double hi) {
  return Saturate(static_cast<double>(rintf(x / scale)) + zero_point, lo, hi);
}

// DequantizeLinear's element: (x − zero point) · scale in double (exact for every
// quantized type, then rounded once to the output's type).
TPC_HOST_DEVICE inline double DequantizeElement(double x, double zero_point, double scale) {
  return (x - zero_point) * scale;
}

// An exact integer (a product of MatMulInteger, summed in f64) as int32, wrapping as int32
// arithmetic would.
TPC_HOST_DEVICE inline int32_t WrapInt32(double v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
}

// QLinearMatMul's output element from the exact product `acc` of the centered operands:
// the multiplier a_scale · b_scale / y_scale in f32 (the scales' type), the rest in f64, as
// ONNX's reference; rounded, plus the zero point, saturated to [lo, hi].
TPC_HOST_DEVICE inline double RequantizeElement(double acc, float a_scale, float b_scale,
                                                float y_scale, double y_zero_point, double lo,
                                                double hi) {
  const float mult = a_scale * b_scale / y_scale;
  return Saturate(rint(acc * static_cast<double>(mult) + y_zero_point), lo, hi);
}

// DynamicQuantizeLinear's uint8 parameters from the extremes of x: the range [min(x, 0),
// max(x, 0)] over 255 steps (a range of 0 gives the scale 1/255), and the zero point that
// maps 0 exactly, in f32 as ONNX's reference computes them. A NaN extreme counts as 0.
struct DynamicQuant {
  float scale, zero_point;
};
TPC_HOST_DEVICE inline DynamicQuant DynamicQuantParams(float min_x, float max_x) {
  const float lo = min_x < 0.0f ? min_x : 0.0f, hi = max_x > 0.0f ? max_x : 0.0f;
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const float zp = static_cast<float>(Saturate(0.0f - lo / scale, 0.0, 255.0));
  return {scale, rintf(zp)};
}

}  // namespace tpc::runtime::math
