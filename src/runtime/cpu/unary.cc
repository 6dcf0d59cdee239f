// Unary elementwise operators (activations and math functions).
#include <cmath>
#include <limits>
#include <type_traits>

#include "isa_loops.h"
#include "kernels.h"
#include "vector_math.h"

namespace tpc::runtime::cpu {
namespace {

// y = f(x) over float types (f32, f64).
template <typename F>
absl::Status FloatUnary(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    ctx.pool().ParallelFor(x.num_elements(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) py[i] = static_cast<T>(f(px[i]));
    });
    return absl::OkStatus();
  });
}

// f32 through the loop compiled for the machine's vector width (isa_loops.h), the other
// float types through f.
template <typename F>
absl::Status ActivationUnary(KernelContext& ctx, Activation act, F f) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return FloatUnary(ctx, f);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const float* px = x.data<float>();
  float* py = y->data<float>();
  ctx.pool().ParallelFor(x.num_elements(), 1 << 14,
                         [&](int64_t b, int64_t e) { ActivationCopy(act, px + b, py + b, e - b); });
  return absl::OkStatus();
}

// y = f(x + bias) over float types, `bias` the optional input 1 broadcast to x
// (onnxruntime's FastGelu and BiasGelu).
template <typename F>
absl::Status FloatUnaryWithBias(KernelContext& ctx, F f) {
  const Tensor* bias = ctx.optional_input(1);
  if (bias == nullptr) return FloatUnary(ctx, f);
  const Tensor& x = ctx.input(0);
  if (bias->dtype() != x.dtype()) return ctx.Error("the bias and the input differ in type");
  TPC_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, {x.shape(), bias->shape()}));
  if (shape != x.shape()) return ctx.Error("the bias does not broadcast to the input");
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pb = bias->data<T>();
    T* py = y->data<T>();
    ForEachBroadcast<2>(ctx.pool(), shape, {x.shape(), bias->shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& o) {
                          py[i] = static_cast<T>(f(static_cast<T>(px[o[0]] + pb[o[1]])));
                        });
    return absl::OkStatus();
  });
}

// y = f(x) over every numeric type (Abs, Neg, Sign).
template <typename F>
absl::Status NumericUnary(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    for (int64_t i = 0; i < x.num_elements(); ++i) py[i] = static_cast<T>(f(px[i]));
    return absl::OkStatus();
  });
}

// y = pred(x) as bool (IsNaN, IsInf).
template <typename F>
absl::Status FloatPredicate(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kBool));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < x.num_elements(); ++i) y->data<bool>()[i] = f(x.data<T>()[i]);
    return absl::OkStatus();
  });
}

float AttrF(const KernelContext& ctx, const char* name, float def) {
  return ctx.node().attr_float(name, def);
}

}  // namespace

