// The windowed pools on the GPU: MaxPool (and its Indices), AveragePool and LpPool, one
// thread per output element (pool.cu, math/pool.h). Operands and geometry are the CPU
// kernel's (cpu::ReadPoolShape).
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::Status PoolImpl(KernelContext& ctx, const math::PoolParams& pp) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::PoolShape shape, cpu::ReadPoolShape(ctx));
  TPC_ASSIGN_OR_RETURN(const math::ConvGeometry g, WindowGeometry(ctx, shape.win));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, x.dtype()));
  int64_t* index = nullptr;
  if (pp.op == math::PoolOp::kMax && ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * indices, ctx.Output(1, shape.out, ir::DType::kI64));
    index = indices->data<int64_t>();
  }
  return Check(ctx, LaunchPool(k, g, pp, shape.planes, x.raw(), y->raw(), index, StreamOf(ctx)));
}

}  // namespace

absl::Status MaxPool(KernelContext& ctx) {
  math::PoolParams pp;
  pp.op = math::PoolOp::kMax;
  pp.column_major = ctx.node().attr_int("storage_order", 0) != 0;
  return PoolImpl(ctx, pp);
}

absl::Status AveragePool(KernelContext& ctx) {
  math::PoolParams pp;
  pp.op = math::PoolOp::kAverage;
  pp.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  return PoolImpl(ctx, pp);
}

absl::Status LpPool(KernelContext& ctx) {
  math::PoolParams pp;
  pp.op = math::PoolOp::kLp;
  pp.p = static_cast<float>(ctx.node().attr_int("p", 2));
  return PoolImpl(ctx, pp);
}

}  // namespace tpc::runtime::cuda
