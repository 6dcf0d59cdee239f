// GEMMs on the GPU through cuBLAS (f32, f16, bf16 storage; f32 accumulation; no TF32):
// MatMul with batch dims and broadcasting, Gemm with transposes and a bias C; and the
// f64 GEMMs of the integer products (exact for 8- and 16-bit operands). Det, the other
// matrix operator, by one thread per matrix.
// Row-major Y = A·B is column-major Yᵀ = Bᵀ·Aᵀ: every call passes B first.
#include <algorithm>
#include <functional>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {

cudaDataType_t CudaType(FloatKind k) {
  switch (k) {
    case FloatKind::kF16:
      return CUDA_R_16F;
    case FloatKind::kBF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

namespace {

cublasOperation_t Op(const math::ColumnMajorMatrix& x) {
  return x.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
}

absl::Status CheckBlas(const KernelContext& ctx, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(ctx.node().Describe(), ": cuBLAS failed: ", cublasGetStatusString(s)));
}

}  // namespace

absl::Status RunGemm(const KernelContext& ctx, FloatKind kind, FloatKind out, const Gemm2D& g,
                     const void* a, const void* b, void* c) {
  const int64_t limit = 2147483647LL;
  if (g.m > limit || g.n > limit || g.k > limit || g.count > limit) {
    return ctx.Error("a GEMM dim is over cuBLAS's 32-bit limit");
  }
  if (g.m == 0 || g.n == 0 || g.count == 0) return absl::OkStatus();  // nothing to write
  if (CublasLtWanted()) {
    TPC_ASSIGN_OR_RETURN(const bool done,
                         RunLtGemm(ctx, kind, out, g, a, b, c, nullptr, UnaryOp::kIdentity));
    if (done) return absl::OkStatus();
  }
  // With k = 0 (C = beta·C) A and B are not read (ColumnMajor's leading dims are still
  // at least 1, as cuBLAS wants).
  const math::ColumnMajorGemm p = math::ColumnMajor(g);
  const cudaDataType_t t = CudaType(kind);
  return CheckBlas(
      ctx,
      cublasGemmStridedBatchedEx(
          BackendOf(ctx).cublas(), Op(p.a), Op(p.b), static_cast<int>(p.m), static_cast<int>(p.n),
          static_cast<int>(p.k), &g.alpha, b, t, static_cast<int>(p.a.ld), p.a.stride, a, t,
          static_cast<int>(p.b.ld), p.b.stride, &g.beta, c, CudaType(out), static_cast<int>(p.c.ld),
          p.c.stride, static_cast<int>(p.count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

absl::Status RunGemm(const KernelContext& ctx, FloatKind kind, const Gemm2D& g, const void* a,
                     const void* b, void* c) {
  return RunGemm(ctx, kind, kind, g, a, b, c);
}

absl::Status RunGemmF64(const KernelContext& ctx, const Gemm2D& g, const double* a, const double* b,
                        double* c) {
  const int64_t limit = 2147483647LL;
  if (g.m > limit || g.n > limit || g.k > limit || g.count > limit) {
    return ctx.Error("a GEMM dim is over cuBLAS's 32-bit limit");
  }
  if (g.m == 0 || g.n == 0 || g.count == 0) return absl::OkStatus();
  const math::ColumnMajorGemm p = math::ColumnMajor(g);
  const double alpha = g.alpha, beta = g.beta;
  return CheckBlas(
      ctx, cublasGemmStridedBatchedEx(
               BackendOf(ctx).cublas(), Op(p.a), Op(p.b), static_cast<int>(p.m),
               static_cast<int>(p.n), static_cast<int>(p.k), &alpha, b, CUDA_R_64F,
               static_cast<int>(p.a.ld), p.a.stride, a, CUDA_R_64F, static_cast<int>(p.b.ld),
               p.b.stride, &beta, c, CUDA_R_64F, static_cast<int>(p.c.ld), p.c.stride,
               static_cast<int>(p.count), CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
}

absl::Status RunMatMul(
    const cpu::MatMulShape& g, size_t bytes, const void* a, const void* b, void* y,
    const std::function<absl::Status(const Gemm2D&, const void*, const void*, void*)>& gemm) {
  const math::MatMulGemm plan =
      math::PlanMatMulGemm(g.m, g.k, g.n, cpu::NumElements(g.batch_a), cpu::NumElements(g.batch_b),
                           cpu::NumElements(g.batch));
  const Gemm2D& gm = plan.g;
  if (!plan.per_matrix) return gemm(gm, a, b, y);
  // General broadcasting of the batch dims: one GEMM per output matrix.
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  auto* py = static_cast<char*>(y);
  absl::Status status;
  g.ForEachMatrix([&](int64_t i, int64_t oa, int64_t ob) {
    if (!status.ok()) return;
    status = gemm(gm, pa + static_cast<size_t>(oa) * bytes, pb + static_cast<size_t>(ob) * bytes,
                  py + static_cast<size_t>(i * g.m * g.n) * bytes);
  });
  return status;
}

absl::Status MatMul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.Error("operand types differ");
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, a.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::MatMulShape g, cpu::MatMulShapes(ctx, a, b));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, a.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  if (g.k == 0) {
    return Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx)));
  }
  return RunMatMul(g, static_cast<size_t>(ir::DTypeSize(a.dtype())), a.raw(), b.raw(), y->raw(),
                   [&](const Gemm2D& gm, const void* pa, const void* pb, void* py) {
                     return RunGemm(ctx, kind, gm, pa, pb, py);
                   });
}

absl::Status Gemm(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.optional_input(2);
  if (a.rank() != 2 || b.rank() != 2) return ctx.Error("Gemm operands must be matrices");
  if (a.dtype() != b.dtype() || (c != nullptr && c->dtype() != a.dtype())) {
    return ctx.Error("operand types differ");
  }
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, a.dtype()));
  Gemm2D g;
  g.ta = ctx.node().attr_int("transA", 0) != 0;
  g.tb = ctx.node().attr_int("transB", 0) != 0;
  g.alpha = ctx.node().attr_float("alpha", 1.0f);
  const float beta = ctx.node().attr_float("beta", 1.0f);
  g.m = g.ta ? a.dim(1) : a.dim(0);
  g.k = g.ta ? a.dim(0) : a.dim(1);
  g.n = g.tb ? b.dim(0) : b.dim(1);
  if ((g.tb ? b.dim(1) : b.dim(0)) != g.k) {
    return ctx.Error(absl::StrCat("inner dims differ: ", a.TypeString(), " x ", b.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {g.m, g.n}, a.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  if (c != nullptr && beta != 0.0f) {
    // Y = broadcast C, then the GEMM adds alpha·op(A)·op(B) to beta·Y.
    TPC_ASSIGN_OR_RETURN(Shape s, cpu::BroadcastShapes(ctx, {c->shape(), {g.m, g.n}}));
    if (s != Shape{g.m, g.n}) return ctx.Error("C does not broadcast to [M, N]");
    const StridedView vc = math::BroadcastView(c->shape(), {g.m, g.n});
    const StridedView vy = math::ContiguousView({g.m, g.n});
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchCopy(ir::DTypeSize(a.dtype()), c->raw(), vc, y->raw(), vy,
                                              y->num_elements(), StreamOf(ctx))));
    g.beta = beta;
  }
  if (g.k == 0) {
    if (g.beta == 0.0f) return Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx)));
    return ctx.Error("Gemm with K = 0 and a bias C scaled by beta is not supported on CUDA");
  }
  g.lda = a.dim(1);
  g.ldb = b.dim(1);
  g.ldc = g.n;
  return RunGemm(ctx, kind, g, a.raw(), b.raw(), y->raw());
}

