// Gated DeltaNet's operators on the GPU (Qwen 3.5 as onnxruntime-genai's builder writes
// it): LinearAttention and LinearAttentionGate (linear_attention.cu), GatedRMSNorm and
// LpNormalization (vector_norms.cu). Checks and shapes are the CPU kernels'.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {

absl::Status LinearAttention(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::LinearAttentionLayout l, cpu::ReadLinearAttentionLayout(ctx));
  const Tensor& q = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, q.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y,
                       ctx.Output(0, {l.batch, l.tokens, l.out_heads() * l.dv}, q.dtype()));
  const Shape state{l.batch, l.v_heads, l.dk, l.dv};
  Tensor unwanted;
  void* present = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(1, state, q.dtype()));
    present = p->raw();
  } else {
    TPC_ASSIGN_OR_RETURN(unwanted, Scratch(ctx, q.dtype(), state));
    present = unwanted.raw();
  }
  auto raw = [](const Tensor* t) -> const void* { return t != nullptr ? t->raw() : nullptr; };
  return Check(ctx,
               LaunchLinearAttention(kind, l, q.raw(), ctx.input(1).raw(), ctx.input(2).raw(),
                                     raw(ctx.optional_input(3)), raw(ctx.optional_input(4)),
                                     raw(ctx.optional_input(5)), y->raw(), present, StreamOf(ctx)));
}

absl::Status LinearAttentionGate(KernelContext& ctx) {
  TPC_RETURN_IF_ERROR(cpu::CheckLinearGate(ctx));
  const Tensor& a = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, a.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * decay, ctx.Output(0, a.shape(), a.dtype()));
  void* beta = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * t, ctx.Output(1, a.shape(), a.dtype()));
    beta = t->raw();
  }
  const Tensor* b = ctx.optional_input(3);
  return Check(ctx, LaunchLinearAttentionGate(
                        kind, ctx.input(1).dtype() == ir::DType::kF32, a.raw(), ctx.input(1).raw(),
                        ctx.input(2).raw(), beta != nullptr ? b->raw() : nullptr, decay->raw(),
                        beta, a.num_elements(), a.dim(a.rank() - 1), StreamOf(ctx)));
}

absl::Status GatedRMSNorm(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const cpu::GatedRmsNormShape s, cpu::ReadGatedRmsNorm(ctx));
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return Check(ctx,
               LaunchGatedRmsNorm(kind, x.raw(), ctx.input(1).raw(), ctx.input(2).raw(), y->raw(),
                                  s.groups, s.size, s.epsilon, s.silu, StreamOf(ctx)));
}

absl::Status LpNormalization(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const cpu::LpNormShape s, cpu::ReadLpNorm(ctx));
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return Check(ctx, LaunchLpNormalize(kind, x.raw(), y->raw(), s.lines, s.count, s.inner, s.p,
                                      StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
