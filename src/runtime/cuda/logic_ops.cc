// The CUDA kernels with bool outputs: comparisons of floats with numpy broadcasting, IsNaN
// and IsInf, and logic on bools; and the bitwise ops on integers. Shapes as the CPU kernels; math
// in math/logic.h.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// The broadcast output of inputs 0 and 1, and their views of it.
struct Broadcast2 {
  Shape out;
  StridedView va, vb;
};

absl::StatusOr<Broadcast2> Broadcast(const KernelContext& ctx) {
  Broadcast2 b;
  TPC_ASSIGN_OR_RETURN(b.out,
                       cpu::BroadcastShapes(ctx, {ctx.input(0).shape(), ctx.input(1).shape()}));
  if (b.out.size() > static_cast<size_t>(math::kMaxDims)) {
    return ctx.Error(
        absl::StrCat("rank ", b.out.size(), " is over the CUDA kernels' ", math::kMaxDims));
  }
  b.va = math::BroadcastView(ctx.input(0).shape(), b.out);
  b.vb = math::BroadcastView(ctx.input(1).shape(), b.out);
  StridedView vo = math::ContiguousView(b.out);
  math::Simplify({&b.va, &b.vb, &vo});
  return b;
}

absl::Status CompareKernel(KernelContext& ctx, math::CompareOp op) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, a.dtype()));
  if (b.dtype() != a.dtype()) return ctx.Error("inputs differ in element type");
  TPC_ASSIGN_OR_RETURN(const Broadcast2 g, Broadcast(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, ir::DType::kBool));
  return Check(ctx, LaunchCompare(k, op, a.raw(), g.va, b.raw(), g.vb, y->data<bool>(),
                                  y->num_elements(), StreamOf(ctx)));
}

absl::Status LogicKernel(KernelContext& ctx, math::LogicOp op) {
  const Tensor& a = ctx.input(0);
  if (op == math::LogicOp::kNot) {
    if (a.dtype() != ir::DType::kBool) return ctx.Error("the input must be bool");
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, a.shape(), ir::DType::kBool));
    const StridedView v = math::ContiguousView({a.num_elements()});
    return Check(ctx, LaunchLogic(op, a.data<bool>(), v, nullptr, v, y->data<bool>(),
                                  y->num_elements(), StreamOf(ctx)));
  }
  const Tensor& b = ctx.input(1);
  if (a.dtype() != ir::DType::kBool || b.dtype() != ir::DType::kBool) {
    return ctx.Error("the inputs must be bool");
  }
  TPC_ASSIGN_OR_RETURN(const Broadcast2 g, Broadcast(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, ir::DType::kBool));
  return Check(ctx, LaunchLogic(op, a.data<bool>(), g.va, b.data<bool>(), g.vb, y->data<bool>(),
                                y->num_elements(), StreamOf(ctx)));
}

// Bitwise ops and BitShift: integer inputs of one type (the registry takes only those).
absl::Status BitKernel(KernelContext& ctx, math::BitOp op) {
  const Tensor& a = ctx.input(0);
  const int bytes = static_cast<int>(ir::DTypeSize(a.dtype()));
  if (op == math::BitOp::kNot) {
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, a.shape(), a.dtype()));
    const StridedView v = math::ContiguousView({a.num_elements()});
    return Check(ctx, LaunchBits(bytes, op, a.raw(), v, nullptr, v, y->raw(), y->num_elements(),
                                 StreamOf(ctx)));
  }
  const Tensor& b = ctx.input(1);
  if (b.dtype() != a.dtype()) return ctx.Error("inputs differ in element type");
  TPC_ASSIGN_OR_RETURN(const Broadcast2 g, Broadcast(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, a.dtype()));
  return Check(ctx, LaunchBits(bytes, op, a.raw(), g.va, b.raw(), g.vb, y->raw(), y->num_elements(),
                               StreamOf(ctx)));
}

absl::Status PredicateKernel(KernelContext& ctx, const math::Predicate& p) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kBool));
  return Check(ctx,
               LaunchPredicate(k, p, x.raw(), y->data<bool>(), x.num_elements(), StreamOf(ctx)));
}

}  // namespace

absl::Status Equal(KernelContext& ctx) { return CompareKernel(ctx, math::CompareOp::kEqual); }
absl::Status Less(KernelContext& ctx) { return CompareKernel(ctx, math::CompareOp::kLess); }
absl::Status LessOrEqual(KernelContext& ctx) {
  return CompareKernel(ctx, math::CompareOp::kLessOrEqual);
}
absl::Status Greater(KernelContext& ctx) { return CompareKernel(ctx, math::CompareOp::kGreater); }
absl::Status GreaterOrEqual(KernelContext& ctx) {
  return CompareKernel(ctx, math::CompareOp::kGreaterOrEqual);
}
absl::Status And(KernelContext& ctx) { return LogicKernel(ctx, math::LogicOp::kAnd); }
absl::Status Or(KernelContext& ctx) { return LogicKernel(ctx, math::LogicOp::kOr); }
absl::Status Xor(KernelContext& ctx) { return LogicKernel(ctx, math::LogicOp::kXor); }
absl::Status Not(KernelContext& ctx) { return LogicKernel(ctx, math::LogicOp::kNot); }
absl::Status BitwiseAnd(KernelContext& ctx) { return BitKernel(ctx, math::BitOp::kAnd); }
absl::Status BitwiseOr(KernelContext& ctx) { return BitKernel(ctx, math::BitOp::kOr); }
absl::Status BitwiseXor(KernelContext& ctx) { return BitKernel(ctx, math::BitOp::kXor); }
absl::Status BitwiseNot(KernelContext& ctx) { return BitKernel(ctx, math::BitOp::kNot); }
absl::Status BitShift(KernelContext& ctx) {
  const bool left = ctx.node().attr_string("direction", "") == "LEFT";
  return BitKernel(ctx, left ? math::BitOp::kShiftLeft : math::BitOp::kShiftRight);
}
absl::Status IsNaN(KernelContext& ctx) { return PredicateKernel(ctx, {.nan = true}); }
absl::Status IsInf(KernelContext& ctx) {
  return PredicateKernel(ctx, {.nan = false,
                               .positive = ctx.node().attr_int("detect_positive", 1) != 0,
                               .negative = ctx.node().attr_int("detect_negative", 1) != 0});
}

}  // namespace tpc::runtime::cuda
