// Row math of the device kernels (Softmax, LayerNormalization, RMS norm, reductions): a
// row is `len` elements `inner` apart, row r of [outer, len, inner] starting at
// (r / inner) · len · inner + r % inner. Statistics accumulate in f32 with the combine
// functions below (a thread block combines partial results in any order); the outputs
// come from the element functions. The host tests run them row by row.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct RowLayout {
  int64_t outer = 1, len = 1, inner = 1;
  TPC_HOST_DEVICE int64_t rows() const { return outer * inner; }
  TPC_HOST_DEVICE int64_t Start(int64_t r) const { return (r / inner) * len * inner + r % inner; }
  TPC_HOST_DEVICE int64_t stride() const { return inner; }
};

// Softmax: the row's max, then the sum of exp(x - max).
TPC_HOST_DEVICE inline float CombineMax(float a, float b) { return a > b ? a : b; }
TPC_HOST_DEVICE inline float SoftmaxTerm(float x, float max) { return expf(x - max); }
TPC_HOST_DEVICE inline float SoftmaxElement(float x, float max, float sum, bool log) {
  return log ? (x - max) - logf(sum) : expf(x - max) / sum;
}

// The attention core's score before its softmax (tpc::AttentionCore): the product Q·Kᵀ,
// already multiplied by the scale when the chain multiplies, divided by it when the chain
// divides (`divisor` 1 otherwise), plus the mask's value (0 without a mask), as the CPU
// kernel's ScaleMaskSoftmaxRows computes it.
TPC_HOST_DEVICE inline float AttentionScore(float product, float divisor, float mask) {
  return (divisor != 1.0f ? product / divisor : product) + mask;
}

// Mean and variance by Welford's update, combined pairwise (Chan et al.).
// An aggregate (no initializers: it sits in CUDA shared memory); start from Moments{}.
struct Moments {
  float count, mean, m2;
  TPC_HOST_DEVICE void Add(float x) {
    count += 1.0f;
    const float d = x - mean;
    mean += d / count;
    m2 += d * (x - mean);
  }
  TPC_HOST_DEVICE static Moments Combine(const Moments& a, const Moments& b) {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    Moments m{};
    m.count = a.count + b.count;
    const float d = b.mean - a.mean;
    m.mean = a.mean + d * (b.count / m.count);
    m.m2 = a.m2 + b.m2 + d * d * (a.count * b.count / m.count);
    return m;
  }
  TPC_HOST_DEVICE float Variance() const { return count > 0 ? m2 / count : 0.0f; }
};

TPC_HOST_DEVICE inline float InvStd(float variance, float epsilon) {
  return 1.0f / sqrtf(variance + epsilon);
}
// LayerNormalization's element: (x - mean) · inv_std · scale + bias. RMS norm passes
// mean 0 and inv_std = 1 / sqrt(mean(x²) + epsilon), bias 0.
TPC_HOST_DEVICE inline float NormElement(float x, float mean, float inv_std, float scale,
                                         float bias) {
  return (x - mean) * inv_std * scale + bias;
}

enum class ReduceKind : int { kSum, kMean, kMax, kMin, kSumSquare };

TPC_HOST_DEVICE inline float ReduceInit(ReduceKind k) {
  return k == ReduceKind::kMax ? -INFINITY : k == ReduceKind::kMin ? INFINITY : 0.0f;
}
TPC_HOST_DEVICE inline float ReduceTerm(ReduceKind k, float x) {
  return k == ReduceKind::kSumSquare ? x * x : x;
}
TPC_HOST_DEVICE inline float ReduceCombine(ReduceKind k, float a, float b) {
  switch (k) {
    case ReduceKind::kMax:
      return (a != a || a > b) ? a : b;
    case ReduceKind::kMin:
      return (a != a || a < b) ? a : b;
    default:
      return a + b;
  }
}
TPC_HOST_DEVICE inline float ReduceFinish(ReduceKind k, float acc, int64_t len) {
  return k == ReduceKind::kMean ? acc / static_cast<float>(len) : acc;
}

}  // namespace tpc::runtime::math
