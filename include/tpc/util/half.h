// IEEE half and bfloat16 conversions (round to nearest even), for constants and kernels:
// the same bit arithmetic on the host and, under nvcc, on the device.
#pragma once

#include <cstdint>
#include <cstring>

#include "tpc/util/host_device.h"

namespace tpc {
namespace half_detail {

TPC_HOST_DEVICE inline uint32_t Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

TPC_HOST_DEVICE inline float FromBits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

}  // namespace half_detail

TPC_HOST_DEVICE inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 (exact in float).
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return half_detail::FromBits(sign | 0x7f800000u | (mant << 13));
  return half_detail::FromBits(sign | ((exp + 112) << 23) | (mant << 13));
}

TPC_HOST_DEVICE inline uint16_t FloatToHalf(float f) {
  const uint32_t u = half_detail::Bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): abs * 2^24 (exact, < 1024) rounded to the nearest even.
    const float v = half_detail::FromBits(abs) * 16777216.0f;
    uint32_t i = static_cast<uint32_t>(v);
    const float frac = v - static_cast<float>(i);
    if (frac > 0.5f || (frac == 0.5f && (i & 1u))) ++i;
    return static_cast<uint16_t>(sign | i);
  }
  const uint32_t mant = abs & 0x7fffffu;
  const uint32_t exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

TPC_HOST_DEVICE inline float BFloat16ToFloat(uint16_t b) {
  return half_detail::FromBits(static_cast<uint32_t>(b) << 16);
}

TPC_HOST_DEVICE inline uint16_t FloatToBFloat16(float f) {
  const uint32_t u = half_detail::Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// f to f16 or bf16 as a half-precision plan stores an f32 constant: a finite value
// beyond the type's range saturates to its largest finite value instead of becoming an
// infinity (as onnxconverter-common's float16 conversion clamps). Exports write
// finfo(float32).min as the mask value; as -inf, `(1 - mask) · min` is 0 · -inf = NaN.
TPC_HOST_DEVICE inline uint16_t FloatToHalfSaturated(float f) {
  const uint16_t h = FloatToHalf(f);
  const bool finite = (half_detail::Bits(f) & 0x7fffffffu) < 0x7f800000u;
  return finite && (h & 0x7fffu) == 0x7c00u ? static_cast<uint16_t>(h - 1) : h;  // ±65504
}

TPC_HOST_DEVICE inline uint16_t FloatToBFloat16Saturated(float f) {
  const uint16_t b = FloatToBFloat16(f);
  const bool finite = (half_detail::Bits(f) & 0x7fffffffu) < 0x7f800000u;
  return finite && (b & 0x7fffu) == 0x7f80u ? static_cast<uint16_t>(b - 1) : b;  // ±3.39e38
}

}  // namespace tpc