// onnxruntime's GatherBlockQuantized (the builder's tied int4 embedding): the gathered
// rows dequantized by one launch; an index out of range fails the run at its end, naming
// this node, as the CPU kernel fails at once.
absl::Status GatherBlockQuantized(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::NBitsLayout l, cpu::ReadBlockGather(ctx));
  const Tensor& indices = ctx.input(1);
  const Tensor& scales = ctx.input(2);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, scales.dtype()));
  const Tensor* zp = ctx.optional_input(3);
  Shape out = indices.shape();
  out.push_back(l.k);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, scales.dtype()));
  const int code = BackendOf(ctx).Expect(
      std::string(ctx.Error(absl::StrCat("an index is out of range for the table's ", l.n, " rows"))
                      .message()));
  return Check(ctx,
               LaunchNBitsGatherRows(kind, l, ctx.input(0).data<uint8_t>(), indices.raw(),
                                     indices.dtype() == ir::DType::kI64, indices.num_elements(),
                                     scales.raw(), zp != nullptr ? zp->data<uint8_t>() : nullptr,
                                     y->raw(), BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

// onnxruntime's MatMulNBits (at accuracy_level 4 A first rounded to int8 per block, as on
// the CPU): for up to kGemvRows rows (a decode step) one GEMV reading the
// codes once; otherwise the weight dequantized into device scratch [N, K], then
// Y = A · Wᵀ (+ bias) by cuBLAS.
absl::Status MatMulNBits(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::NBitsLayout l, cpu::NBitsInputs(ctx));
  const Tensor& a = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, a.dtype()));
  const Tensor* zp = ctx.optional_input(3);
  const bool packed = zp != nullptr && zp->dtype() == ir::DType::kU8;
  const int64_t rows = a.num_elements() / l.k;
  // accuracy_level 4: A rounded to int8 per block first (as the CPU kernel: onnxruntime's).
  const void* pa = a.raw();
  Tensor rounded;
  if (math::NBitsInt8Activations(l, ctx.node().attr_int("accuracy_level", 0),
                                 zp != nullptr && !packed)) {
    TPC_ASSIGN_OR_RETURN(rounded, Scratch(ctx, a.dtype(), a.shape()));
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchInt8RoundRows(kind, rows, l.k, l.block_size, a.raw(),
                                                       rounded.raw(), StreamOf(ctx))));
    pa = rounded.raw();
  }
  if (rows <= kGemvRows) {
    Shape out = a.shape();
    out.back() = l.n;
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, a.dtype()));
    const Tensor* bias = ctx.optional_input(5);
    return Check(
        ctx, LaunchNBitsGemv(kind, rows, l, pa, ctx.input(1).data<uint8_t>(), ctx.input(2).raw(),
                             packed ? zp->data<uint8_t>() : nullptr,
                             zp != nullptr && !packed ? zp->raw() : nullptr,
                             bias != nullptr ? bias->raw() : nullptr, y->raw(), StreamOf(ctx)));
  }
  TPC_ASSIGN_OR_RETURN(Tensor w, Scratch(ctx, a.dtype(), {l.n, l.k}));
  TPC_RETURN_IF_ERROR(Check(
      ctx,
      LaunchDequantNBits(kind, l, ctx.input(1).data<uint8_t>(), ctx.input(2).raw(),
                         packed ? zp->data<uint8_t>() : nullptr,
                         zp != nullptr && !packed ? zp->raw() : nullptr, w.raw(), StreamOf(ctx))));
  Shape out = a.shape();
  out.back() = l.n;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, a.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  Gemm2D g;
  g.tb = true;  // W is [N, K]
  g.m = a.num_elements() / l.k;
  g.n = l.n;
  g.k = l.k;
  g.lda = l.k;
  g.ldb = l.k;
  g.ldc = l.n;
  TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, g, pa, w.raw(), y->raw()));
  if (const Tensor* bias = ctx.optional_input(5)) {
    StridedView vy = math::ContiguousView(out), vb = math::BroadcastView({l.n}, out), vo = vy;
    math::Simplify({&vy, &vb, &vo});
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(kind, BinaryOp::kAdd, y->raw(), vy, bias->raw(), vb,
                                                y->raw(), y->num_elements(), StreamOf(ctx))));
  }
  return absl::OkStatus();
}

// Det: each matrix of [..., M, M] eliminated by its own thread in f64 scratch (det.cu).
absl::Status Det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
    return ctx.Error(absl::StrCat("x must be [..., M, M], got ", x.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, x.dtype()));
  const int64_t m = x.dim(x.rank() - 1);
  const Shape batch(x.shape().begin(), x.shape().end() - 2);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, batch, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  TPC_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, ir::DType::kF64, x.shape()));
  return Check(ctx, LaunchDet(kind, x.raw(), scratch.data<double>(), m, y->raw(), y->num_elements(),
                              StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
