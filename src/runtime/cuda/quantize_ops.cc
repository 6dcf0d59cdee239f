// Linear quantization on the GPU: QuantizeLinear (f32 in), DequantizeLinear (f32, f16 or
// bf16 out) and DynamicQuantizeLinear, over the integer types u8 i8 u16 i16 i32; the
// scale and zero point checked as the CPU kernels check them (cpu::ReadQuantIndex);
// kernels in quantize.cu.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::StatusOr<QuantType> QuantTypeOf(const KernelContext& ctx, ir::DType t) {
  switch (t) {
    case ir::DType::kU8:
      return QuantType::kU8;
    case ir::DType::kI8:
      return QuantType::kI8;
    case ir::DType::kU16:
      return QuantType::kU16;
    case ir::DType::kI16:
      return QuantType::kI16;
    case ir::DType::kI32:
      return QuantType::kI32;
    default:
      break;
  }
  return ctx.Error(absl::StrCat("quantized element type ", ir::DTypeName(t),
                                " has no CUDA kernel (u8, i8, u16, i16, i32)"));
}

// The zero point, if any, of the quantized type `t`.
absl::Status CheckZeroPoint(const KernelContext& ctx, const Tensor* zero_point, ir::DType t) {
  if (zero_point == nullptr || zero_point->dtype() == t) return absl::OkStatus();
  return ctx.Error(absl::StrCat("the zero point ", zero_point->TypeString(),
                                " differs in type from the quantized ", ir::DTypeName(t)));
}

const void* RawOrNull(const Tensor* t) { return t != nullptr ? t->raw() : nullptr; }

}  // namespace

absl::Status QuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zero_point = ctx.optional_input(2);
  if (x.dtype() != ir::DType::kF32 || scale.dtype() != ir::DType::kF32) {
    return ctx.Error(absl::StrCat("x ", x.TypeString(), " and the scale ", scale.TypeString(),
                                  " must be f32 on the GPU"));
  }
  const ir::DType out_type = ctx.output_dtype(0);
  TPC_RETURN_IF_ERROR(CheckZeroPoint(ctx, zero_point, out_type));
  TPC_ASSIGN_OR_RETURN(const QuantType t, QuantTypeOf(ctx, out_type));
  TPC_ASSIGN_OR_RETURN(const math::QuantIndex q, cpu::ReadQuantIndex(ctx, x, scale, zero_point));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), out_type));
  return Check(ctx, LaunchQuantize(t, x.data<float>(), scale.data<float>(), RawOrNull(zero_point),
                                   q, y->raw(), y->num_elements(), StreamOf(ctx)));
}

absl::Status DequantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zero_point = ctx.optional_input(2);
  TPC_RETURN_IF_ERROR(CheckZeroPoint(ctx, zero_point, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const QuantType t, QuantTypeOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const math::QuantIndex q, cpu::ReadQuantIndex(ctx, x, scale, zero_point));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape()));
  if (y->dtype() != scale.dtype()) {
    return ctx.Error(absl::StrCat("the output (", ir::DTypeName(y->dtype()),
                                  ") differs in type from the scale ", scale.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, y->dtype()));
  return Check(ctx, LaunchDequantize(k, t, x.raw(), scale.raw(), RawOrNull(zero_point), q, y->raw(),
                                     y->num_elements(), StreamOf(ctx)));
}

// The extremes of x by two Reduce rows into f32 scratch ({0, 0} for an empty x), then one
// element kernel that derives the parameters from them.
absl::Status DynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return ctx.Error("x must be f32");
  const int64_t n = x.num_elements();
  const cudaStream_t stream = StreamOf(ctx);
  TPC_ASSIGN_OR_RETURN(Tensor extremes, Scratch(ctx, ir::DType::kF32, {2}));
  float* ext = extremes.data<float>();
  if (n == 0) {
    TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(ext, 0, 2 * sizeof(float), stream)));
  } else {
    const RowLayout all{1, n, 1};
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchReduce(FloatKind::kF32, ReduceKind::kMin, x.raw(), ext, all, stream)));
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchReduce(FloatKind::kF32, ReduceKind::kMax, x.raw(), ext + 1, all, stream)));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kU8));
  float* scale = nullptr;
  uint8_t* zero_point = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * s, ctx.Output(1, {}, ir::DType::kF32));
    scale = s->data<float>();
  }
  if (ctx.wants_output(2)) {
    TPC_ASSIGN_OR_RETURN(Tensor * z, ctx.Output(2, {}, ir::DType::kU8));
    zero_point = z->data<uint8_t>();
  }
  return Check(ctx, LaunchDynamicQuantize(x.data<float>(), ext, y->data<uint8_t>(), scale,
                                          zero_point, n, stream));
}

}  // namespace tpc::runtime::cuda