absl::Status Abs(KernelContext& ctx) {
  return NumericUnary(ctx, [](auto v) {
    if constexpr (std::is_unsigned_v<decltype(v)>) {
      return v;
    } else {
      return v < 0 ? WrapNeg(v) : v;
    }
  });
}
absl::Status Neg(KernelContext& ctx) {
  return NumericUnary(ctx, [](auto v) { return WrapNeg(v); });
}
absl::Status Sign(KernelContext& ctx) {
  return NumericUnary(ctx, [](auto v) { return (decltype(v)(0) < v) - (v < decltype(v)(0)); });
}
absl::Status Ceil(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::ceil(v); });
}
absl::Status Floor(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::floor(v); });
}
absl::Status Round(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::nearbyint(v); });  // half to even
}
absl::Status Cos(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::cos(v); });
}
absl::Status Sin(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::sin(v); });
}
absl::Status Tan(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::tan(v); });
}
absl::Status Acos(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::acos(v); });
}
absl::Status Acosh(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::acosh(v); });
}
absl::Status Asin(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::asin(v); });
}
absl::Status Asinh(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::asinh(v); });
}
absl::Status Atan(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::atan(v); });
}
absl::Status Atanh(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::atanh(v); });
}
absl::Status Cosh(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::cosh(v); });
}
absl::Status Sinh(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::sinh(v); });
}
absl::Status Tanh(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::tanh(v); });
}
absl::Status Erf(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::erf(v); });
}
absl::Status Exp(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return Exp(v); });
}
absl::Status Log(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::log(v); });
}
absl::Status Sqrt(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return std::sqrt(v); });
}
absl::Status Reciprocal(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return decltype(v)(1) / v; });
}
absl::Status Relu(KernelContext& ctx) {
  return NumericUnary(ctx, [](auto v) { return v < 0 ? decltype(v)(0) : v; });
}
absl::Status Sigmoid(KernelContext& ctx) {
  return ActivationUnary(ctx, Activation::kSigmoid, [](auto v) { return cpu::Sigmoid(v); });
}
absl::Status Softplus(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return v > 20 ? v : std::log1p(std::exp(v)); });
}
absl::Status Mish(KernelContext& ctx) {
  return FloatUnary(ctx,
                    [](auto v) { return v * std::tanh(v > 20 ? v : std::log1p(std::exp(v))); });
}
absl::Status Gelu(KernelContext& ctx) {
  const bool tanh = ctx.node().attr_string("approximate", "none") == "tanh";
  // GeluTanh and GeluErf: vector_math.h.
  if (tanh) return ActivationUnary(ctx, Activation::kGeluTanh, [](auto v) { return GeluTanh(v); });
  return ActivationUnary(ctx, Activation::kGelu, [](auto v) { return GeluErf(v); });
}
// onnxruntime's: FastGelu(x, bias?) is the tanh form of x + bias, BiasGelu(a, b) the exact
// one of a + b, QuickGelu(x) = x · sigmoid(alpha · x).
absl::Status FastGelu(KernelContext& ctx) {
  return FloatUnaryWithBias(ctx, [](auto v) { return GeluTanh(v); });
}
absl::Status BiasGelu(KernelContext& ctx) {
  return FloatUnaryWithBias(ctx, [](auto v) { return GeluErf(v); });
}
absl::Status QuickGelu(KernelContext& ctx) {
  const float alpha = AttrF(ctx, "alpha", 1.702f);
  return FloatUnary(ctx, [alpha](auto v) {
    using T = decltype(v);
    return v / (T(1) + Exp(-static_cast<T>(alpha) * v));
  });
}
absl::Status Elu(KernelContext& ctx) {
  const float alpha = AttrF(ctx, "alpha", 1.0f);
  return FloatUnary(ctx, [alpha](auto v) { return v < 0 ? alpha * (std::exp(v) - 1) : v; });
}
absl::Status Selu(KernelContext& ctx) {
  const double alpha = AttrF(ctx, "alpha", 1.67326319217681884765625f);
  const double gamma = AttrF(ctx, "gamma", 1.05070102214813232421875f);
  return FloatUnary(ctx, [=](auto v) { return gamma * (v <= 0 ? alpha * (std::exp(v) - 1) : v); });
}
absl::Status LeakyRelu(KernelContext& ctx) {
  const float alpha = AttrF(ctx, "alpha", 0.01f);
  return FloatUnary(ctx, [alpha](auto v) { return v < 0 ? alpha * v : v; });
}
absl::Status Softsign(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return v / (decltype(v)(1) + std::fabs(v)); });
}
absl::Status Shrink(KernelContext& ctx) {
  const double lambd = AttrF(ctx, "lambd", 0.5f), bias = AttrF(ctx, "bias", 0.0f);
  return FloatUnary(ctx,
                    [=](auto v) { return v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0); });
}
absl::Status Celu(KernelContext& ctx) {
  const double alpha = AttrF(ctx, "alpha", 1.0f);
  return FloatUnary(ctx, [alpha](auto v) {
    return std::max(0.0, static_cast<double>(v)) +
           std::min(0.0, alpha * (std::exp(static_cast<double>(v) / alpha) - 1));
  });
}
absl::Status ThresholdedRelu(KernelContext& ctx) {
  const float alpha = AttrF(ctx, "alpha", 1.0f);
  return FloatUnary(ctx, [alpha](auto v) { return v > alpha ? v : decltype(v)(0); });
}
absl::Status HardSigmoid(KernelContext& ctx) {
  const double alpha = AttrF(ctx, "alpha", 0.2f), beta = AttrF(ctx, "beta", 0.5f);
  return FloatUnary(ctx, [=](auto v) { return std::max(0.0, std::min(1.0, alpha * v + beta)); });
}
absl::Status HardSwish(KernelContext& ctx) {
  return FloatUnary(ctx, [](auto v) { return v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5)); });
}
absl::Status IsNaN(KernelContext& ctx) {
  return FloatPredicate(ctx, [](auto v) { return std::isnan(v); });
}
absl::Status IsInf(KernelContext& ctx) {
  const bool pos = ctx.node().attr_int("detect_positive", 1) != 0;
  const bool neg = ctx.node().attr_int("detect_negative", 1) != 0;
  return FloatPredicate(
      ctx, [=](auto v) { return std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg)); });
}
absl::Status Not(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kBool));
  for (int64_t i = 0; i < x.num_elements(); ++i) y->data<bool>()[i] = !x.data<bool>()[i];
  return absl::OkStatus();
}

absl::Status BitwiseNot(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < x.num_elements(); ++i)
        y->data<T>()[i] = static_cast<T>(~x.data<T>()[i]);
      return absl::OkStatus();
    } else {
      return ctx.Error("BitwiseNot takes integers");
    }
  });
}

absl::Status Clip(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() {
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (ctx.node().has_attr("min")) lo = static_cast<T>(ctx.node().attr_float("min", 0));
    if (ctx.node().has_attr("max")) hi = static_cast<T>(ctx.node().attr_float("max", 0));
    if (const Tensor* t = ctx.optional_input(1); t && t->num_elements() > 0) lo = t->data<T>()[0];
    if (const Tensor* t = ctx.optional_input(2); t && t->num_elements() > 0) hi = t->data<T>()[0];
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      T v = x.data<T>()[i];
      y->data<T>()[i] = v < lo ? lo : (v > hi ? hi : v);
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
