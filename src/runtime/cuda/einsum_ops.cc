// Einsum on the GPU: the equation read as the CPU kernel reads it (cpu::ReadEinsum), the
// plan packed for the kernel (at most 4 operands, 8 output and 8 summed dims), then one
// thread per output element (einsum.cu, math/einsum.h).
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {

absl::Status Einsum(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, first.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::EinsumShape shape, cpu::ReadEinsum(ctx));
  math::EinsumPlan plan;
  plan.operands = ctx.num_inputs();
  if (plan.operands > math::EinsumPlan::kMaxOperands || shape.out.size() > math::kMaxDims ||
      shape.sum.size() > math::kMaxDims) {
    return ctx.Error(absl::StrCat("the CUDA Einsum takes at most ", math::EinsumPlan::kMaxOperands,
                                  " operands and ", math::kMaxDims, " output and summed dims; ",
                                  "this one has ", plan.operands, ", ", shape.out.size(), " and ",
                                  shape.sum.size()));
  }
  plan.out_rank = static_cast<int>(shape.out.size());
  plan.sum_rank = static_cast<int>(shape.sum.size());
  for (int d = 0; d < plan.out_rank; ++d) plan.out_dims[d] = shape.out[static_cast<size_t>(d)];
  for (int d = 0; d < plan.sum_rank; ++d) {
    plan.sum_dims[d] = shape.sum[static_cast<size_t>(d)];
    plan.sums *= plan.sum_dims[d];
  }
  const void* operands[math::EinsumPlan::kMaxOperands] = {};
  for (int i = 0; i < plan.operands; ++i) {
    const auto o = static_cast<size_t>(i);
    operands[i] = ctx.input(i).raw();
    for (int d = 0; d < plan.out_rank; ++d) {
      plan.out_strides[i][d] = shape.out_strides[o][static_cast<size_t>(d)];
    }
    for (int d = 0; d < plan.sum_rank; ++d) {
      plan.sum_strides[i][d] = shape.sum_strides[o][static_cast<size_t>(d)];
    }
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, first.dtype()));
  return Check(ctx, LaunchEinsum(k, plan, operands, y->raw(), y->num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
