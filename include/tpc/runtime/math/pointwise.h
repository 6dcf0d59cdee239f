// Per-element math of the device kernels, in f32: binary ops (with broadcasting through
// StridedView), unary ops, Where. The CPU kernels compute the same functions; the host
// tests run these over whole tensors and compare with the CPU backend.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// kFmod: C's fmod (the sign of a); kFloorMod: Python's (the sign of b), Mod's fmod=0;
// kPRelu: a, or a · b below 0 (b the slope).
enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kFmod, kFloorMod, kPRelu };

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
    case BinaryOp::kFmod:
      return fmodf(a, b);
    case BinaryOp::kFloorMod: {
      const float r = fmodf(a, b);
      return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
    }
    case BinaryOp::kPRelu:
      return a < 0.0f ? a * b : a;
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
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kCeil,
  kFloor,
  kRound,            // half to even
  kSign,             // 0 for 0 and NaN
  kSoftplus,         // log(1 + e^x), x above 20
  kMish,             // x · tanh(softplus(x))
  kSoftsign,         // x / (1 + |x|)
  kElu,              // a · (e^x − 1) below 0
  kSelu,             // b · (a · (e^x − 1) at or below 0, else x)
  kCelu,             // max(0, x) + min(0, a · (e^(x/a) − 1))
  kThresholdedRelu,  // x above a, else 0
  kHardSigmoid,      // max(0, min(1, a·x + b))
  kHardSwish,        // x · max(0, min(1, x/6 + 1/2))
  kShrink,           // x + b below −a, x − b above a, else 0
  kClip,             // a below a, b above b (NaN stays)
  kDivideBy,         // x / a (Mean's sum by its count)
  kFiniteOrZero,     // x, or 0 where x is ±inf or NaN (ReduceLogSumExp's shift)
};

// An op's parameters: LeakyRelu's, Elu's, ThresholdedRelu's alpha in `a`; HardSigmoid's
// alpha and beta, Selu's alpha and gamma, Shrink's lambd and bias, Clip's min and max in
// `a` and `b`.
struct UnaryParams {
  float a = 0.0f, b = 0.0f;
  // NOLINTNEXTLINE(google-explicit-constructor): a one-parameter op's parameter reads as it.
  TPC_HOST_DEVICE constexpr UnaryParams(float a_ = 0.0f, float b_ = 0.0f) : a(a_), b(b_) {}
};

// The CPU kernels' std::min and std::max: the first operand unless the second is strictly
// smaller (larger), so a NaN in the second position is not chosen.
TPC_HOST_DEVICE inline float StdMin(float x, float y) { return y < x ? y : x; }
TPC_HOST_DEVICE inline float StdMax(float x, float y) { return x < y ? y : x; }

