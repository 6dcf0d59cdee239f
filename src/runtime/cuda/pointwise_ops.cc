// Element-wise CUDA kernels: binary ops with broadcasting, unary ops and activations,
// Where, float Cast. Shapes as the CPU kernels; math in math/pointwise.h.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {

absl::Status RunBinary(KernelContext& ctx, BinaryOp op) {
  const int n = ctx.num_inputs();
  std::vector<Shape> shapes;
  for (int i = 0; i < n; ++i) shapes.push_back(ctx.input(i).shape());
  for (const Shape& s : shapes) {
    if (s.size() > static_cast<size_t>(math::kMaxDims)) {
      return ctx.Error(
          absl::StrCat("rank ", s.size(), " is over the CUDA kernels' ", math::kMaxDims));
    }
  }
  TPC_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(ctx, shapes));
  const ir::DType dt = ctx.input(0).dtype();
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, dt));
  for (int i = 1; i < n; ++i) {
    if (ctx.input(i).dtype() != dt) return ctx.Error("inputs differ in element type");
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, dt));
  const int64_t count = y->num_elements();
  const StridedView vo = math::ContiguousView(out);
  if (n == 1) {
    return Check(ctx, LaunchCopy(ir::DTypeSize(dt), ctx.input(0).raw(), vo, y->raw(), vo, count,
                                 StreamOf(ctx)));
  }
  StridedView va = math::BroadcastView(shapes[0], out), vb = math::BroadcastView(shapes[1], out);
  StridedView vy = vo;
  math::Simplify({&va, &vb, &vy});
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(k, op, ctx.input(0).raw(), va, ctx.input(1).raw(), vb,
                                              y->raw(), count, StreamOf(ctx))));
  for (int i = 2; i < n; ++i) {
    StridedView vc = math::BroadcastView(shapes[static_cast<size_t>(i)], out), vs = vo;
    math::Simplify({&vc, &vs});
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(k, op, y->raw(), vs, ctx.input(i).raw(), vc,
                                                y->raw(), count, StreamOf(ctx))));
  }
  return absl::OkStatus();
}

absl::Status RunUnary(KernelContext& ctx, UnaryOp op, UnaryParams alpha) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return Check(ctx, LaunchUnary(k, op, alpha, x.raw(), y->raw(), x.num_elements(), StreamOf(ctx)));
}

namespace {

// y = op(x + bias) with a bias broadcast over x (BiasGelu, FastGelu's optional bias).
absl::Status BiasThenUnary(KernelContext& ctx, UnaryOp op, UnaryParams alpha = {}) {
  const Tensor* bias = ctx.optional_input(1);
  if (bias == nullptr) return RunUnary(ctx, op, alpha);
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  if (bias->dtype() != x.dtype()) return ctx.Error("the bias differs in element type");
  TPC_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(ctx, {x.shape(), bias->shape()}));
  if (out != x.shape()) return ctx.Error("the bias does not broadcast to the input");
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  StridedView vx = math::ContiguousView(out), vb = math::BroadcastView(bias->shape(), out), vy = vx;
  math::Simplify({&vx, &vb, &vy});
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(k, BinaryOp::kAdd, x.raw(), vx, bias->raw(), vb,
                                              y->raw(), y->num_elements(), StreamOf(ctx))));
  return Check(ctx,
               LaunchUnary(k, op, alpha, y->raw(), y->raw(), y->num_elements(), StreamOf(ctx)));
}

}  // namespace

std::optional<FloatKind> KindOf(ir::DType t) {
  switch (t) {
    case ir::DType::kF32:
      return FloatKind::kF32;
    case ir::DType::kF16:
      return FloatKind::kF16;
    case ir::DType::kBF16:
      return FloatKind::kBF16;
    default:
      return std::nullopt;
  }
}

absl::StatusOr<FloatKind> FloatKindOf(const KernelContext& ctx, ir::DType t) {
  if (auto k = KindOf(t)) return *k;
  return ctx.Error(
      absl::StrCat("element type ", ir::DTypeName(t), " has no CUDA kernel (f32, f16, bf16 only)"));
}

absl::Status Check(const KernelContext& ctx, cudaError_t e) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(ctx.node().Describe(), ": CUDA launch failed: ", cudaGetErrorString(e)));
}

absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, ir::DType dtype, const Shape& shape) {
  Tensor t(dtype, shape, nullptr);
  CudaBackend* b = &BackendOf(ctx);
  void* p = b->Allocate(std::max<size_t>(t.nbytes(), 1));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(ctx.node().Describe(), ": cannot allocate ",
                                                     t.nbytes(), " bytes of device memory"));
  }
  Tensor out(dtype, shape, p);
  out.set_owner(std::shared_ptr<void>(p, [b](void* q) { b->Free(q); }));
  return out;
}

