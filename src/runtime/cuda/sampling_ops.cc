// The sampling operators on the GPU: GridSample, AffineGrid and RoiAlign, and the signal
// ones, DFT and STFT; their operands read as the CPU kernels read them (cpu::ReadGridSample,
// ReadAffineGrid: AffineGrid's size is a host input; ReadRoiAlign, ReadDft, ReadStft);
// kernels in grid_sample.cu, roi_align.cu and spectral.cu.
#include <string>

#include "absl/strings/str_cat.h"
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

// RoiAlign: one thread per output cell; the batch indices stay on the device, checked by
// the kernel (an index out of range fails the run naming the node, as the CPU kernel does
// at once).
absl::Status RoiAlign(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch = ctx.input(2);
  if (rois.dtype() != x.dtype()) return ctx.Error("X and rois differ in type");
  if (batch.dtype() != ir::DType::kI64 && batch.dtype() != ir::DType::kI32) {
    return ctx.Error("batch_indices must be int64 or int32");
  }
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const math::RoiAlignParams p, cpu::ReadRoiAlign(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y,
                       ctx.Output(0, {rois.dim(0), p.channels, p.out_h, p.out_w}, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("a batch index is out of range for X ", x.TypeString())).message()));
  return Check(ctx, LaunchRoiAlign(k, p, x.raw(), x.dim(0), rois.raw(), batch.raw(),
                                   batch.dtype() == ir::DType::kI64, y->raw(), y->num_elements(),
                                   BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

// DFT along one axis: one thread per output element (spectral.cu); dft_length and axis
// are host inputs.
absl::Status DFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  Shape out;
  TPC_ASSIGN_OR_RETURN(const math::DftLayout l, cpu::ReadDft(ctx, &out));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  return Check(ctx, LaunchDft(k, l, x.raw(), y->raw(), y->num_elements(), StreamOf(ctx)));
}

// STFT: one thread per output bin; frame_step and frame_length are host inputs, the
// window (of the signal's type) stays on the device.
absl::Status STFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  const Tensor* window = ctx.optional_input(2);
  if (window != nullptr && window->dtype() != x.dtype()) {
    return ctx.Error("the window differs in type from the signal");
  }
  TPC_ASSIGN_OR_RETURN(const math::StftLayout l, cpu::ReadStft(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {x.dim(0), l.frames, l.bins, 2}, x.dtype()));
  return Check(ctx, LaunchStft(k, l, x.raw(), window != nullptr ? window->raw() : nullptr, y->raw(),
                               y->num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