TPC_HOST_DEVICE inline float ApplyUnary(UnaryOp op, float x, UnaryParams p) {
  const float alpha = p.a;
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
    case UnaryOp::kSin:
      return sinf(x);
    case UnaryOp::kCos:
      return cosf(x);
    case UnaryOp::kTan:
      return tanf(x);
    case UnaryOp::kAsin:
      return asinf(x);
    case UnaryOp::kAcos:
      return acosf(x);
    case UnaryOp::kAtan:
      return atanf(x);
    case UnaryOp::kSinh:
      return sinhf(x);
    case UnaryOp::kCosh:
      return coshf(x);
    case UnaryOp::kAsinh:
      return asinhf(x);
    case UnaryOp::kAcosh:
      return acoshf(x);
    case UnaryOp::kAtanh:
      return atanhf(x);
    case UnaryOp::kCeil:
      return ceilf(x);
    case UnaryOp::kFloor:
      return floorf(x);
    case UnaryOp::kRound:
      return rintf(x);  // the default rounding mode: to nearest, ties to even
    case UnaryOp::kSign:
      return static_cast<float>((0.0f < x) - (x < 0.0f));
    case UnaryOp::kSoftplus:
      return x > 20.0f ? x : log1pf(expf(x));
    case UnaryOp::kMish:
      return x * tanhf(x > 20.0f ? x : log1pf(expf(x)));
    case UnaryOp::kSoftsign:
      return x / (1.0f + fabsf(x));
    case UnaryOp::kElu:
      return x < 0.0f ? alpha * (expf(x) - 1.0f) : x;
    case UnaryOp::kSelu:
      return p.b * (x <= 0.0f ? alpha * (expf(x) - 1.0f) : x);
    case UnaryOp::kCelu:
      return StdMax(0.0f, x) + StdMin(0.0f, alpha * (expf(x / alpha) - 1.0f));
    case UnaryOp::kThresholdedRelu:
      return x > alpha ? x : 0.0f;
    case UnaryOp::kHardSigmoid:
      return StdMax(0.0f, StdMin(1.0f, alpha * x + p.b));
    case UnaryOp::kHardSwish:
      return x * StdMax(0.0f, StdMin(1.0f, x / 6.0f + 0.5f));
    case UnaryOp::kShrink:
      return x < -alpha ? x + p.b : (x > alpha ? x - p.b : 0.0f);
    case UnaryOp::kClip:
      return x < alpha ? alpha : (x > p.b ? p.b : x);
    case UnaryOp::kDivideBy:
      return x / alpha;
    case UnaryOp::kFiniteOrZero:
      return x - x == 0.0f ? x : 0.0f;
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
TPC_HOST_DEVICE inline void UnaryElement(UnaryOp op, UnaryParams alpha,
                                         const typename FloatIO<K>::Storage* x,
                                         typename FloatIO<K>::Storage* y, int64_t i) {
  using IO = FloatIO<K>;
  y[i] = IO::Store(ApplyUnary(op, IO::Load(x[i]), alpha));
}

// V contiguous elements of K's storage as one Chunk (one 16-byte load or store when
// V · size = 16); the address must be aligned to the chunk.
template <FloatKind K, int V>
TPC_HOST_DEVICE inline void LoadChunk(const typename FloatIO<K>::Storage* p,
                                      typename FloatIO<K>::Storage (&v)[V]) {
  using C = Chunk<static_cast<int>(V * sizeof(typename FloatIO<K>::Storage))>;
  const C c = *reinterpret_cast<const C*>(p);
  memcpy(v, &c, sizeof(C));
}
template <FloatKind K, int V>
TPC_HOST_DEVICE inline void StoreChunk(const typename FloatIO<K>::Storage (&v)[V],
                                       typename FloatIO<K>::Storage* p) {
  using C = Chunk<static_cast<int>(V * sizeof(typename FloatIO<K>::Storage))>;
  C c;
  memcpy(&c, v, sizeof(C));
  *reinterpret_cast<C*>(p) = c;
}

// A binary op over rows whose innermost dim is contiguous in the output and, in each
// input, contiguous (it runs along the row) or broadcast (one value per row), V elements
// a thread: one 16-byte load per running input and one store, the index arithmetic once
// per V elements. Made by PlanBinaryRows; the output is contiguous.
struct BinaryRows {
  StridedView a, b;  // the inputs' rows: outer dims, element offset of a row
  bool a_runs = false, b_runs = false;
  int64_t len = 0;  // elements a row (a multiple of V)
  int64_t rows = 0;
};

// The rows plan of out = op(a viewed by va, b viewed by vb) (views over the same dims, the
// output contiguous over them) in chunks of V elements of `elem_bytes`, when every row is
// whole chunks and the inputs that run along it start each row on a chunk boundary; else
// nothing.
inline std::optional<BinaryRows> PlanBinaryRows(int v, int elem_bytes, const void* a,
                                                const StridedView& va, const void* b,
                                                const StridedView& vb, const void* out) {
  const int r = va.rank;
  if (r < 1 || vb.rank != r) return std::nullopt;
  for (int d = 0; d < r; ++d) {
    if (va.dims[d] != vb.dims[d]) return std::nullopt;
  }
  const int64_t chunk = int64_t{v} * elem_bytes;
  auto ptr_ok = [&](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(chunk) == 0;
  };
  auto elems_ok = [&](int64_t e) { return (e * elem_bytes) % chunk == 0; };
  BinaryRows p;
  p.len = va.dims[r - 1];
  p.a_runs = va.strides[r - 1] == 1;
  p.b_runs = vb.strides[r - 1] == 1;
  if (p.len % v != 0 || (!p.a_runs && va.strides[r - 1] != 0) ||
      (!p.b_runs && vb.strides[r - 1] != 0) || !ptr_ok(out) ||
      (p.a_runs && (!ptr_ok(a) || !elems_ok(va.offset))) ||
      (p.b_runs && (!ptr_ok(b) || !elems_ok(vb.offset)))) {
    return std::nullopt;
  }
  p.rows = 1;
  p.a.rank = p.b.rank = r - 1;
  p.a.offset = va.offset;
  p.b.offset = vb.offset;
  for (int d = 0; d + 1 < r; ++d) {
    if ((p.a_runs && !elems_ok(va.strides[d])) || (p.b_runs && !elems_ok(vb.strides[d]))) {
      return std::nullopt;
    }
    p.a.dims[d] = p.b.dims[d] = va.dims[d];
    p.a.strides[d] = va.strides[d];
    p.b.strides[d] = vb.strides[d];
    p.rows *= va.dims[d];
  }
  return p;
}

// Chunk i (V elements) of a BinaryRows op: elements [j, j + V) of row i / (len / V).
template <FloatKind K, int V>
TPC_HOST_DEVICE inline void BinaryRowsElement(BinaryOp op, const typename FloatIO<K>::Storage* a,
                                              const typename FloatIO<K>::Storage* b,
                                              typename FloatIO<K>::Storage* out,
                                              const BinaryRows& p, int64_t i) {
  using IO = FloatIO<K>;
  using S = typename FloatIO<K>::Storage;
  const int64_t per_row = p.len / V;
  const int64_t r = DivIndex(i, per_row);
  const int64_t j = (i - r * per_row) * V;
  S xa[V], xb[V], y[V];
  const S* pa = a + p.a.At(r);
  const S* pb = b + p.b.At(r);
  if (p.a_runs) {
    LoadChunk<K, V>(pa + j, xa);
  } else {
    for (int k = 0; k < V; ++k) xa[k] = pa[0];
  }
  if (p.b_runs) {
    LoadChunk<K, V>(pb + j, xb);
  } else {
    for (int k = 0; k < V; ++k) xb[k] = pb[0];
  }
  for (int k = 0; k < V; ++k) y[k] = IO::Store(ApplyBinary(op, IO::Load(xa[k]), IO::Load(xb[k])));
  StoreChunk<K, V>(y, out + r * p.len + j);
}

// Chunk i of a unary op over contiguous x and y (elements [i·V, i·V + V)); y may be x.
template <FloatKind K, int V>
TPC_HOST_DEVICE inline void UnaryChunkElement(UnaryOp op, UnaryParams alpha,
                                              const typename FloatIO<K>::Storage* x,
                                              typename FloatIO<K>::Storage* y, int64_t i) {
  using IO = FloatIO<K>;
  typename IO::Storage v[V];
  LoadChunk<K, V>(x + i * V, v);
  for (int k = 0; k < V; ++k) v[k] = IO::Store(ApplyUnary(op, IO::Load(v[k]), alpha));
  StoreChunk<K, V>(v, y + i * V);
}

// Chunk i of a GEMM's epilogue (rows of n, n a multiple of V, bias aligned like y or
// null): y[j] = op(y[j] + bias[j % n]) for j in [i·V, i·V + V), in place.
template <FloatKind K, int V>
TPC_HOST_DEVICE inline void BiasActivationChunkElement(UnaryOp op,
                                                       const typename FloatIO<K>::Storage* bias,
                                                       int64_t n, typename FloatIO<K>::Storage* y,
                                                       int64_t i) {
  using IO = FloatIO<K>;
  typename IO::Storage v[V], b[V];
  const int64_t j = i * V;
  LoadChunk<K, V>(y + j, v);
  if (bias != nullptr) LoadChunk<K, V>(bias + (j - DivIndex(j, n) * n), b);
  for (int k = 0; k < V; ++k) {
    const float x = IO::Load(v[k]) + (bias != nullptr ? IO::Load(b[k]) : 0.0f);
    v[k] = IO::Store(ApplyUnary(op, x, 0.0f));
  }
  StoreChunk<K, V>(v, y + j);
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
