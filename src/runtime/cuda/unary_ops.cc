// ONNX's math functions and activations on the GPU, with the attributes the CPU kernels
// read (cpu/unary.cc, cpu/elementwise.cc): one element-wise launch each through RunUnary
// (math::ApplyUnary) or RunBinary (math::ApplyBinary). Clip's bounds are host inputs.
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ops.h"
#include "tpc/util/half.h"

namespace tpc::runtime::cuda {
namespace {

float Attr(const KernelContext& ctx, const char* name, float def) {
  return ctx.node().attr_float(name, def);
}

// The one value of a float scalar on the host (Clip's min or max), as f32.
absl::StatusOr<float> HostScalar(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.num_elements() != 1) {
    return ctx.Error(absl::StrCat(what, " ", t.TypeString(), " is not one value"));
  }
  switch (t.dtype()) {
    case ir::DType::kF32: {
      float f;
      std::memcpy(&f, t.raw(), sizeof(f));
      return f;
    }
    case ir::DType::kF16:
    case ir::DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, t.raw(), sizeof(h));
      return t.dtype() == ir::DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
    }
    default:
      return ctx.Error(absl::StrCat(what, " ", t.TypeString(), " is not a float"));
  }
}

}  // namespace

absl::Status Tan(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kTan); }
absl::Status Asin(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAsin); }
absl::Status Acos(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAcos); }
absl::Status Atan(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAtan); }
absl::Status Sinh(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSinh); }
absl::Status Cosh(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kCosh); }
absl::Status Asinh(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAsinh); }
absl::Status Acosh(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAcosh); }
absl::Status Atanh(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAtanh); }
absl::Status Ceil(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kCeil); }
absl::Status Floor(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kFloor); }
absl::Status Round(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kRound); }
absl::Status Sign(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSign); }
absl::Status Softplus(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSoftplus); }
absl::Status Mish(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kMish); }
absl::Status Softsign(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSoftsign); }
absl::Status HardSwish(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kHardSwish); }
absl::Status Elu(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kElu, Attr(ctx, "alpha", 1.0f));
}
absl::Status Selu(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kSelu,
                  {Attr(ctx, "alpha", 1.67326319217681884765625f),
                   Attr(ctx, "gamma", 1.05070102214813232421875f)});
}
absl::Status Celu(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kCelu, Attr(ctx, "alpha", 1.0f));
}
absl::Status ThresholdedRelu(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kThresholdedRelu, Attr(ctx, "alpha", 1.0f));
}
absl::Status HardSigmoid(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kHardSigmoid, {Attr(ctx, "alpha", 0.2f), Attr(ctx, "beta", 0.5f)});
}
absl::Status Shrink(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kShrink, {Attr(ctx, "lambd", 0.5f), Attr(ctx, "bias", 0.0f)});
}

// Clip: bounds from the attributes (before opset 11) or the optional inputs 1 and 2;
// absent ones do not bound.
absl::Status Clip(KernelContext& ctx) {
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (ctx.node().has_attr("min")) lo = Attr(ctx, "min", 0.0f);
  if (ctx.node().has_attr("max")) hi = Attr(ctx, "max", 0.0f);
  if (const Tensor* t = ctx.optional_input(1); t != nullptr && t->num_elements() > 0) {
    TPC_ASSIGN_OR_RETURN(lo, HostScalar(ctx, *t, "min"));
  }
  if (const Tensor* t = ctx.optional_input(2); t != nullptr && t->num_elements() > 0) {
    TPC_ASSIGN_OR_RETURN(hi, HostScalar(ctx, *t, "max"));
  }
  return RunUnary(ctx, UnaryOp::kClip, {lo, hi});
}

absl::Status Mod(KernelContext& ctx) {
  return RunBinary(ctx,
                   ctx.node().attr_int("fmod", 0) != 0 ? BinaryOp::kFmod : BinaryOp::kFloorMod);
}
absl::Status PRelu(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kPRelu); }
absl::Status Sum(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kAdd); }

// Mean: the sum, then divided by the count in place.
absl::Status Mean(KernelContext& ctx) {
  TPC_RETURN_IF_ERROR(RunBinary(ctx, BinaryOp::kAdd));
  Tensor& y = ctx.output(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, y.dtype()));
  return Check(ctx, LaunchUnary(k, UnaryOp::kDivideBy, static_cast<float>(ctx.num_inputs()),
                                y.raw(), y.raw(), y.num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
