#include "isa_loops.h"

#include <cmath>

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

template <Activation A>
inline void Rows(float* y, int64_t rows, int64_t ld, int64_t cols, const float* bias) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    if (bias != nullptr) {
      for (int64_t j = 0; j < cols; ++j) row[j] = Apply<A>(row[j] + bias[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) row[j] = Apply<A>(row[j]);
    }
  }
}

template <Activation A>
inline void Copy(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Apply<A>(x[i]);
}

}  // namespace

TPC_ISA_CLONES void ActivationRows(Activation act, float* y, int64_t rows, int64_t ld, int64_t cols,
                                   const float* bias) {
  switch (act) {
    case Activation::kNone:
      return Rows<Activation::kNone>(y, rows, ld, cols, bias);
    case Activation::kGelu:
      return Rows<Activation::kGelu>(y, rows, ld, cols, bias);
    case Activation::kGeluTanh:
      return Rows<Activation::kGeluTanh>(y, rows, ld, cols, bias);
    case Activation::kRelu:
      return Rows<Activation::kRelu>(y, rows, ld, cols, bias);
    case Activation::kTanh:
      return Rows<Activation::kTanh>(y, rows, ld, cols, bias);
    case Activation::kSigmoid:
      return Rows<Activation::kSigmoid>(y, rows, ld, cols, bias);
    case Activation::kSiLU:
      return Rows<Activation::kSiLU>(y, rows, ld, cols, bias);
  }
}

TPC_ISA_CLONES void ActivationCopy(Activation act, const float* x, float* y, int64_t n) {
  switch (act) {
    case Activation::kNone:
      return Copy<Activation::kNone>(x, y, n);
    case Activation::kGelu:
      return Copy<Activation::kGelu>(x, y, n);
    case Activation::kGeluTanh:
      return Copy<Activation::kGeluTanh>(x, y, n);
    case Activation::kRelu:
      return Copy<Activation::kRelu>(x, y, n);
    case Activation::kTanh:
      return Copy<Activation::kTanh>(x, y, n);
    case Activation::kSigmoid:
      return Copy<Activation::kSigmoid>(x, y, n);
    case Activation::kSiLU:
      return Copy<Activation::kSiLU>(x, y, n);
  }
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