absl::Status Add(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kAdd); }
absl::Status Sub(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kSub); }
absl::Status Mul(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kMul); }
absl::Status Div(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kDiv); }

absl::Status GatedAdd(KernelContext& ctx) {
  TPC_RETURN_IF_ERROR(cpu::GatedAddRows(ctx).status());
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  if (x.rank() > math::kMaxDims) {
    return ctx.Error(
        absl::StrCat("rank ", x.rank(), " is over the CUDA kernels' ", math::kMaxDims));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const int64_t count = y->num_elements();
  const StridedView vo = math::ContiguousView(x.shape());
  StridedView vy = vo, vg = math::BroadcastView(ctx.input(2).shape(), x.shape()), vout = vo;
  math::Simplify({&vy, &vg, &vout});
  TPC_RETURN_IF_ERROR(
      Check(ctx, LaunchBinary(k, BinaryOp::kMul, ctx.input(1).raw(), vy, ctx.input(2).raw(), vg,
                              y->raw(), count, StreamOf(ctx))));
  StridedView vx = vo, vs = vo, vo2 = vo;  // y = X + y, element by element in place
  math::Simplify({&vx, &vs, &vo2});
  return Check(ctx, LaunchBinary(k, BinaryOp::kAdd, x.raw(), vx, y->raw(), vs, y->raw(), count,
                                 StreamOf(ctx)));
}
absl::Status Pow(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kPow); }
absl::Status Max(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kMax); }
absl::Status Min(KernelContext& ctx) { return RunBinary(ctx, BinaryOp::kMin); }

absl::Status Relu(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kRelu); }
absl::Status Tanh(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kTanh); }
absl::Status Erf(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kErf); }
absl::Status Exp(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kExp); }
absl::Status Log(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kLog); }
absl::Status Sqrt(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSqrt); }
absl::Status Neg(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kNeg); }
absl::Status Abs(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kAbs); }
absl::Status Reciprocal(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kReciprocal); }
absl::Status Sigmoid(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSigmoid); }
absl::Status Sin(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kSin); }
absl::Status Cos(KernelContext& ctx) { return RunUnary(ctx, UnaryOp::kCos); }
absl::Status LeakyRelu(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kLeakyRelu, ctx.node().attr_float("alpha", 0.01f));
}
absl::Status Gelu(KernelContext& ctx) {
  const std::string approx = ctx.node().attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") {
    return ctx.Error(absl::StrCat("approximate '", approx, "' (expected none or tanh)"));
  }
  return RunUnary(ctx, approx == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf);
}
absl::Status FastGelu(KernelContext& ctx) { return BiasThenUnary(ctx, UnaryOp::kGeluTanh); }
absl::Status BiasGelu(KernelContext& ctx) { return BiasThenUnary(ctx, UnaryOp::kGeluErf); }
absl::Status QuickGelu(KernelContext& ctx) {
  return RunUnary(ctx, UnaryOp::kQuickGelu, ctx.node().attr_float("alpha", 1.702f));
}

absl::Status Where(KernelContext& ctx) {
  const Tensor &c = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
  if (c.dtype() != ir::DType::kBool) return ctx.Error("the condition must be bool");
  if (x.dtype() != y.dtype()) return ctx.Error("the branches differ in element type");
  TPC_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(ctx, {c.shape(), x.shape(), y.shape()}));
  if (out.size() > static_cast<size_t>(math::kMaxDims)) return ctx.Error("rank over 8");
  TPC_ASSIGN_OR_RETURN(Tensor * z, ctx.Output(0, out, x.dtype()));
  StridedView vc = math::BroadcastView(c.shape(), out), vx = math::BroadcastView(x.shape(), out),
              vy = math::BroadcastView(y.shape(), out), vz = math::ContiguousView(out);
  math::Simplify({&vc, &vx, &vy, &vz});
  return Check(ctx, LaunchWhere(ir::DTypeSize(x.dtype()), c.data<bool>(), vc, x.raw(), vx, y.raw(),
                                vy, z->raw(), z->num_elements(), StreamOf(ctx)));
}

absl::Status Cast(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::DType to = ctx.output_dtype(0);
  TPC_ASSIGN_OR_RETURN(FloatKind from_k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(FloatKind to_k, FloatKindOf(ctx, to));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), to));
  if (from_k == to_k) {
    if (x.nbytes() > 0) ctx.backend().Copy(y->raw(), x.raw(), x.nbytes());
    return absl::OkStatus();
  }
  return Check(ctx, LaunchCast(from_k, to_k, x.raw(), y->raw(), x.num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
