// Binary and variadic elementwise operators with numpy broadcasting.
#include <cmath>
#include <type_traits>

#include "kernels.h"
#include "tpc/runtime/math/logic.h"

namespace tpc::runtime::cpu {
namespace {

// Whether elementwise loops over T get vectorized runs (ForEachBroadcast's kRuns): the
// types models compute in at size (f32 activations, i64 masks and positions, bool). The
// others (f64, the other integers: shape arithmetic, small) take the general walk; each
// type's runs cost a few seconds of this file's compile, which was 63 s with all of them.
template <typename T>
constexpr bool kVectorRuns =
    std::is_same_v<T, float> || std::is_same_v<T, int64_t> || std::is_same_v<T, bool>;

// y = f(a, b) elementwise with broadcasting; Out is the result type.
template <typename In, typename Out, typename F>
absl::Status BinaryLoop(KernelContext& ctx, const Tensor& a, const Tensor& b, F f) {
  TPC_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, {a.shape(), b.shape()}));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape));
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* py = y->data<Out>();
  ForEachBroadcast<2, kVectorRuns<In>>(
      ctx.pool(), shape, {a.shape(), b.shape()},
      [&](int64_t i, const std::array<int64_t, 2>& o) { py[i] = f(pa[o[0]], pb[o[1]]); });
  return absl::OkStatus();
}

absl::Status CheckSameType(KernelContext& ctx) {
  if (ctx.input(0).dtype() != ctx.input(1).dtype()) {
    return ctx.Error(absl::StrCat("operand types differ: ", ctx.input(0).TypeString(), " and ",
                                  ctx.input(1).TypeString()));
  }
  return absl::OkStatus();
}

// Arithmetic over every numeric type: y has the operands' type.
template <typename F>
absl::Status Arithmetic(KernelContext& ctx, F f) {
  TPC_RETURN_IF_ERROR(CheckSameType(ctx));
  return VisitNumeric(ctx, ctx.input(0).dtype(), [&]<typename T>() {
    return BinaryLoop<T, T>(ctx, ctx.input(0), ctx.input(1),
                            [&](T x, T y) { return static_cast<T>(f(x, y)); });
  });
}

// Comparisons: y is bool.
template <typename F>
absl::Status Compare(KernelContext& ctx, F f) {
  TPC_RETURN_IF_ERROR(CheckSameType(ctx));
  return VisitType(ctx, ctx.input(0).dtype(), [&]<typename T>() {
    return BinaryLoop<T, bool>(ctx, ctx.input(0), ctx.input(1), [&](T x, T y) { return f(x, y); });
  });
}

template <typename F>
absl::Status Logical(KernelContext& ctx, F f) {
  return BinaryLoop<bool, bool>(ctx, ctx.input(0), ctx.input(1), f);
}

// Folds the inputs pairwise (Max, Min, Sum, Mean) into output 0.
template <typename F>
absl::Status Variadic(KernelContext& ctx, F f, bool mean = false) {
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape());
  TPC_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, shapes));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape));
  return VisitNumeric(ctx, y->dtype(), [&]<typename T>() -> absl::Status {
    T* py = y->data<T>();
    const Tensor& first = ctx.input(0);
    ForEachBroadcast<1, kVectorRuns<T>>(
        ctx.pool(), shape, {first.shape()},
        [&](int64_t i, const std::array<int64_t, 1>& o) { py[i] = first.data<T>()[o[0]]; });
    for (int k = 1; k < ctx.num_inputs(); ++k) {
      const Tensor& in = ctx.input(k);
      ForEachBroadcast<1, kVectorRuns<T>>(ctx.pool(), shape, {in.shape()},
                                          [&](int64_t i, const std::array<int64_t, 1>& o) {
                                            py[i] = static_cast<T>(f(py[i], in.data<T>()[o[0]]));
                                          });
    }
    if (mean) {
      for (int64_t i = 0; i < y->num_elements(); ++i)
        py[i] = static_cast<T>(py[i] / static_cast<T>(ctx.num_inputs()));
    }
    return absl::OkStatus();
  });
}

