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

// A reduction: each element's term (x, x², |x|), the combine (sum, max, min, product), and
// the finish of the total (mean: ÷ len; L2: √; log-sum: log).
// GroupNormalization's rows (InstanceNormalization's: a group per channel): row r is the
// group r % groups of image r / groups, its group_channels · plane elements contiguous.
// Element k of row r takes the scale and bias at Affine(r, k): its channel's, or its
// group's.
struct ChannelGroups {
  int64_t groups = 1, group_channels = 1, plane = 1;
  bool per_channel = true;
  TPC_HOST_DEVICE int64_t len() const { return group_channels * plane; }
  TPC_HOST_DEVICE int64_t Affine(int64_t row, int64_t k) const {
    const int64_t g = row % groups;
    return per_channel ? g * group_channels + k / plane : g;
  }
};

// BatchNormalization's element (inference, the running statistics): x · a + (bias − mean
// · a), a = scale / √(var + ε), as the CPU kernel (which computes in double).
TPC_HOST_DEVICE inline float BatchNormElement(float x, float scale, float bias, float mean,
                                              float var, float epsilon) {
  const float a = scale / sqrtf(var + epsilon);
  return x * a + (bias - mean * a);
}

// LRN's element i of [N, channels, plane]: x / (bias + alpha / size · Σ x² over the
// channels [c − lo, c + hi] ∩ [0, channels))^beta, lo = (size − 1) / 2, hi = size − 1 − lo,
// as the CPU kernel (which computes in double); `load(j)` reads element j.
template <typename Load>
TPC_HOST_DEVICE inline float LrnElement(int64_t channels, int64_t plane, int64_t size, float alpha,
                                        float beta, float bias, int64_t i, Load load) {
  const int64_t k = i % plane, c = (i / plane) % channels, image = i / (plane * channels);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  const int64_t first = c - lo < 0 ? 0 : c - lo, last = c + hi < channels ? c + hi : channels - 1;
  float sum = 0.0f;
  for (int64_t j = first; j <= last; ++j) {
    const float v = load((image * channels + j) * plane + k);
    sum += v * v;
  }
  return load(i) / powf(bias + alpha / static_cast<float>(size) * sum, beta);
}

// MeanVarianceNormalization's element: (x − mean) / (sqrt(var) + 1e-9), from its group's
// mean and its sum of squared deviations Σ(x − mean)² over `count` elements (two passes:
// f32 keeps its precision for data far from zero, where E[x²] − mean² would cancel; the
// CPU kernel takes E[x²] − mean² in double).
TPC_HOST_DEVICE inline float MvnElement(float x, float mean, float centered_squares, float count) {
  return (x - mean) / (sqrtf(centered_squares / count) + 1e-9f);
}

// kMaxNumber and kMinNumber skip NaN (a NaN only where every element is one), as
// std::fmax/fmin: DynamicQuantizeLinear's range, which the CPU takes with std::max/min.
enum class ReduceKind : int {
  kSum,
  kMean,
  kMax,
  kMin,
  kSumSquare,
  kProd,
  kL1,
  kL2,
  kLogSum,
  kMaxNumber,
  kMinNumber
};

TPC_HOST_DEVICE inline float ReduceInit(ReduceKind k) {
  return k == ReduceKind::kMax || k == ReduceKind::kMaxNumber   ? -INFINITY
         : k == ReduceKind::kMin || k == ReduceKind::kMinNumber ? INFINITY
         : k == ReduceKind::kProd                               ? 1.0f
                                                                : 0.0f;
}
TPC_HOST_DEVICE inline float ReduceTerm(ReduceKind k, float x) {
  return k == ReduceKind::kSumSquare || k == ReduceKind::kL2 ? x * x
         : k == ReduceKind::kL1                              ? fabsf(x)
                                                             : x;
}
TPC_HOST_DEVICE inline float ReduceCombine(ReduceKind k, float a, float b) {
  switch (k) {
    case ReduceKind::kMax:
      return (a != a || a > b) ? a : b;
    case ReduceKind::kMin:
      return (a != a || a < b) ? a : b;
    case ReduceKind::kMaxNumber:
      return fmaxf(a, b);
    case ReduceKind::kMinNumber:
      return fminf(a, b);
    case ReduceKind::kProd:
      return a * b;
    default:
      return a + b;
  }
}
TPC_HOST_DEVICE inline float ReduceFinish(ReduceKind k, float acc, int64_t len) {
  switch (k) {
    case ReduceKind::kMean:
      return acc / static_cast<float>(len);
    case ReduceKind::kL2:
      return sqrtf(acc);
    case ReduceKind::kLogSum:
      return logf(acc);
    default:
      return acc;
  }
}

