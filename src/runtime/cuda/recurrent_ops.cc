// RNN, GRU and LSTM on the GPU, in f32 as the CPU kernel computes them (f16 and bf16
// operands converted on the way in, the outputs on the way out): per direction the input
// projection of every step by one cuBLAS GEMM, then per step the hidden projection (one
// GEMM; GRU without linear_before_reset a second one, of r ⊙ H with Rh) and one step kernel
// (recurrent.cu, math/recurrent.h). Checks as the CPU kernel's (cpu::ReadRecurrent); the
// sequence lengths stay on the device and are checked by the kernels.
#include <string>

#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

using math::CellKind;

// `t` as f32 device memory: itself, or converted into scratch.
absl::StatusOr<Tensor> AsF32(const KernelContext& ctx, const Tensor& t) {
  if (t.dtype() == ir::DType::kF32) return t;
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, t.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor out, Scratch(ctx, ir::DType::kF32, t.shape()));
  TPC_RETURN_IF_ERROR(Check(
      ctx, LaunchCast(k, FloatKind::kF32, t.raw(), out.raw(), t.num_elements(), StreamOf(ctx))));
  return out;
}

// dst (f32, contiguous over `dims`) = src (f32) read through `strides` over `dims`.
absl::Status CopyF32(const KernelContext& ctx, const float* src, const Shape& dims,
                     const Shape& strides, float* dst) {
  const StridedView vs = math::ViewOf(dims, strides), vd = math::ContiguousView(dims);
  return Check(ctx, LaunchCopy(4, src, vs, dst, vd, cpu::NumElements(dims), StreamOf(ctx)));
}

// The f32 [a, b, inner] block `src` as [b, a, inner] in `dst` (layout 1 ↔ layout 0).
absl::Status SwapOuter(const KernelContext& ctx, const float* src, float* dst, int64_t a, int64_t b,
                       int64_t inner) {
  return CopyF32(ctx, src, {b, a, inner}, {inner, b * inner, 1}, dst);
}

// An initial state (input i) in layout 0 [dirs, batch, hidden] f32, zero when absent.
absl::StatusOr<Tensor> InitialState(const KernelContext& ctx, const cpu::RecurrentShape& n, int i) {
  TPC_ASSIGN_OR_RETURN(Tensor s, Scratch(ctx, ir::DType::kF32, {n.dirs, n.batch, n.hidden}));
  const Tensor* t = ctx.optional_input(i);
  if (t == nullptr) {
    TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(s.raw(), 0, s.nbytes(), StreamOf(ctx))));
    return s;
  }
  TPC_ASSIGN_OR_RETURN(const Tensor f, AsF32(ctx, *t));
  if (n.layout1) {
    TPC_RETURN_IF_ERROR(
        SwapOuter(ctx, f.data<float>(), s.data<float>(), n.batch, n.dirs, n.hidden));
  } else {
    ctx.backend().Copy(s.raw(), f.raw(), s.nbytes());
  }
  return s;
}

// Output i (shape `shape`, the node's float type) from f32 `src` read through `strides`
// over `shape`.
absl::Status WriteOutput(KernelContext& ctx, int i, const Shape& shape, const Shape& strides,
                         const float* src) {
  if (!ctx.wants_output(i)) return absl::OkStatus();
  TPC_ASSIGN_OR_RETURN(Tensor * out, ctx.Output(i, shape, ctx.input(0).dtype()));
  if (out->num_elements() == 0) return absl::OkStatus();
  TPC_ASSIGN_OR_RETURN(const FloatKind k, FloatKindOf(ctx, out->dtype()));
  if (k == FloatKind::kF32) return CopyF32(ctx, src, shape, strides, out->data<float>());
  TPC_ASSIGN_OR_RETURN(Tensor tmp, Scratch(ctx, ir::DType::kF32, shape));
  TPC_RETURN_IF_ERROR(CopyF32(ctx, src, shape, strides, tmp.data<float>()));
  return Check(ctx, LaunchCast(FloatKind::kF32, k, tmp.raw(), out->raw(), out->num_elements(),
                               StreamOf(ctx)));
}

