// RotaryEmbedding on the GPU: ONNX's (opset 23) and onnxruntime's, one element-wise
// kernel (rotary.cu) with the position ids on the device (one outside the caches fails the
// run at its end, naming the node). Checks and layouts are the CPU kernels'
// (cpu::ReadRotaryLayout).
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::Status Launch(KernelContext& ctx, const math::RotaryLayout& l, const Tensor& x,
                    const Tensor* pos, const Tensor& cos, const Tensor& sin) {
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("a position is outside the caches' ", l.cache_rows, " rows"))
          .message()));
  return Check(ctx, LaunchRotaryEmbedding(k, l, x.raw(), pos != nullptr ? pos->raw() : nullptr,
                                          pos != nullptr && pos->dtype() == ir::DType::kI64,
                                          cos.raw(), sin.raw(), y->raw(), x.num_elements(),
                                          BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

}  // namespace

absl::Status RotaryEmbedding(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::RotaryLayout l, cpu::ReadRotaryLayout(ctx));
  return Launch(ctx, l, ctx.input(0), ctx.optional_input(3), ctx.input(1), ctx.input(2));
}

absl::Status MsRotaryEmbedding(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::RotaryLayout l, cpu::ReadRotaryLayout(ctx));
  return Launch(ctx, l, ctx.input(0), &ctx.input(1), ctx.input(2), ctx.input(3));
}

// onnxruntime's MRotaryEmbedding: the token-by-token caches in scratch (rotary.cu's
// LaunchMRopeCaches), then RotaryEmbedding's kernel over them (mode 0, no ids).
absl::Status MRotaryEmbedding(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const cpu::MRopeLayout m, cpu::ReadMRopeLayout(ctx));
  const math::RotaryLayout& l = m.rotary;
  const Tensor& x = ctx.input(0);
  const Tensor& pos = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  const int64_t tokens = l.batch * l.seq;
  TPC_ASSIGN_OR_RETURN(Tensor cos, Scratch(ctx, x.dtype(), {tokens, l.half}));
  TPC_ASSIGN_OR_RETURN(Tensor sin, Scratch(ctx, x.dtype(), {tokens, l.half}));
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("a position is outside the caches' ", m.positions, " rows"))
          .message()));
  TPC_RETURN_IF_ERROR(Check(
      ctx,
      LaunchMRopeCaches(k, m.sections, pos.raw(), pos.dtype() == ir::DType::kI64,
                        ctx.input(2).raw(), ctx.input(3).raw(), m.positions, m.scale, cos.raw(),
                        sin.raw(), tokens, l.half, BackendOf(ctx).flag(), code, StreamOf(ctx))));
  return Launch(ctx, l, x, nullptr, cos, sin);
}

}  // namespace tpc::runtime::cuda
