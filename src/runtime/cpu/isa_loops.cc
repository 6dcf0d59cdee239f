#include "isa_loops.h"

#include <cmath>
#include <type_traits>

#include "vector_math.h"

#if defined(__x86_64__) && !defined(TPC_NO_TARGET_CLONES)
#define TPC_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TPC_ISA_CLONES
#endif

namespace tpc::runtime::cpu {
namespace {

template <Activation A>
inline float Apply(float v) {
  if constexpr (A == Activation::kGelu) return GeluErf(v);
  if constexpr (A == Activation::kGeluTanh) return GeluTanh(v);
  if constexpr (A == Activation::kRelu) return v > 0.0f ? v : 0.0f;
  if constexpr (A == Activation::kTanh) return std::tanh(v);
  if constexpr (A == Activation::kSigmoid) return Sigmoid(v);
  if constexpr (A == Activation::kSiLU) return v * Sigmoid(v);
  return v;
}

// f(std::integral_constant<Activation, act>{}): one instantiation per activation, so that
// each loop is compiled with its activation inlined. It and the loops handed to it are
// always inlined: a call out of a clone would run the loop at the baseline's width.
template <typename F>
TPC_VMATH_INLINE void WithActivation(Activation act, F&& f) {
  using A = Activation;
  switch (act) {
    case A::kNone:
      return f(std::integral_constant<A, A::kNone>{});
    case A::kGelu:
      return f(std::integral_constant<A, A::kGelu>{});
    case A::kGeluTanh:
      return f(std::integral_constant<A, A::kGeluTanh>{});
    case A::kRelu:
      return f(std::integral_constant<A, A::kRelu>{});
    case A::kTanh:
      return f(std::integral_constant<A, A::kTanh>{});
    case A::kSigmoid:
      return f(std::integral_constant<A, A::kSigmoid>{});
    case A::kSiLU:
      return f(std::integral_constant<A, A::kSiLU>{});
  }
}

}  // namespace

TPC_ISA_CLONES void ActivationRows(Activation act, float* y, int64_t rows, int64_t ld, int64_t cols,
                                   const float* bias) {
  WithActivation(
      act, [&](auto a) __attribute__((always_inline)) {
        for (int64_t r = 0; r < rows; ++r) {
          float* row = y + r * ld;
          if (bias != nullptr) {
            for (int64_t j = 0; j < cols; ++j) row[j] = Apply<a()>(row[j] + bias[j]);
          } else {
            for (int64_t j = 0; j < cols; ++j) row[j] = Apply<a()>(row[j]);
          }
        }
      });
}

TPC_ISA_CLONES void ActivationCopy(Activation act, const float* x, float* y, int64_t n) {
  WithActivation(
      act, [&](auto a) __attribute__((always_inline)) {
        for (int64_t i = 0; i < n; ++i) y[i] = Apply<a()>(x[i]);
      });
}

TPC_ISA_CLONES void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  for (int64_t r = 0; r < rows; ++r) SoftmaxRow(x + r * n, y + r * n, n, log);
}

TPC_ISA_CLONES void ScaleMaskSoftmaxRows(float* s, int64_t rows, int64_t n, float divisor,
                                         const float* mask, int64_t mask_row, int64_t mask_col) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * n;
    if (divisor != 1.0f) {
      for (int64_t j = 0; j < n; ++j) row[j] /= divisor;
    }
    if (mask != nullptr) {
      const float* m = mask + r * mask_row;
      if (mask_col == 1) {
        for (int64_t j = 0; j < n; ++j) row[j] += m[j];
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] += m[j * mask_col];
      }
    }
    SoftmaxRow(row, row, n, false);
  }
}

}  // namespace tpc::runtime::cpu
