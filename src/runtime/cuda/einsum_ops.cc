// Einsum on the GPU: the equation read as the CPU kernel reads it (cpu::ReadEinsum), the
// plan packed for the kernel (at most 4 operands, 8 output and 8 summed dims); a
// two-operand product with a batched-GEMM form (math::PlanEinsumGemm) as copies around one
// cuBLAS GEMM, any other as one thread per output element (einsum.cu, math/einsum.h).
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// The dims of a view, and its element count.
Shape DimsOf(const StridedView& v) { return Shape(v.dims, v.dims + v.rank); }

// `v` of `src` copied into contiguous `dst` (elements of `bytes`).
absl::Status Gather(const KernelContext& ctx, int bytes, const void* src, const StridedView& v,
                    void* dst) {
  const Shape dims = DimsOf(v);
  return Check(ctx, LaunchCopy(bytes, src, v, dst, math::ContiguousView(dims),
                               cpu::NumElements(dims), StreamOf(ctx)));
}

// A two-operand Einsum as one batched cuBLAS GEMM (math::PlanEinsumGemm): each operand
// gathered into [batch, M, K] and [batch, K, N], the product into [batch, M, N], then
// scattered into y's label order.
absl::Status EinsumByGemm(const KernelContext& ctx, FloatKind k, const math::EinsumGemm& g,
                          const void* const* operands, Tensor& y) {
  const int bytes = static_cast<int>(ir::DTypeSize(y.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor a, Scratch(ctx, y.dtype(), {g.batch, g.m, g.k}));
  TPC_ASSIGN_OR_RETURN(Tensor b, Scratch(ctx, y.dtype(), {g.batch, g.k, g.n}));
  TPC_ASSIGN_OR_RETURN(Tensor c, Scratch(ctx, y.dtype(), {g.batch, g.m, g.n}));
  TPC_RETURN_IF_ERROR(Gather(ctx, bytes, operands[0], g.a, a.raw()));
  TPC_RETURN_IF_ERROR(Gather(ctx, bytes, operands[1], g.b, b.raw()));
  cpu::MatMulShape product;  // both operands full batches: MatMul's strided batch
  product.m = g.m;
  product.n = g.n;
  product.k = g.k;
  product.batch = product.batch_a = product.batch_b = {g.batch};
  TPC_RETURN_IF_ERROR(RunMatMul(product, static_cast<size_t>(bytes), a.raw(), b.raw(), c.raw(),
                                [&](const Gemm2D& gm, const void* pa, const void* pb, void* pc) {
                                  return RunGemm(ctx, k, gm, pa, pb, pc);
                                }));
  const Shape dims = DimsOf(g.c);
  return Check(ctx, LaunchCopy(bytes, c.raw(), math::ContiguousView(dims), y.raw(), g.c,
                               cpu::NumElements(dims), StreamOf(ctx)));
}

}  // namespace

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
  if (const auto gemm = math::PlanEinsumGemm(plan);
      gemm.has_value() && y->num_elements() > 0 && gemm->k > 0) {
    return EinsumByGemm(ctx, k, *gemm, operands, *y);
  }
  return Check(ctx, LaunchEinsum(k, plan, operands, y->raw(), y->num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
