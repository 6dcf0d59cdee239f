// The cuBLAS and cuBLASLt calls of tpc's CUDA backend, on the host (see runtime.cc): the
// strided batched GEMM of f32, f16, bf16 and f64 matrices, accumulated in double, with
// cuBLAS's argument checks and its table of type combinations, queued on the handle's
// stream; cuBLASLt's descriptors, and no algorithm for any of them (the backend then takes
// cuBLAS).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

#include "device_work.h"
#include "tpc/util/half.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};
struct cublasLtContext {};

using cuda_host::emulated::CheckOperand;
using cuda_host::emulated::Submit;

namespace {
// A handle or descriptor made, and ended.
template <typename T>
cublasStatus_t Make(T** out) {
  *out = new T{};
  return CUBLAS_STATUS_SUCCESS;
}
template <typename T>
cublasStatus_t Drop(T* p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

extern "C" {

// ---- cuBLAS ----
cublasStatus_t cublasCreate_v2(cublasHandle_t* h) { return Make(h); }
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return Drop(h); }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void* workspace, size_t bytes) {
  cuda_host::emulated::Discard(workspace, bytes);  // never used here
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS         ? "CUBLAS_STATUS_SUCCESS"
         : s == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
                                            : "CUBLAS_STATUS_NOT_SUPPORTED";
}

}  // extern "C"

namespace {

double Load(cudaDataType t, const void* p, int64_t i) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_64F:
      return static_cast<const double*>(p)[i];
    case CUDA_R_16F:
      return tpc::HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      return tpc::BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
}
void Store(cudaDataType t, void* p, int64_t i, double v) {
  switch (t) {
    case CUDA_R_32F:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      return;
    case CUDA_R_64F:
      static_cast<double*>(p)[i] = v;
      return;
    case CUDA_R_16F:
      static_cast<uint16_t*>(p)[i] = tpc::FloatToHalf(static_cast<float>(v));
      return;
    default:
      static_cast<uint16_t*>(p)[i] = tpc::FloatToBFloat16(static_cast<float>(v));
  }
}
size_t ElementBytes(cudaDataType t) { return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2; }
// The type combinations of cublasGemmEx the backend may ask for (cuBLAS's table): A and B
// alike; f32 compute with f32, f16 or bf16 operands and C of theirs or f32; f64 alone.
bool Supported(cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t compute) {
  if (a != b) return false;
  if (compute == CUBLAS_COMPUTE_64F) return a == CUDA_R_64F && c == CUDA_R_64F;
  if (compute != CUBLAS_COMPUTE_32F) return false;
  if (a == CUDA_R_32F) return c == CUDA_R_32F;
  return (a == CUDA_R_16F || a == CUDA_R_16BF) && (c == a || c == CUDA_R_32F);
}
// Elements a strided batch of matrices spans: `count` matrices `stride` apart, each `cols`
// columns of `rows` elements `ld` apart (column-major).
size_t Span(int64_t count, long long stride, int64_t rows, int64_t cols, int64_t ld) {
  if (count == 0 || rows == 0 || cols == 0) return 0;
  return static_cast<size_t>((count - 1) * stride + (cols - 1) * ld + rows);
}

}  // namespace

extern "C" cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType at, int lda, long long sa, const void* b,
    cudaDataType bt, int ldb, long long sb, const void* beta, void* c, cudaDataType ct, int ldc,
    long long sc, int count, cublasComputeType_t compute, cublasGemmAlgo_t) {
  const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
  // cuBLAS's own checks of the arguments.
  if (m < 0 || n < 0 || k < 0 || count < 0 || lda < std::max(1, na ? m : k) ||
      ldb < std::max(1, nb ? k : n) || ldc < std::max(1, m) ||
      (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!Supported(at, bt, ct, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool f64 = compute == CUBLAS_COMPUTE_64F;
  const double al = f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  // alpha == 0 or k == 0: A and B are not read; beta == 0: C is not read (cuBLAS's rules).
  const bool reads_ab = al != 0 && k > 0;
  const char* what = "cublasGemmStridedBatchedEx";
  if (reads_ab) {
    CheckOperand(what, "A", a, Span(count, sa, na ? m : k, na ? k : m, lda) * ElementBytes(at),
                 true);
    CheckOperand(what, "B", b, Span(count, sb, nb ? k : n, nb ? n : k, ldb) * ElementBytes(bt),
                 true);
  }
  CheckOperand(what, "C", c, Span(count, sc, m, n, ldc) * ElementBytes(ct), true);
  Submit(
      h->stream,
      [=] {
        for (int64_t e = 0; e < count; ++e) {
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t i = 0; i < m; ++i) {
              double s = 0;
              for (int64_t p = 0; reads_ab && p < k; ++p) {
                s += Load(at, a, e * sa + (na ? i + p * lda : p + i * lda)) *
                     Load(bt, b, e * sb + (nb ? p + j * ldb : j + p * ldb));
              }
              const int64_t at_c = e * sc + i + j * ldc;
              // beta == 0: C is not read (it may hold NaN), as in cuBLAS.
              Store(ct, c, at_c, al * s + (be != 0 ? be * Load(ct, c, at_c) : 0.0));
            }
          }
        }
      },
      "cublasGemmStridedBatchedEx");
  return CUBLAS_STATUS_SUCCESS;
}

// ---- cuBLASLt: descriptors, and no algorithm for any of them ----
extern "C" {
cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { return Make(h); }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { return Drop(h); }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t,
                                        cudaDataType_t) {
  return Make(d);
}
cublasStatus_t cublasLtMatmulDescDestroy(const cublasLtMatmulDesc_t d) { return Drop(d); }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                              const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType, uint64_t,
                                          uint64_t, int64_t) {
  return Make(l);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t l) { return Drop(l); }
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t,
                                                cublasLtMatrixLayoutAttribute_t, const void*,
                                                size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) { return Make(p); }
cublasStatus_t cublasLtMatmulPreferenceDestroy(const cublasLtMatmulPreference_t p) {
  return Drop(p);
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int,
                                              cublasLtMatmulHeuristicResult_t[], int* returned) {
  *returned = 0;
  return CUBLAS_STATUS_NOT_SUPPORTED;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                              cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t,
                              const void*, const void*, cublasLtMatrixLayout_t, void*,
                              cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t) {
  return CUBLAS_STATUS_NOT_SUPPORTED;
}
}  // extern "C"
