// FusedMatMul's GEMM with its bias and (tanh) GELU in cuBLASLt's epilogue (one pass over
// Y instead of the GEMM's and the epilogue kernel's). Row-major Y = A·B is column-major
// Yᵀ [n, m] = Bᵀ [n, k] · Aᵀ [k, m], as in matmul_ops.cc: B goes first, and the bias,
// one value per row of the column-major D, is one per column of Y.
#include <cublasLt.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// The largest power of two (up to 256) dividing the address: the alignment cuBLASLt's
// heuristic is told, so that it picks no algorithm that needs more.
uint32_t Alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

}  // namespace

bool CublasLtWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("TPC_CUBLASLT");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return wanted;
}

absl::StatusOr<bool> RunGemmEpilogue(const KernelContext& ctx, FloatKind kind, const Gemm2D& g,
                                     const void* a, const void* b, void* c, const void* bias,
                                     UnaryOp act) {
  // Not ReLU: cuBLASLt's may be max(x, 0), which drops a NaN the project's ReLU keeps.
  // (A bias vector not 16-byte aligned is left to the epilogue kernel too.)
  const bool gelu = act == UnaryOp::kGeluTanh;
  if ((act != UnaryOp::kIdentity && !gelu) || g.ta || g.tb || g.count != 1 ||
      (bias != nullptr && Alignment(bias) < 16) || g.m <= 0 || g.n <= 0 || g.k <= 0 ||
      g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX) {
    return false;
  }
  if (bias == nullptr && !gelu) return false;  // nothing to fuse: RunGemm
  const cublasLtEpilogue_t epilogue =
      bias == nullptr ? CUBLASLT_EPILOGUE_GELU
                      : (gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS);
  CudaBackend& backend = BackendOf(ctx);
  const cudaDataType_t t = CudaType(kind);
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lw = nullptr, lx = nullptr, ly = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  absl::Cleanup release = [&] {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (ly != nullptr) cublasLtMatrixLayoutDestroy(ly);
    if (lx != nullptr) cublasLtMatrixLayoutDestroy(lx);
    if (lw != nullptr) cublasLtMatrixLayoutDestroy(lw);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  };
  // Any failure to describe the call: not for cuBLASLt, RunGemm instead.
  const auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  const uint64_t workspace = backend.gemm_workspace_bytes();
  // cuBLASLt's A is W (our b), its B is X (our a), C and D are Y.
  const uint32_t align_w = Alignment(b), align_x = Alignment(a), align_y = Alignment(c);
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  if (!ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      !ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue))) ||
      (bias != nullptr && !ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                             &bias, sizeof(bias)))) ||
      !ok(cublasLtMatrixLayoutCreate(&lw, t, n, k, g.ldb)) ||  // B [k, n] row-major
      !ok(cublasLtMatrixLayoutCreate(&lx, t, k, m, g.lda)) ||  // A [m, k] row-major
      !ok(cublasLtMatrixLayoutCreate(&ly, t, n, m, g.ldc)) ||  // Y [m, n] row-major
      !ok(cublasLtMatmulPreferenceCreate(&pref)) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace, sizeof(workspace))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                               &align_w, sizeof(align_w))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                               &align_x, sizeof(align_x))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                               &align_y, sizeof(align_y))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                               &align_y, sizeof(align_y)))) {
    return false;
  }
  cublasLtMatmulHeuristicResult_t found = {};
  int count = 0;
  if (!ok(cublasLtMatmulAlgoGetHeuristic(backend.cublaslt(), op, lw, lx, ly, ly, pref, 1, &found,
                                         &count)) ||
      count == 0) {
    return false;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s =
      cublasLtMatmul(backend.cublaslt(), op, &alpha, b, lw, a, lx, &beta, c, ly, c, ly, &found.algo,
                     backend.gemm_workspace(), workspace, backend.stream());
  // Refused before anything ran: the cuBLAS GEMM and the epilogue kernel instead.
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE) return false;
  if (!ok(s)) {
    return absl::InternalError(
        absl::StrCat(ctx.node().Describe(), ": cuBLASLt failed: ", cublasGetStatusString(s)));
  }
  return true;
}

}  // namespace tpc::runtime::cuda
