// Resize (and Upsample) on the GPU for float images: one pass per resized dim, as the CPU
// kernel (resize.cu; the reading of attributes and inputs is the CPU's, cpu::ReadResize).
// Between passes the values stay in f32 scratch; the last pass writes the input's type.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {

absl::Status Resize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::ResizePlan plan, cpu::ReadResize(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, plan.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  std::vector<size_t> passes;
  for (size_t d = 0; d < plan.axes.size(); ++d) {
    if (!cpu::ResizeAxisIsIdentity(plan.axes[d])) passes.push_back(d);
  }
  if (passes.empty()) {
    if (x.nbytes() > 0) ctx.backend().Copy(y->raw(), x.raw(), x.nbytes());
    return absl::OkStatus();
  }
  Shape shape = x.shape();
  Tensor src = x, keep;
  FloatKind src_kind = k;
  for (size_t p = 0; p < passes.size(); ++p) {
    const size_t d = passes[p];
    int64_t outer = 1, inner = 1;
    for (size_t j = 0; j < d; ++j) outer *= shape[j];
    for (size_t j = d + 1; j < shape.size(); ++j) inner *= shape[j];
    shape[d] = plan.out[d];
    const bool last = p + 1 == passes.size();
    Tensor dst = *y;
    if (!last) {
      TPC_ASSIGN_OR_RETURN(dst, Scratch(ctx, ir::DType::kF32, shape));
    }
    const FloatKind dst_kind = last ? k : FloatKind::kF32;
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchResizeAxis(src_kind, dst_kind, plan.opt, plan.axes[d], outer, inner,
                                    src.raw(), dst.raw(), StreamOf(ctx))));
    keep = src;  // the previous scratch lives until the next pass is queued
    src = dst;
    src_kind = dst_kind;
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cuda
