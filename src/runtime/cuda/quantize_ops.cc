// Linear quantization on the GPU: QuantizeLinear (f32 in), DequantizeLinear (f32, f16 or
// bf16 out) and DynamicQuantizeLinear, over the integer types u8 i8 u16 i16 i32; the
// integer products MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv (8- and
// 16-bit operands centered into f64, exact f64 GEMMs). Scales and zero points checked as the CPU
// kernels check them (cpu::ReadQuantIndex, ReadMatrixZeroPoint, ReadQLinearParams); kernels in
// quantize.cu.
#include <string>

#include "../cpu/window.h"
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

// An integer matrix operand (`shape`: as a matrix) minus its zero point, in f64 scratch.
absl::StatusOr<Tensor> Centered(const KernelContext& ctx, const Tensor& x, const Shape& shape,
                                const Tensor* zero_point, bool per_row, const std::string& what) {
  TPC_ASSIGN_OR_RETURN(const Shape zs,
                       cpu::ReadMatrixZeroPoint(ctx, x, shape, zero_point, per_row, what));
  TPC_ASSIGN_OR_RETURN(const QuantType t, QuantTypeOf(ctx, x.dtype()));
  if (shape.size() > static_cast<size_t>(math::kMaxDims)) return ctx.Error("rank over 8");
  TPC_ASSIGN_OR_RETURN(Tensor out, Scratch(ctx, ir::DType::kF64, shape));
  TPC_RETURN_IF_ERROR(
      Check(ctx, LaunchCenter(t, x.raw(), RawOrNull(zero_point), math::BroadcastView(zs, shape),
                              out.data<double>(), out.num_elements(), StreamOf(ctx))));
  return out;
}

// The exact product of the centered A (input 0) and B (input `b_input`), zero points at
// `a_zp_input` and `b_zp_input`, in f64 [batch..., M, N] (`full`) by cuBLAS: every partial
// sum of 8- and 16-bit operands is an integer far below 2^53, as in the CPU kernel.
struct IntProduct {
  Shape full, shape;  // the product's dims with both operands matrices; ONNX's output dims
  Tensor c;
};
absl::StatusOr<IntProduct> IntegerMatMul(const KernelContext& ctx, int b_input, int a_zp_input,
                                         int b_zp_input) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(b_input);
  TPC_ASSIGN_OR_RETURN(const cpu::MatMulShape g, cpu::MatMulShapes(ctx, a, b));
  TPC_ASSIGN_OR_RETURN(Tensor pa, Centered(ctx, a, g.a, ctx.optional_input(a_zp_input), true, "A"));
  TPC_ASSIGN_OR_RETURN(Tensor pb,
                       Centered(ctx, b, g.b, ctx.optional_input(b_zp_input), false, "B"));
  IntProduct r;
  r.full = g.batch;
  r.full.push_back(g.m);
  r.full.push_back(g.n);
  r.shape = g.out;
  TPC_ASSIGN_OR_RETURN(r.c, Scratch(ctx, ir::DType::kF64, r.full));
  if (r.c.num_elements() == 0) return r;
  if (g.k == 0) {
    TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(r.c.raw(), 0, r.c.nbytes(), StreamOf(ctx))));
    return r;
  }
  TPC_RETURN_IF_ERROR(RunMatMul(g, sizeof(double), pa.raw(), pb.raw(), r.c.raw(),
                                [&](const Gemm2D& gm, const void* x, const void* w, void* y) {
                                  return RunGemmF64(ctx, gm, static_cast<const double*>(x),
                                                    static_cast<const double*>(w),
                                                    static_cast<double*>(y));
                                }));
  return r;
}

}  // namespace

// Y = (A − a_zero_point) · (B − b_zero_point) in int32.
absl::Status MatMulInteger(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const IntProduct r, IntegerMatMul(ctx, 1, 2, 3));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.shape, ir::DType::kI32));
  return Check(ctx, LaunchWrapInt32(r.c.data<double>(), y->data<int32_t>(), y->num_elements(),
                                    StreamOf(ctx)));
}

