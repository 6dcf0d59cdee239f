// GridSample and AffineGrid on the GPU, their operands read as the CPU kernels read them
// (cpu::ReadGridSample, ReadAffineGrid: AffineGrid's size is a host input); kernels in
// grid_sample.cu.
#include "ops.h"

namespace tpc::runtime::cuda {

absl::Status GridSample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (ctx.input(1).dtype() != x.dtype()) return ctx.Error("X and the grid differ in type");
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  Shape out;
  TPC_ASSIGN_OR_RETURN(const math::GridSampleGeometry g, cpu::ReadGridSample(ctx, &out));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  return Check(ctx, LaunchGridSample(k, g, x.raw(), ctx.input(1).raw(), y->raw(), y->num_elements(),
                                     StreamOf(ctx)));
}

absl::Status AffineGrid(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, theta.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::AffineGridShape a, cpu::ReadAffineGrid(ctx));
  AffineDims dims;
  for (size_t d = 0; d < a.spatial.size(); ++d) dims.dims[d] = a.spatial[d];
  dims.points = a.points;
  TPC_ASSIGN_OR_RETURN(Tensor * grid, ctx.Output(0, a.out, theta.dtype()));
  return Check(ctx,
               LaunchAffineGrid(k, static_cast<int>(a.spatial.size()), dims, a.align_corners,
                                theta.raw(), grid->raw(), grid->num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