// One row pass of a reduction over several axes, which the device runs one axis at a
// time: only the first pass takes the terms of the input (later ones combine partial
// totals), only the last finishes, except a mean, which every pass finishes (a mean of
// equal-sized means is the mean).
struct ReducePass {
  ReduceKind kind = ReduceKind::kSum;
  bool terms = true, finish = true;
  // NOLINTNEXTLINE(google-explicit-constructor): a one-pass reduction reads as its kind.
  TPC_HOST_DEVICE constexpr ReducePass(ReduceKind k, bool first = true, bool last = true)
      : kind(k), terms(first), finish(last || k == ReduceKind::kMean) {}
};
TPC_HOST_DEVICE inline float ReducePassTerm(const ReducePass& p, float x) {
  return p.terms ? ReduceTerm(p.kind, x) : x;
}
TPC_HOST_DEVICE inline float ReducePassFinish(const ReducePass& p, float acc, int64_t len) {
  return p.finish ? ReduceFinish(p.kind, acc, len) : acc;
}

// CumSum of line r of [outer, len, inner] (the elements a RowLayout row names), in order
// or reversed, each output the sum of the elements before it (exclusive) or up to it; the
// running sum in f32.
template <typename Load, typename Store>
TPC_HOST_DEVICE inline void CumSumLine(const RowLayout& l, int64_t r, bool exclusive, bool reverse,
                                       Load load, Store store) {
  const int64_t base = l.Start(r);
  float acc = 0.0f;
  for (int64_t step = 0; step < l.len; ++step) {
    const int64_t at = base + (reverse ? l.len - 1 - step : step) * l.stride();
    const float v = load(at);
    if (exclusive) {
      store(at, acc);
      acc += v;
    } else {
      acc += v;
      store(at, acc);
    }
  }
}

// ArgMax and ArgMin: the CPU kernel scans a row in order, keeping the first element and
// replacing it by each later one strictly better (or equal, with select_last_index).
// The same winner as a commutative, associative choice, so threads may fold any elements
// and combine in any order: a NaN at index 0 wins (nothing replaces it), a NaN elsewhere
// loses to everything (it never replaces); otherwise the better value, ties broken by
// index (the smaller, or the larger with `last`). An aggregate (it sits in shared memory);
// index -1 is no element.
struct ArgBest {
  float value;
  int64_t index;
};
TPC_HOST_DEVICE inline ArgBest ArgChoose(ArgBest a, ArgBest b, bool max, bool last) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const auto rank = [](const ArgBest& e) {  // 2: NaN at 0, 1: a number, 0: a NaN elsewhere
    return e.value != e.value ? (e.index == 0 ? 2 : 0) : 1;
  };
  const int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra > rb ? a : b;
  if (ra == 1 && a.value != b.value) return (max ? a.value > b.value : a.value < b.value) ? a : b;
  return (last ? a.index > b.index : a.index < b.index) ? a : b;
}

// TopK as k rounds over a line: each round takes the entry that ranks first among those
// ranking after the previous round's (no element is taken twice, and ties come out in
// index order, as the CPU's stable sort gives them). The ranking: by value, largest (or
// smallest) first, equal values by index; NaNs after every number, by index; index -1 (no
// entry) last. An aggregate (it sits in shared memory).
struct TopKEntry {
  float value;
  int64_t index;
};
TPC_HOST_DEVICE inline bool TopKBefore(const TopKEntry& a, const TopKEntry& b, bool largest) {
  if (a.index < 0 || b.index < 0) return b.index < 0 && a.index >= 0;
  const bool an = a.value != a.value, bn = b.value != b.value;
  if (an || bn) return an == bn ? a.index < b.index : bn;
  if (a.value != b.value) return largest ? a.value > b.value : a.value < b.value;
  return a.index < b.index;
}

}  // namespace tpc::runtime::math
