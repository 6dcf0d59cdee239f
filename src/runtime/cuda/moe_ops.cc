// onnxruntime's MoE on the device (moe.cu): the routing, each chosen expert's FC1 and FC2
// as GEMVs of the tokens that chose it, the activation and the weighted sum, with the
// intermediate rows in f32 scratch.
#include "ops.h"

namespace tpc::runtime::cuda {

absl::Status MoE(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::MoeLayout l, cpu::ReadMoeLayout(ctx));
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const int64_t slots = l.tokens * l.k;
  TPC_ASSIGN_OR_RETURN(Tensor experts, Scratch(ctx, ir::DType::kI64, {slots}));
  TPC_ASSIGN_OR_RETURN(Tensor weights, Scratch(ctx, ir::DType::kF32, {slots}));
  TPC_ASSIGN_OR_RETURN(Tensor hidden, Scratch(ctx, ir::DType::kF32, {slots, l.fc1_rows()}));
  TPC_ASSIGN_OR_RETURN(Tensor act, Scratch(ctx, ir::DType::kF32, {slots, l.inter}));
  TPC_ASSIGN_OR_RETURN(Tensor outs, Scratch(ctx, ir::DType::kF32, {slots, l.hidden}));
  const Tensor* b1 = ctx.optional_input(3);
  const Tensor* b2 = ctx.optional_input(5);
  MoeOperands o;
  o.input = x.raw();
  o.router = ctx.input(1).raw();
  o.fc1 = ctx.input(2).raw();
  o.fc1_bias = b1 != nullptr ? b1->raw() : nullptr;
  o.fc2 = ctx.input(4).raw();
  o.fc2_bias = b2 != nullptr ? b2->raw() : nullptr;
  o.output = y->raw();
  o.experts = experts.data<int64_t>();
  o.weights = weights.data<float>();
  o.hidden = hidden.data<float>();
  o.act = act.data<float>();
  o.slots = outs.data<float>();
  return Check(ctx, LaunchMoe(kind, l, o, StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
