// Conv on the GPU: per image and group, the im2col matrix of the group's channels
// (conv.cu; skipped for a 1x1 window that reads every input once in order), then one
// cuBLAS GEMM Y[M/g, outs] = W[M/g, C/g · taps] · col (RunConvGemms, which the integer
// convolutions share in f64), then the bias. Checks and geometry are the CPU kernel's
// (cpu::ReadConvShape). ConvTranspose and Col2Im by the col2im gather.
#include <functional>

#include "../cpu/window.h"
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {

namespace {

// y[n, m, spatial...] += b[m], in place.
absl::Status AddChannelBias(KernelContext& ctx, FloatKind k, const Tensor& b, Tensor& y, int64_t n,
                            int64_t m, int64_t size) {
  const Shape flat = {n, m, size};
  StridedView vy = math::ContiguousView(flat), vb = math::BroadcastView({m, 1}, flat), vo = vy;
  math::Simplify({&vy, &vb, &vo});
  return Check(ctx, LaunchBinary(k, BinaryOp::kAdd, y.raw(), vy, b.raw(), vb, y.raw(),
                                 y.num_elements(), StreamOf(ctx)));
}

}  // namespace

absl::StatusOr<math::ConvGeometry> WindowGeometry(const KernelContext& ctx,
                                                  const cpu::Window& win) {
  if (win.spatial() < 1 || win.spatial() > math::kMaxSpatial) {
    return ctx.Error(absl::StrCat(win.spatial(), " spatial dims: the CUDA kernels take 1 to ",
                                  math::kMaxSpatial));
  }
  math::ConvGeometry g;
  g.spatial = static_cast<int>(win.spatial());
  for (int d = 0; d < g.spatial; ++d) {
    const size_t s = static_cast<size_t>(d);
    g.in[d] = win.in[s];
    g.kernel[d] = win.kernel[s];
    g.strides[d] = win.strides[s];
    g.dilations[d] = win.dilations[s];
    g.pad_begin[d] = win.pad_begin[s];
    g.pad_end[d] = win.pad_end[s];
    g.out[d] = win.out[s];
    g.taps *= win.kernel[s];
    g.outs *= win.out[s];
    g.in_size *= win.in[s];
  }
  return g;
}

absl::Status RunConvGemms(
    const KernelContext& ctx, const cpu::ConvShape& shape, const math::ConvGeometry& g,
    ir::DType dt, const void* x, const void* w, void* y,
    const std::function<absl::Status(const Gemm2D&, const void*, const void*, void*)>& gemm) {
  bool direct = true;  // a 1x1 window reading every input once, in order
  for (int d = 0; d < g.spatial; ++d) {
    direct = direct && g.kernel[d] == 1 && g.out[d] == g.in[d] && g.strides[d] == 1 &&
             g.pad_begin[d] == 0;
  }
  const int64_t cg = shape.c / shape.group, mg = shape.m / shape.group, rows = cg * g.taps;
  const auto es = static_cast<size_t>(ir::DTypeSize(dt));
  Tensor col;
  if (!direct) {
    TPC_ASSIGN_OR_RETURN(col, Scratch(ctx, dt, {rows, g.outs}));
  }
  Gemm2D gemm2d;
  gemm2d.m = mg;
  gemm2d.n = g.outs;
  gemm2d.k = rows;
  gemm2d.lda = rows;
  gemm2d.ldb = g.outs;
  gemm2d.ldc = g.outs;
  for (int64_t i = 0; i < shape.n; ++i) {
    for (int64_t grp = 0; grp < shape.group; ++grp) {
      const auto* xg = static_cast<const uint8_t*>(x) +
                       static_cast<size_t>((i * shape.c + grp * cg) * g.in_size) * es;
      if (!direct) {
        TPC_RETURN_IF_ERROR(
            Check(ctx, LaunchIm2Col(static_cast<int>(es), g, cg, xg, col.raw(), StreamOf(ctx))));
      }
      TPC_RETURN_IF_ERROR(gemm(
          gemm2d, static_cast<const uint8_t*>(w) + static_cast<size_t>(grp * mg * rows) * es,
          direct ? xg : col.raw(),
          static_cast<uint8_t*>(y) + static_cast<size_t>((i * shape.m + grp * mg) * g.outs) * es));
    }
  }
  return absl::OkStatus();
}

absl::Status Conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.optional_input(2);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::ConvShape shape, cpu::ReadConvShape(ctx));
  TPC_ASSIGN_OR_RETURN(const math::ConvGeometry g, WindowGeometry(ctx, shape.win));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  TPC_RETURN_IF_ERROR(RunConvGemms(ctx, shape, g, x.dtype(), x.raw(), w.raw(), y->raw(),
                                   [&](const Gemm2D& gm, const void* a, const void* bm, void* c) {
                                     return RunGemm(ctx, k, gm, a, bm, c);
                                   }));
  if (b == nullptr) return absl::OkStatus();
  return AddChannelBias(ctx, k, *b, *y, shape.n, shape.m, g.outs);
}

