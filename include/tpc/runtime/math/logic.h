// Per-element math of the device kernels with bool outputs: comparisons of floats
// (Equal, Less, LessOrEqual, Greater, GreaterOrEqual, with broadcasting), float predicates
// (IsNaN, IsInf), logic on bools (And, Or, Xor, Not) and bitwise ops on integers. Floats are
// compared in f32 (f16 and bf16 convert to it exactly), as the CPU kernels compare them.
#pragma once

#include <cstdint>

#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class CompareOp : int { kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual };

TPC_HOST_DEVICE inline bool ApplyCompare(CompareOp op, float a, float b) {
  switch (op) {
    case CompareOp::kEqual:
      return a == b;
    case CompareOp::kLess:
      return a < b;
    case CompareOp::kLessOrEqual:
      return a <= b;
    case CompareOp::kGreater:
      return a > b;
    case CompareOp::kGreaterOrEqual:
      return a >= b;
  }
  return false;
}

// IsNaN, or IsInf detecting +inf and/or -inf.
struct Predicate {
  bool nan = false;  // IsNaN; else IsInf with the two flags
  bool positive = true, negative = true;
};

TPC_HOST_DEVICE inline bool ApplyPredicate(const Predicate& p, float x) {
  if (p.nan) return x != x;
  return (p.positive && x > 3.402823466e38f) || (p.negative && x < -3.402823466e38f);
}

enum class LogicOp : int { kAnd, kOr, kXor, kNot };

TPC_HOST_DEVICE inline bool ApplyLogic(LogicOp op, bool a, bool b) {
  switch (op) {
    case LogicOp::kAnd:
      return a && b;
    case LogicOp::kOr:
      return a || b;
    case LogicOp::kXor:
      return a != b;
    case LogicOp::kNot:
      return !a;
  }
  return false;
}

// Bitwise ops and BitShift on the bits of integer elements, as unsigned words W of the
// element's size (the same bits whatever the signedness); a shift by the width or more
// gives 0, as the CPU kernel.
enum class BitOp : int { kAnd, kOr, kXor, kNot, kShiftLeft, kShiftRight };

template <typename W>
TPC_HOST_DEVICE inline W ApplyBit(BitOp op, W a, W b) {
  switch (op) {
    case BitOp::kAnd:
      return static_cast<W>(a & b);
    case BitOp::kOr:
      return static_cast<W>(a | b);
    case BitOp::kXor:
      return static_cast<W>(a ^ b);
    case BitOp::kNot:
      return static_cast<W>(~a);
    case BitOp::kShiftLeft:
      return b >= sizeof(W) * 8 ? W{0} : static_cast<W>(a << b);
    case BitOp::kShiftRight:
      return b >= sizeof(W) * 8 ? W{0} : static_cast<W>(a >> b);
  }
  return W{0};
}

// Element i of a bitwise op (b unused by Not), a and b through their views.
template <typename W>
TPC_HOST_DEVICE inline void BitElement(BitOp op, const W* a, const StridedView& va, const W* b,
                                       const StridedView& vb, W* out, int64_t i) {
  out[i] = ApplyBit<W>(op, a[va.At(i)], op == BitOp::kNot ? W{0} : b[vb.At(i)]);
}

// Element i of a comparison, a and b read through their views of the output's dims.
template <FloatKind K>
TPC_HOST_DEVICE inline void CompareElement(CompareOp op, const typename FloatIO<K>::Storage* a,
                                           const StridedView& va,
                                           const typename FloatIO<K>::Storage* b,
                                           const StridedView& vb, bool* out, int64_t i) {
  using IO = FloatIO<K>;
  out[i] = ApplyCompare(op, IO::Load(a[va.At(i)]), IO::Load(b[vb.At(i)]));
}

template <FloatKind K>
TPC_HOST_DEVICE inline void PredicateElement(const Predicate& p,
                                             const typename FloatIO<K>::Storage* x, bool* y,
                                             int64_t i) {
  y[i] = ApplyPredicate(p, FloatIO<K>::Load(x[i]));
}

// Element i of a logic op (b unused by Not).
TPC_HOST_DEVICE inline void LogicElement(LogicOp op, const bool* a, const StridedView& va,
                                         const bool* b, const StridedView& vb, bool* out,
                                         int64_t i) {
  out[i] = ApplyLogic(op, a[va.At(i)], op == LogicOp::kNot ? false : b[vb.At(i)]);
}

}  // namespace tpc::runtime::math