// Bitwise operators over the integer types: y has the operands' type.
template <typename F>
absl::Status Bitwise(KernelContext& ctx, F f) {
  TPC_RETURN_IF_ERROR(CheckSameType(ctx));
  return VisitNumeric(ctx, ctx.input(0).dtype(), [&]<typename T>() -> absl::Status {
    if constexpr (std::is_integral_v<T>) {
      return BinaryLoop<T, T>(ctx, ctx.input(0), ctx.input(1),
                              [&](T x, T y) { return static_cast<T>(f(x, y)); });
    } else {
      return ctx.Error("bitwise operators take integers");
    }
  });
}

template <typename T>
T FloorMod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else if constexpr (std::is_signed_v<T>) {
    if (b == 0 || b == -1) return 0;  // INT_MIN % -1 is undefined in C++; it is 0
    T r = static_cast<T>(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
  } else {
    return b == 0 ? 0 : static_cast<T>(a % b);
  }
}

}  // namespace

namespace {

// A bitwise op on the unsigned words of the elements (math::ApplyBit).
absl::Status BitwiseOp(KernelContext& ctx, math::BitOp op) {
  return Bitwise(ctx, [op](auto a, auto b) {
    using T = decltype(a);
    using W = std::make_unsigned_t<T>;
    return static_cast<T>(math::ApplyBit<W>(op, static_cast<W>(a), static_cast<W>(b)));
  });
}

}  // namespace

absl::Status BitwiseAnd(KernelContext& ctx) { return BitwiseOp(ctx, math::BitOp::kAnd); }
absl::Status BitwiseOr(KernelContext& ctx) { return BitwiseOp(ctx, math::BitOp::kOr); }
absl::Status BitwiseXor(KernelContext& ctx) { return BitwiseOp(ctx, math::BitOp::kXor); }
// Shifts of unsigned integers; a shift by the width or more gives 0.
absl::Status BitShift(KernelContext& ctx) {
  const bool left = ctx.node().attr_string("direction", "") == "LEFT";
  return BitwiseOp(ctx, left ? math::BitOp::kShiftLeft : math::BitOp::kShiftRight);
}