// ConvTranspose: per image and group, col [M/g · taps, ins] = W_gᵀ · X_g by one cuBLAS
// GEMM, then the col2im gather into Y (conv.cu), then the bias. Checks and geometry are the
// CPU kernel's (cpu::ReadConvTransposeShape).
absl::Status ConvTranspose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.optional_input(2);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::ConvShape shape, cpu::ReadConvTransposeShape(ctx));
  TPC_ASSIGN_OR_RETURN(const math::ConvGeometry g, WindowGeometry(ctx, shape.win));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const int64_t cg = shape.c / shape.group, mg = shape.m / shape.group, rows = mg * g.taps;
  const int64_t ins = g.outs, y_size = g.in_size;
  const size_t es = static_cast<size_t>(ir::DTypeSize(x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor col, Scratch(ctx, x.dtype(), {rows, ins}));
  Gemm2D gemm;  // col = W_gᵀ · X_g, W_g [cg, rows] row-major
  gemm.ta = true;
  gemm.m = rows;
  gemm.n = ins;
  gemm.k = cg;
  gemm.lda = rows;
  gemm.ldb = ins;
  gemm.ldc = ins;
  const auto* pw = static_cast<const uint8_t*>(w.raw());
  const auto* px = static_cast<const uint8_t*>(x.raw());
  auto* py = static_cast<uint8_t*>(y->raw());
  for (int64_t i = 0; i < shape.n; ++i) {
    for (int64_t grp = 0; grp < shape.group; ++grp) {
      TPC_RETURN_IF_ERROR(RunGemm(ctx, k, gemm, pw + static_cast<size_t>(grp * cg * rows) * es,
                                  px + static_cast<size_t>((i * shape.c + grp * cg) * ins) * es,
                                  col.raw()));
      TPC_RETURN_IF_ERROR(
          Check(ctx, LaunchCol2Im(k, g, mg, col.raw(),
                                  py + static_cast<size_t>((i * shape.m + grp * mg) * y_size) * es,
                                  StreamOf(ctx))));
    }
  }
  if (b == nullptr) return absl::OkStatus();
  return AddChannelBias(ctx, k, *b, *y, shape.n, shape.m, y_size);
}

// Col2Im: the blocks of every image summed back in one col2im gather (conv.cu): the N
// images' columns are consecutive [C · taps, L] matrices, so they read as N · C channels.
// Checks and geometry are the CPU kernel's (cpu::ReadCol2Im).
absl::Status Col2Im(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::Col2ImShape shape, cpu::ReadCol2Im(ctx));
  TPC_ASSIGN_OR_RETURN(const math::ConvGeometry g, WindowGeometry(ctx, shape.win));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  return Check(ctx, LaunchCol2Im(k, g, shape.n * shape.c, x.raw(), y->raw(), StreamOf(ctx)));
}

// DeformConv: per image its sampled columns (conv.cu), then per group one cuBLAS GEMM
// Y[oC/g, oh · ow] = W_g · cols_g, then the bias; checks as the CPU kernel's
// (cpu::ReadDeformConv).
absl::Status DeformConv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* b = ctx.optional_input(3);
  const Tensor* mask = ctx.optional_input(4);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::DeformShape shape, cpu::ReadDeformConv(ctx));
  const math::DeformGeometry& g = shape.g;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {shape.n, shape.oc, g.oh, g.ow}, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const int64_t taps = g.taps(), plane = g.plane(), cg = g.c / shape.group,
                ocg = shape.oc / shape.group;
  const size_t es = static_cast<size_t>(ir::DTypeSize(x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor col, Scratch(ctx, x.dtype(), {g.c * taps, plane}));
  Gemm2D gemm;
  gemm.m = ocg;
  gemm.n = plane;
  gemm.k = cg * taps;
  gemm.lda = cg * taps;
  gemm.ldb = plane;
  gemm.ldc = plane;
  const auto* px = static_cast<const uint8_t*>(x.raw());
  const auto* po = static_cast<const uint8_t*>(offset.raw());
  const auto* pm = mask != nullptr ? static_cast<const uint8_t*>(mask->raw()) : nullptr;
  const auto* pw = static_cast<const uint8_t*>(w.raw());
  auto* py = static_cast<uint8_t*>(y->raw());
  const int64_t x_image = g.c * g.h * g.w, off_image = g.offset_group * taps * 2 * plane,
                mask_image = g.offset_group * taps * plane;
  for (int64_t i = 0; i < shape.n; ++i) {
    TPC_RETURN_IF_ERROR(Check(
        ctx,
        LaunchDeformCol(k, g, px + static_cast<size_t>(i * x_image) * es,
                        po + static_cast<size_t>(i * off_image) * es,
                        pm != nullptr ? pm + static_cast<size_t>(i * mask_image) * es : nullptr,
                        col.raw(), StreamOf(ctx))));
    for (int64_t grp = 0; grp < shape.group; ++grp) {
      TPC_RETURN_IF_ERROR(
          RunGemm(ctx, k, gemm, pw + static_cast<size_t>(grp * ocg * cg * taps) * es,
                  static_cast<const uint8_t*>(col.raw()) +
                      static_cast<size_t>(grp * cg * taps * plane) * es,
                  py + static_cast<size_t>((i * shape.oc + grp * ocg) * plane) * es));
    }
  }
  if (b == nullptr) return absl::OkStatus();
  return AddChannelBias(ctx, k, *b, *y, shape.n, shape.oc, plane);
}

// onnxruntime's CausalConvWithState: the output and the present state, one launch.
absl::Status CausalConvWithState(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::CausalConvLayout l, cpu::ReadCausalConvLayout(ctx));
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  void* present = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(1, {l.batch, l.channels, l.state()}, x.dtype()));
    present = p->raw();
  }
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* past = ctx.optional_input(3);
  return Check(ctx, LaunchCausalConv(kind, l, x.raw(), ctx.input(1).raw(),
                                     bias != nullptr ? bias->raw() : nullptr,
                                     past != nullptr ? past->raw() : nullptr, y->raw(), present,
                                     StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
