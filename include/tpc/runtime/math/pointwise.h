// Per-element math of the device kernels, in f32: binary ops (with broadcasting through
// StridedView), unary ops, Where. The CPU kernels compute the same functions; the host
// tests run these over whole tensors and compare with the CPU backend.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin };

TPC_HOST_DEVICE inline float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kPow:
      return powf(a, b);
    case BinaryOp::kMax:
      return (a != a || a > b) ? a : b;  // NaN propagates
    case BinaryOp::kMin:
      return (a != a || a < b) ? a : b;
  }
  return 0.0f;
}

enum class UnaryOp : int {
  kIdentity,
  kRelu,
  kTanh,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kReciprocal,
  kSigmoid,
  kGeluErf,    // x · Φ(x)
  kGeluTanh,   // the tanh approximation (Gelu approximate="tanh", FastGelu)
  kSilu,       // x · sigmoid(x)
  kQuickGelu,  // x · sigmoid(alpha · x)
  kLeakyRelu,  // alpha · x below 0
};

TPC_HOST_DEVICE inline float ApplyUnary(UnaryOp op, float x, float alpha) {
  switch (op) {
    case UnaryOp::kIdentity:
      return x;
    case UnaryOp::kRelu:
      return x > 0.0f ? x : (x != x ? x : 0.0f);
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kErf:
      return erff(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kAbs:
      return fabsf(x);
    case UnaryOp::kReciprocal:
      return 1.0f / x;
    case UnaryOp::kSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case UnaryOp::kGeluErf:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case UnaryOp::kSilu:
      return x / (1.0f + expf(-x));
    case UnaryOp::kQuickGelu:
      return x / (1.0f + expf(-alpha * x));
    case UnaryOp::kLeakyRelu:
      return x < 0.0f ? alpha * x : x;
  }
  return 0.0f;
}

// Element i of out = op(a, b), each read through its view of the output's dims.
template <FloatKind K>
TPC_HOST_DEVICE inline void BinaryElement(BinaryOp op, const typename FloatIO<K>::Storage* a,
                                          const StridedView& va,
                                          const typename FloatIO<K>::Storage* b,
                                          const StridedView& vb, typename FloatIO<K>::Storage* out,
                                          int64_t i) {
  using IO = FloatIO<K>;
  out[i] = IO::Store(ApplyBinary(op, IO::Load(a[va.At(i)]), IO::Load(b[vb.At(i)])));
}

template <FloatKind K>
TPC_HOST_DEVICE inline void UnaryElement(UnaryOp op, float alpha,
                                         const typename FloatIO<K>::Storage* x,
                                         typename FloatIO<K>::Storage* y, int64_t i) {
  using IO = FloatIO<K>;
  y[i] = IO::Store(ApplyUnary(op, IO::Load(x[i]), alpha));
}

// Element i of a GEMM's epilogue (tpc::FusedMatMul) over rows of `n`: y[i] = op(y[i] +
// bias[i % n]), in place; `bias` may be null.
template <FloatKind K>
TPC_HOST_DEVICE inline void BiasActivationElement(UnaryOp op,
                                                  const typename FloatIO<K>::Storage* bias,
                                                  int64_t n, typename FloatIO<K>::Storage* y,
                                                  int64_t i) {
  using IO = FloatIO<K>;
  float v = IO::Load(y[i]);
  if (bias != nullptr) v += IO::Load(bias[i - DivIndex(i, n) * n]);
  y[i] = IO::Store(ApplyUnary(op, v, 0.0f));
}

// Element i of a conversion between float kinds.
template <FloatKind From, FloatKind To>
TPC_HOST_DEVICE inline void CastElement(const typename FloatIO<From>::Storage* x,
                                        typename FloatIO<To>::Storage* y, int64_t i) {
  y[i] = FloatIO<To>::Store(FloatIO<From>::Load(x[i]));
}

// Element i of a strided copy of `bytes`-sized elements: dst[vd(i)] = src[vs(i)]. Every
// movement op (Transpose, Expand, Slice, Concat, Split, Where's branches) is one or more.
template <typename Word>
TPC_HOST_DEVICE inline void CopyElement(const Word* src, const StridedView& vs, Word* dst,
                                        const StridedView& vd, int64_t i) {
  dst[vd.At(i)] = src[vs.At(i)];
}

// Element i of Where: out[i] = cond ? x : y, all three broadcast to out's dims.
template <typename Word>
TPC_HOST_DEVICE inline void WhereElement(const bool* cond, const StridedView& vc, const Word* x,
                                         const StridedView& vx, const Word* y,
                                         const StridedView& vy, Word* out, int64_t i) {
  out[i] = cond[vc.At(i)] ? x[vx.At(i)] : y[vy.At(i)];
}

// Element i of Gather along an axis: out is [outer, n_indices, inner] of data
// [outer, axis_len, inner]; a negative index counts from the end. An index out of range
// writes 0 and returns false (the kernel reports it to the backend, which fails the run
// naming the node, as the CPU kernel does).
template <typename Word, typename Index>
TPC_HOST_DEVICE inline bool GatherElement(const Word* data, const Index* indices, int64_t n_indices,
                                          int64_t axis_len, int64_t inner, Word* out, int64_t i) {
  const int64_t r = DivIndex(i, inner);
  const int64_t in = i - r * inner;
  const int64_t o = DivIndex(r, n_indices);
  const int64_t k = r - o * n_indices;
  int64_t idx = static_cast<int64_t>(indices[k]);
  if (idx < 0) idx += axis_len;
  const bool ok = idx >= 0 && idx < axis_len;
  out[i] = ok ? data[(o * axis_len + idx) * inner + in] : Word{};
  return ok;
}

// The ranks' buffers of an in-process collective on one GPU (at most kMaxRanks).
inline constexpr int kMaxRanks = 32;
struct RankPointers {
  int n = 0;
  const void* in[kMaxRanks] = {};
  int n_out = 0;
  void* out[kMaxRanks] = {};
};

// Element i of a reduction across ranks: every out[j][i] = the in[k][i] combined in rank
// order in f32 (sum, max, min; avg = sum / n), rounded once, as the host communicators do.
template <FloatKind K>
TPC_HOST_DEVICE inline void ReduceRanksElement(int op, bool average, const RankPointers& p,
                                               int64_t i) {
  using IO = FloatIO<K>;
  using S = typename IO::Storage;
  float acc = IO::Load(static_cast<const S*>(p.in[0])[i]);
  for (int k = 1; k < p.n; ++k) {
    const float v = IO::Load(static_cast<const S*>(p.in[k])[i]);
    acc = op == 1   ? ((acc != acc || acc > v) ? acc : v)
          : op == 2 ? ((acc != acc || acc < v) ? acc : v)
                    : acc + v;
  }
  if (average) acc /= static_cast<float>(p.n);
  for (int j = 0; j < p.n_out; ++j) static_cast<S*>(p.out[j])[i] = IO::Store(acc);
}

}  // namespace tpc::runtime::math