// y = saturate(rint(product · a_scale · b_scale / y_scale) + y_zero_point), the scales f32.
absl::Status QLinearMatMul(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const IntProduct r, IntegerMatMul(ctx, 3, 2, 5));
  TPC_ASSIGN_OR_RETURN(const auto shapes, cpu::ReadQLinearParams(ctx, r.full));
  for (const int i : {1, 4, 6}) {
    if (ctx.input(i).dtype() != ir::DType::kF32) {
      return ctx.Error(
          absl::StrCat("input ", i, " ", ctx.input(i).TypeString(), " must be f32 on the GPU"));
    }
  }
  if (r.full.size() > static_cast<size_t>(math::kMaxDims)) return ctx.Error("rank over 8");
  const Tensor& y_zp = ctx.input(7);
  TPC_ASSIGN_OR_RETURN(const QuantType t, QuantTypeOf(ctx, y_zp.dtype()));
  QLinearParams p{};
  p.a_scale = ctx.input(1).data<float>();
  p.b_scale = ctx.input(4).data<float>();
  p.y_scale = ctx.input(6).data<float>();
  p.va = math::BroadcastView(shapes[0], r.full);
  p.vb = math::BroadcastView(shapes[1], r.full);
  p.vy = math::BroadcastView(shapes[2], r.full);
  p.vz = math::BroadcastView(shapes[3], r.full);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.shape, y_zp.dtype()));
  return Check(ctx, LaunchRequantize(t, r.c.data<double>(), p, y_zp.raw(), y->raw(),
                                     y->num_elements(), StreamOf(ctx)));
}

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

// The extremes of x by two Reduce rows into f32 scratch, NaN skipped as the CPU's std::min
// and std::max skip it ({0, 0} for an empty x), then one element kernel that derives the
// parameters from them.
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
    TPC_RETURN_IF_ERROR(Check(
        ctx, LaunchReduce(FloatKind::kF32, ReduceKind::kMinNumber, x.raw(), ext, all, stream)));
    TPC_RETURN_IF_ERROR(Check(
        ctx, LaunchReduce(FloatKind::kF32, ReduceKind::kMaxNumber, x.raw(), ext + 1, all, stream)));
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

namespace {

// The exact convolution of the centered X and W (ConvInteger's or, with `qlinear`,
// QLinearConv's operands) in f64 [N, M, outs] scratch: Conv's im2col and GEMMs in f64.
absl::StatusOr<Tensor> IntegerConvProduct(const KernelContext& ctx, bool qlinear,
                                          cpu::IntegerConvShape* shape) {
  TPC_ASSIGN_OR_RETURN(*shape, cpu::ReadIntegerConv(ctx, qlinear));
  TPC_ASSIGN_OR_RETURN(const math::ConvGeometry g, WindowGeometry(ctx, shape->win));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(qlinear ? 3 : 1);
  const Tensor* x_zp = ctx.optional_input(2);
  const Tensor* w_zp = ctx.optional_input(qlinear ? 5 : 3);
  TPC_RETURN_IF_ERROR(CheckZeroPoint(ctx, x_zp, x.dtype()));
  TPC_RETURN_IF_ERROR(CheckZeroPoint(ctx, w_zp, w.dtype()));
  TPC_ASSIGN_OR_RETURN(const QuantType tx, QuantTypeOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const QuantType tw, QuantTypeOf(ctx, w.dtype()));
  if (w.rank() > math::kMaxDims) return ctx.Error("rank over 8");
  const cudaStream_t stream = StreamOf(ctx);
  TPC_ASSIGN_OR_RETURN(Tensor xc, Scratch(ctx, ir::DType::kF64, x.shape()));
  TPC_ASSIGN_OR_RETURN(Tensor wc, Scratch(ctx, ir::DType::kF64, w.shape()));
  TPC_RETURN_IF_ERROR(
      Check(ctx, LaunchCenter(tx, x.raw(), RawOrNull(x_zp), math::BroadcastView({}, x.shape()),
                              xc.data<double>(), xc.num_elements(), stream)));
  Shape per_channel(static_cast<size_t>(w.rank()), 1);  // w's zero point: one, or [M]
  per_channel[0] = w_zp != nullptr && w_zp->num_elements() > 1 ? shape->m : 1;
  TPC_RETURN_IF_ERROR(Check(
      ctx, LaunchCenter(tw, w.raw(), RawOrNull(w_zp), math::BroadcastView(per_channel, w.shape()),
                        wc.data<double>(), wc.num_elements(), stream)));
  TPC_ASSIGN_OR_RETURN(Tensor y, Scratch(ctx, ir::DType::kF64, shape->out));
  if (y.num_elements() == 0) return y;
  TPC_RETURN_IF_ERROR(RunConvGemms(ctx, *shape, g, ir::DType::kF64, xc.raw(), wc.raw(), y.raw(),
                                   [&](const Gemm2D& gm, const void* a, const void* b, void* c) {
                                     return RunGemmF64(ctx, gm, static_cast<const double*>(a),
                                                       static_cast<const double*>(b),
                                                       static_cast<double*>(c));
                                   }));
  return y;
}

}  // namespace