absl::Status Recurrent(KernelContext& ctx, CellKind cell) {
  TPC_ASSIGN_OR_RETURN(const cpu::RecurrentShape n, cpu::ReadRecurrent(ctx, cell));
  const int64_t hs = n.hidden, gh = n.cells[0].gates() * hs, rows = n.seq * n.batch;
  const cudaStream_t stream = StreamOf(ctx);
  const Tensor* lens = ctx.optional_input(4);
  if (lens != nullptr && lens->dtype() != ir::DType::kI32) {
    return ctx.Error("sequence_lens must be int32");
  }
  TPC_ASSIGN_OR_RETURN(const Tensor xf, AsF32(ctx, ctx.input(0)));
  TPC_ASSIGN_OR_RETURN(const Tensor w, AsF32(ctx, ctx.input(1)));
  TPC_ASSIGN_OR_RETURN(const Tensor r, AsF32(ctx, ctx.input(2)));
  Tensor b, p;
  if (const Tensor* t = ctx.optional_input(3)) {
    TPC_ASSIGN_OR_RETURN(b, AsF32(ctx, *t));
  }
  if (const Tensor* t = ctx.optional_input(7); t != nullptr && cell == CellKind::kLstm) {
    TPC_ASSIGN_OR_RETURN(p, AsF32(ctx, *t));
  }
  // X in layout 0.
  Tensor x0 = xf;
  if (n.layout1) {
    TPC_ASSIGN_OR_RETURN(x0, Scratch(ctx, ir::DType::kF32, {n.seq, n.batch, n.input}));
    TPC_RETURN_IF_ERROR(
        SwapOuter(ctx, xf.data<float>(), x0.data<float>(), n.batch, n.seq, n.input));
  }
  TPC_ASSIGN_OR_RETURN(Tensor h_all, InitialState(ctx, n, 5));
  Tensor c_all;
  if (cell == CellKind::kLstm) {
    TPC_ASSIGN_OR_RETURN(c_all, InitialState(ctx, n, 6));
  }
  TPC_ASSIGN_OR_RETURN(Tensor y0, Scratch(ctx, ir::DType::kF32, {n.seq, n.dirs, n.batch, hs}));
  TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(y0.raw(), 0, y0.nbytes(), stream)));
  TPC_ASSIGN_OR_RETURN(Tensor xw, Scratch(ctx, ir::DType::kF32, {rows, gh}));
  TPC_ASSIGN_OR_RETURN(Tensor hr, Scratch(ctx, ir::DType::kF32, {n.batch, gh}));
  Tensor reset, rh;
  if (cell == CellKind::kGru && !n.cells[0].linear_before_reset) {
    TPC_ASSIGN_OR_RETURN(reset, Scratch(ctx, ir::DType::kF32, {n.batch, hs}));
    TPC_ASSIGN_OR_RETURN(rh, Scratch(ctx, ir::DType::kF32, {n.batch, hs}));
  }
  const int code =
      BackendOf(ctx).Expect(std::string(ctx.Error("a sequence length is out of range").message()));
  int* flag = BackendOf(ctx).flag();
  if (lens != nullptr && n.seq * hs == 0) {  // no step kernel would check them
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchCheckLengths(lens->data<int32_t>(), n.batch, n.seq, flag, code, stream)));
  }

  for (int64_t d = 0; d < n.dirs; ++d) {
    const math::CellParams& cp = n.cells[static_cast<size_t>(d)];
    // XW = X · W_dᵀ over every step.
    if (rows > 0 && n.input > 0) {
      Gemm2D g;
      g.tb = true;
      g.m = rows;
      g.n = gh;
      g.k = n.input;
      g.lda = n.input;
      g.ldb = n.input;
      g.ldc = gh;
      TPC_RETURN_IF_ERROR(RunGemm(ctx, FloatKind::kF32, g, x0.data<float>(),
                                  w.data<float>() + d * gh * n.input, xw.data<float>()));
    } else {
      TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(xw.raw(), 0, xw.nbytes(), stream)));
    }
    RecurrentStep a;
    a.seq = n.seq;
    a.batch = n.batch;
    a.dirs = n.dirs;
    a.d = d;
    a.reverse = n.reverse || d == 1;
    a.xw = xw.data<float>();
    a.hr = hr.data<float>();
    a.wb = b.raw() != nullptr ? b.data<float>() + d * 2 * gh : nullptr;
    a.rb = a.wb != nullptr ? a.wb + gh : nullptr;
    a.rh = rh.raw() != nullptr ? rh.data<float>() : nullptr;
    a.peep = p.raw() != nullptr ? p.data<float>() + d * 3 * hs : nullptr;
    a.lens = lens != nullptr ? lens->data<int32_t>() : nullptr;
    a.h = h_all.data<float>() + d * n.batch * hs;
    a.c = c_all.raw() != nullptr ? c_all.data<float>() + d * n.batch * hs : nullptr;
    a.y = y0.data<float>();
    const float* rd = r.data<float>() + d * gh * hs;
    Gemm2D hg;  // HR = H · R_dᵀ
    hg.tb = true;
    hg.m = n.batch;
    hg.n = gh;
    hg.k = hs;
    hg.lda = hs;
    hg.ldb = hs;
    hg.ldc = gh;
    Gemm2D rg = hg;  // RH = (r ⊙ H) · Rhᵀ, Rh the last hidden rows of R_d
    rg.n = hs;
    rg.ldc = hs;
    for (int64_t s = 0; s < n.seq; ++s) {
      a.s = s;
      TPC_RETURN_IF_ERROR(RunGemm(ctx, FloatKind::kF32, hg, a.h, rd, hr.data<float>()));
      if (a.rh != nullptr) {
        TPC_RETURN_IF_ERROR(
            Check(ctx, LaunchGruReset(cp, a, reset.data<float>(), flag, code, stream)));
        TPC_RETURN_IF_ERROR(RunGemm(ctx, FloatKind::kF32, rg, reset.data<float>(), rd + 2 * hs * hs,
                                    rh.data<float>()));
      }
      TPC_RETURN_IF_ERROR(Check(ctx, LaunchRecurrentStep(cp, a, flag, code, stream)));
    }
  }

  // Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]); Y_h and Y_c
  // [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]).
  const Shape y_shape =
      n.layout1 ? Shape{n.batch, n.seq, n.dirs, hs} : Shape{n.seq, n.dirs, n.batch, hs};
  const Shape y_strides = n.layout1 ? Shape{hs, n.dirs * n.batch * hs, n.batch * hs, 1}
                                    : math::ContiguousStrides(y_shape);
  TPC_RETURN_IF_ERROR(WriteOutput(ctx, 0, y_shape, y_strides, y0.data<float>()));
  const Shape state_strides =
      n.layout1 ? Shape{hs, n.batch * hs, 1} : math::ContiguousStrides(n.state_shape);
  TPC_RETURN_IF_ERROR(WriteOutput(ctx, 1, n.state_shape, state_strides, h_all.data<float>()));
  if (cell == CellKind::kLstm) {
    TPC_RETURN_IF_ERROR(WriteOutput(ctx, 2, n.state_shape, state_strides, c_all.data<float>()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RNN(KernelContext& ctx) { return Recurrent(ctx, CellKind::kRnn); }
absl::Status GRU(KernelContext& ctx) { return Recurrent(ctx, CellKind::kGru); }
absl::Status LSTM(KernelContext& ctx) { return Recurrent(ctx, CellKind::kLstm); }

}  // namespace tpc::runtime::cuda