absl::Status Add(KernelContext& ctx) {
  return Arithmetic(ctx, [](auto a, auto b) { return WrapAdd(a, b); });
}
absl::Status Sub(KernelContext& ctx) {
  return Arithmetic(ctx, [](auto a, auto b) { return WrapSub(a, b); });
}
absl::Status Mul(KernelContext& ctx) {
  return Arithmetic(ctx, [](auto a, auto b) { return WrapMul(a, b); });
}
absl::Status Div(KernelContext& ctx) {
  return Arithmetic(ctx, [](auto a, auto b) {
    if constexpr (std::is_integral_v<decltype(a)>) {
      // x / -1 is a negation (INT_MIN / -1 wraps to INT_MIN); x / 0 gives 0.
      if constexpr (std::is_signed_v<decltype(a)>) {
        if (b == -1) return WrapNeg(a);
      }
      return b == 0 ? decltype(a)(0) : static_cast<decltype(a)>(a / b);
    } else {
      return a / b;
    }
  });
}
absl::Status Mod(KernelContext& ctx) {
  const bool fmod = ctx.node().attr_int("fmod", 0) != 0;
  return Arithmetic(ctx, [fmod](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>) {
      return fmod ? std::fmod(a, b) : FloorMod(a, b);
    } else {
      if (fmod) return b == 0 || (std::is_signed_v<T> && b == T(-1)) ? T(0) : static_cast<T>(a % b);
      return FloorMod(a, b);
    }
  });
}
absl::Status Pow(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  Tensor b = ctx.input(1);
  if (b.dtype() != a.dtype()) {
    // The exponent may have another type; compute in the base's type.
    TPC_ASSIGN_OR_RETURN(b, CastTensor(ctx, b, a.dtype()));
  }
  return VisitNumeric(ctx, a.dtype(), [&]<typename T>() {
    return BinaryLoop<T, T>(ctx, a, b, [](T x, T y) {
      if constexpr (std::is_same_v<T, float>) {
        return y == 2.0f ? x * x : (y == 0.5f ? std::sqrt(x) : std::pow(x, y));
      } else {
        return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
    });
  });
}
absl::Status PRelu(KernelContext& ctx) {
  return Arithmetic(ctx, [](auto x, auto s) { return x < 0 ? x * s : x; });
}

absl::Status Equal(KernelContext& ctx) {
  return Compare(ctx, [](auto a, auto b) { return a == b; });
}
absl::Status Less(KernelContext& ctx) {
  return Compare(ctx, [](auto a, auto b) { return a < b; });
}
absl::Status LessOrEqual(KernelContext& ctx) {
  return Compare(ctx, [](auto a, auto b) { return a <= b; });
}
absl::Status Greater(KernelContext& ctx) {
  return Compare(ctx, [](auto a, auto b) { return a > b; });
}
absl::Status GreaterOrEqual(KernelContext& ctx) {
  return Compare(ctx, [](auto a, auto b) { return a >= b; });
}

absl::Status And(KernelContext& ctx) {
  return Logical(ctx, [](bool a, bool b) { return a && b; });
}
absl::Status Or(KernelContext& ctx) {
  return Logical(ctx, [](bool a, bool b) { return a || b; });
}
absl::Status Xor(KernelContext& ctx) {
  return Logical(ctx, [](bool a, bool b) { return a != b; });
}

absl::Status Max(KernelContext& ctx) {
  return Variadic(ctx, [](auto a, auto b) {
    if constexpr (std::is_floating_point_v<decltype(a)>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<decltype(a)>::quiet_NaN();
    }
    return a < b ? b : a;
  });
}
absl::Status Min(KernelContext& ctx) {
  return Variadic(ctx, [](auto a, auto b) {
    if constexpr (std::is_floating_point_v<decltype(a)>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<decltype(a)>::quiet_NaN();
    }
    return b < a ? b : a;
  });
}
absl::Status Sum(KernelContext& ctx) {
  return Variadic(ctx, [](auto a, auto b) { return WrapAdd(a, b); });
}
absl::Status Mean(KernelContext& ctx) {
  return Variadic(
      ctx, [](auto a, auto b) { return WrapAdd(a, b); }, /*mean=*/true);
}

absl::Status Where(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != ir::DType::kBool) return ctx.Error("the condition must be bool");
  if (x.dtype() != y.dtype()) return ctx.Error("X and Y differ in element type");
  TPC_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, {c.shape(), x.shape(), y.shape()}));
  TPC_ASSIGN_OR_RETURN(Tensor * out, ctx.Output(0, shape, x.dtype()));
  // By element size: Where moves bytes, whatever the type.
  const int64_t es = ir::DTypeSize(x.dtype());
  auto run = [&]<typename U>() {
    const bool* pc = c.data<bool>();
    const U* px = x.data<U>();
    const U* py = y.data<U>();
    U* po = out->data<U>();
    ForEachBroadcast<3>(ctx.pool(), shape, {c.shape(), x.shape(), y.shape()},
                        [&](int64_t i, const std::array<int64_t, 3>& o) {
                          po[i] = pc[o[0]] ? px[o[1]] : py[o[2]];
                        });
    return absl::OkStatus();
  };
  switch (es) {
    case 1:
      return run.operator()<uint8_t>();
    case 2:
      return run.operator()<uint16_t>();
    case 4:
      return run.operator()<uint32_t>();
    case 8:
      return run.operator()<uint64_t>();
    default:
      return ctx.Error("unsupported element size");
  }
}

}  // namespace tpc::runtime::cpu