// Y = conv(x − x_zero_point, w − w_zero_point) in int32.
absl::Status ConvInteger(KernelContext& ctx) {
  cpu::IntegerConvShape shape;
  TPC_ASSIGN_OR_RETURN(const Tensor c, IntegerConvProduct(ctx, false, &shape));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, ir::DType::kI32));
  return Check(
      ctx, LaunchWrapInt32(c.data<double>(), y->data<int32_t>(), y->num_elements(), StreamOf(ctx)));
}

// y = saturate(rint((conv + B) · x_scale · w_scale / y_scale) + y_zero_point), w_scale per
// output channel or for all.
absl::Status QLinearConv(KernelContext& ctx) {
  cpu::IntegerConvShape shape;
  TPC_ASSIGN_OR_RETURN(const Tensor c, IntegerConvProduct(ctx, true, &shape));
  for (const int i : {1, 4, 6}) {
    if (ctx.input(i).dtype() != ir::DType::kF32) {
      return ctx.Error(
          absl::StrCat("input ", i, " ", ctx.input(i).TypeString(), " must be f32 on the GPU"));
    }
  }
  const Tensor& y_zp = ctx.input(7);
  const Tensor* bias = ctx.optional_input(8);
  if (bias != nullptr && bias->dtype() != ir::DType::kI32) return ctx.Error("B must be int32");
  TPC_ASSIGN_OR_RETURN(const QuantType t, QuantTypeOf(ctx, y_zp.dtype()));
  const int64_t outs = shape.m == 0 || shape.n == 0 ? 0 : c.num_elements() / (shape.n * shape.m);
  const Shape full = {shape.n, shape.m, outs};
  const Shape channel = {shape.m, 1};
  QLinearParams p{};
  p.a_scale = ctx.input(1).data<float>();
  p.b_scale = ctx.input(4).data<float>();
  p.y_scale = ctx.input(6).data<float>();
  p.bias = bias != nullptr ? bias->data<int32_t>() : nullptr;
  p.va = math::BroadcastView({}, full);
  p.vb = math::BroadcastView(ctx.input(4).num_elements() > 1 ? channel : Shape{}, full);
  p.vy = math::BroadcastView({}, full);
  p.vz = math::BroadcastView({}, full);
  p.vbias = math::BroadcastView(channel, full);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, y_zp.dtype()));
  return Check(ctx, LaunchRequantize(t, c.data<double>(), p, y_zp.raw(), y->raw(),
                                     y->num_elements(), StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
