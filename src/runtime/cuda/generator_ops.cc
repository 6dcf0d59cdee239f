// EyeLike and OneHot on the GPU (generators.cu): shapes and checks as the CPU kernels
// (cpu::ReadOneHot; OneHot's depth is a host input), elements moved as words of their
// size, so every element type of 1, 2, 4 or 8 bytes is taken.
#include <bit>
#include <cstdint>

#include "ops.h"
#include "tpc/util/half.h"

namespace tpc::runtime::cuda {
namespace {

// The bits of the value 1 in type t.
uint64_t OneBits(ir::DType t) {
  switch (t) {
    case ir::DType::kF32:
      return std::bit_cast<uint32_t>(1.0f);
    case ir::DType::kF64:
      return std::bit_cast<uint64_t>(1.0);
    case ir::DType::kF16:
      return FloatToHalf(1.0f);
    case ir::DType::kBF16:
      return FloatToBFloat16(1.0f);
    default:
      return 1;  // the integers and bool
  }
}

}  // namespace

absl::Status EyeLike(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.Error("the input must be 2-D");
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape()));
  return Check(
      ctx, LaunchEyeLike(static_cast<int>(ir::DTypeSize(y->dtype())), OneBits(y->dtype()), x.dim(1),
                         ctx.node().attr_int("k", 0), y->raw(), y->num_elements(), StreamOf(ctx)));
}

absl::Status OneHot(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  if (indices.dtype() != ir::DType::kI64 && indices.dtype() != ir::DType::kI32) {
    return ctx.Error("indices must be int64 or int32 on the GPU");
  }
  TPC_ASSIGN_OR_RETURN(const cpu::OneHotShape r, cpu::ReadOneHot(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.out, values.dtype()));
  return Check(ctx, LaunchOneHot(static_cast<int>(ir::DTypeSize(values.dtype())), indices.raw(),
                                 indices.dtype() == ir::DType::kI64, values.raw(), r.depth, r.inner,
                                 y->raw(), y->num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
