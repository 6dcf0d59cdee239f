// Float math the vectorizer can turn into SIMD loops: no calls, no branches on the data
// (selects only), integer bit tricks for powers of two. The CPU kernels' exp-based
// functions (Softmax, Sigmoid, SiLU, GELU) call these for f32; f64 keeps <cmath>.
// Accuracy (tests/runtime/vector_math_test.cc, against <cmath>): Exp within 2 ulp-ish
// (relative 3e-7) over its whole range, exp of a large negative is 0 below -87.5 (where
// std::exp gives a denormal under 1.2e-38), NaN stays NaN; GeluErf within 3e-7 absolute.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// Always inlined, so that the ISA-dispatched loops (isa_loops.cc) compile them at their
// own vector width instead of calling the baseline copy.
#define TPC_VMATH_INLINE inline __attribute__((always_inline))

namespace tpc::runtime::cpu {

// 2^n for integer n in [-126, 127], from the exponent bits.
TPC_VMATH_INLINE float Pow2(int32_t n) {
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// exp(x): Cody–Waite reduction x = n·ln2 + r, |r| <= ln2/2, then Cephes' degree-6
// polynomial for e^r, scaled by 2^n in two halves (so n = 128 and n = -126 stay normal).
TPC_VMATH_INLINE float VExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: x + kRound - kRound rounds to an integer
  const float xc = x < -87.5f ? -87.5f : (x > 88.75f ? 88.75f : x);
  const float n = (xc * kLog2e + kRound) - kRound;
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t half = ni >> 1;
  float y = p * Pow2(half) * Pow2(ni - half);
  y = x < -87.5f ? 0.0f : y;
  y = x > 88.7228394f ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

template <typename T>
TPC_VMATH_INLINE T Exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return VExp(x);
  } else {
    return std::exp(x);
  }
}

// 1 / (1 + e^-x) (0 and 1 at the ends, NaN for NaN).
template <typename T>
TPC_VMATH_INLINE T Sigmoid(T x) {
  return T(1) / (T(1) + Exp(-x));
}

// GELU, exact form x·Φ(x) = x/2·(1 + erf(x/√2)); for f32 erf by Abramowitz–Stegun 7.1.26
// (|error| <= 1.5e-7, plus float rounding), a rational-exp formula that vectorizes.
template <typename T>
TPC_VMATH_INLINE T GeluErf(T v) {
  if constexpr (std::is_same_v<T, float>) {
    const float z = v * 0.70710678118654752f;
    const float a = z < 0.0f ? -z : z;
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float e = 1.0f - p * t * VExp(-a * a);
    const float erf = z < 0.0f ? -e : e;
    return 0.5f * v * (1.0f + erf);
  } else {
    return T(0.5) * v * (T(1) + std::erf(v * static_cast<T>(0.7071067811865476)));
  }
}

// GELU with the tanh approximation; tanh(u) = 1 - 2 / (e^{2u} + 1), exact at the ends.
template <typename T>
TPC_VMATH_INLINE T GeluTanh(T v) {
  const T c = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
  const T u = c * (v + T(0.044715) * v * v * v);
  const T t = T(1) - T(2) / (Exp(T(2) * u) + T(1));
  return T(0.5) * v * (T(1) + t);
}

// (Log)softmax of one contiguous row of n: the maximum and the sum in 8 running lanes,
// the exponentials in a loop of their own (vector_math.h's Exp), so that each pass
// vectorizes. An all -inf row gives NaN, as exp(-inf - -inf) does.
template <typename T>
TPC_VMATH_INLINE void SoftmaxRow(const T* x, T* y, int64_t n, bool log) {
  T mx = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    // The row's max in 16 lanes of a generic vector (one AVX-512 register, two AVX2 ones):
    // written as a loop over an array of lanes, gcc kept it scalar (a vmaxss per element,
    // a quarter of a short attention row's softmax). A NaN is skipped here as below.
    typedef float F32x16 __attribute__((vector_size(64)));
    F32x16 lanes = {};
    lanes -= std::numeric_limits<float>::infinity();
    for (; j + 16 <= n; j += 16) {
      F32x16 v;
      std::memcpy(&v, x + j, sizeof(v));
      lanes = v > lanes ? v : lanes;
    }
    for (int l = 0; l < 16; ++l) mx = std::max(mx, lanes[l]);
  }
  for (; j < n; ++j) mx = std::max(mx, x[j]);
  for (int64_t i = 0; i < n; ++i) y[i] = Exp(static_cast<T>(x[i] - mx));
  constexpr int kLanes = 8;
  T lane_sum[kLanes] = {};
  j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane_sum[l] += y[j + l];
  double sum = 0;
  for (; j < n; ++j) sum += y[j];
  for (T v : lane_sum) sum += v;
  if (log) {
    const T shift = static_cast<T>(mx + std::log(sum));
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - shift;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

}  // namespace tpc::runtime::cpu
