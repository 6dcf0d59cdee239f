// BatchNormalization (inference), InstanceNormalization, GroupNormalization and LRN on
// the GPU, their operands checked as the CPU kernels check them (cpu::ReadChannelNorm,
// ReadGroupNorm); kernels in channel_norms.cu.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::Status GroupRows(KernelContext& ctx, const math::ChannelGroups& g, int64_t rows,
                       double epsilon) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  return Check(ctx, LaunchGroupNorm(k, x.raw(), ctx.input(1).raw(), ctx.input(2).raw(), y->raw(),
                                    rows, g, static_cast<float>(epsilon), StreamOf(ctx)));
}

}  // namespace

// Inference only: training_mode runs the CPU kernel (the registry's placement).
absl::Status BatchNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const cpu::ChannelNormShape sh, cpu::ReadChannelNorm(ctx, false));
  if (sh.training) return ctx.Error("training_mode has no CUDA kernel");
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return Check(
      ctx, LaunchBatchNorm(k, x.raw(), ctx.input(1).raw(), ctx.input(2).raw(), ctx.input(3).raw(),
                           ctx.input(4).raw(), y->raw(), sh.channels, sh.plane,
                           static_cast<float>(sh.epsilon), y->num_elements(), StreamOf(ctx)));
}

// LRN across `size` neighbouring channels, with the CPU kernel's checks.
absl::Status LRN(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("the input needs a channel dim");
  const int64_t size = ctx.node().attr_int("size", 0);
  if (size <= 0) return ctx.Error("size must be positive");
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const int64_t channels = x.dim(1), plane = x.num_elements() / (x.dim(0) * channels);
  return Check(
      ctx, LaunchLrn(k, x.raw(), y->raw(), channels, plane, size,
                     ctx.node().attr_float("alpha", 1e-4f), ctx.node().attr_float("beta", 0.75f),
                     ctx.node().attr_float("bias", 1.0f), y->num_elements(), StreamOf(ctx)));
}

absl::Status InstanceNormalization(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const cpu::ChannelNormShape sh, cpu::ReadChannelNorm(ctx, true));
  return GroupRows(ctx, math::ChannelGroups{sh.channels, 1, sh.plane, true}, sh.n * sh.channels,
                   sh.epsilon);
}

absl::Status GroupNormalization(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const cpu::GroupNormShape sh, cpu::ReadGroupNorm(ctx));
  return GroupRows(
      ctx, math::ChannelGroups{sh.groups, sh.channels / sh.groups, sh.plane, sh.per_channel},
      sh.n * sh.groups, sh.epsilon);
}

}  // namespace tpc::runtime::cuda
