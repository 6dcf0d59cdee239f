// The float GEMMs through cuBLASLt (RunLtGemm), with FusedMatMul's bias and (tanh) GELU in
// its epilogue: one pass over Y instead of the GEMM's and the epilogue kernel's. The
// column-major description is math::ColumnMajor's, the one the cuBLAS calls use (our B
// goes first; the bias, one value per row of the column-major D, is one per column of Y).
//
// Describing a call (a descriptor, three layouts, a preference) and asking the heuristic
// for an algorithm costs tens of µs of host time, more than a small GEMM's kernel: they
// are made once per problem (shapes, strides, types, epilogue, the operands' alignments)
// and kept in the backend's LtPlans, as is a problem cuBLASLt has no algorithm for.
#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "ops.h"
#include "tpc/util/status_macros.h"

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

bool Ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

// Everything a plan depends on: the column-major problem (4 values), the element types
// and the epilogue (3), each matrix's layout (3 × 5) and the alignments of A, B, C/D and
// the bias (4).
constexpr size_t kKeySize = 4 + 3 + 3 * 5 + 4;
using LtKey = std::array<int64_t, kKeySize>;

LtKey KeyOf(const math::ColumnMajorGemm& p, FloatKind kind, FloatKind out,
            cublasLtEpilogue_t epilogue, const std::array<uint32_t, 4>& align) {
  LtKey key{};
  size_t i = 0;
  for (int64_t v : {p.m, p.n, p.k, p.count, static_cast<int64_t>(kind), static_cast<int64_t>(out),
                    static_cast<int64_t>(epilogue)}) {
    key[i++] = v;
  }
  for (const math::ColumnMajorMatrix* x : {&p.a, &p.b, &p.c}) {
    for (int64_t v : {x->rows, x->cols, x->ld, x->stride, int64_t{x->transposed}}) key[i++] = v;
  }
  for (uint32_t a : align) key[i++] = a;
  TPC_CHECK(i == key.size());
  return key;
}

}  // namespace

// One problem's descriptors and algorithm; `usable` false when cuBLASLt has none (or
// refused it), and the cuBLAS GEMM runs instead.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  bool usable = false;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (lc != nullptr) cublasLtMatrixLayoutDestroy(lc);
    if (lb != nullptr) cublasLtMatrixLayoutDestroy(lb);
    if (la != nullptr) cublasLtMatrixLayoutDestroy(la);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

class LtPlans {
 public:
  // At most this many problems are kept (a generation's growing attention shapes make a
  // new one each step); past it the plans start over.
  static constexpr size_t kMaxPlans = 1024;

  // A backend is driven by one thread (its rank's); the lock keeps a plan's bias pointer,
  // set just before its call, to that call should that ever change.
  std::mutex mu;
  absl::flat_hash_map<LtKey, std::unique_ptr<LtPlan>, absl::Hash<LtKey>> plans;
};

namespace {

// The plan of `p` (usable or not); the layouts' batch attributes where count > 1.
// The heuristic reads the bias pointer (its alignment): `bias` is set before it.
std::unique_ptr<LtPlan> MakePlan(CudaBackend& backend, const math::ColumnMajorGemm& p,
                                 FloatKind kind, FloatKind out, cublasLtEpilogue_t epilogue,
                                 const void* bias, const std::array<uint32_t, 4>& align) {
  auto plan = std::make_unique<LtPlan>();
  const cudaDataType_t t = CudaType(kind), to = CudaType(out);
  const cublasOperation_t ta = p.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = p.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto layout = [&](cublasLtMatrixLayout_t* l, cudaDataType_t type,
                          const math::ColumnMajorMatrix& x) {
    if (!Ok(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(x.rows),
                                       static_cast<uint64_t>(x.cols), x.ld))) {
      return false;
    }
    if (p.count == 1) return true;
    const auto count = static_cast<int32_t>(p.count);
    return Ok(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                               sizeof(count))) &&
           Ok(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &x.stride, sizeof(x.stride)));
  };
  if (!Ok(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      !Ok(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta))) ||
      !Ok(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb))) ||
      !Ok(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue))) ||
      (bias != nullptr && !Ok(cublasLtMatmulDescSetAttribute(
                              plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)))) ||
      !layout(&plan->la, t, p.a) || !layout(&plan->lb, t, p.b) || !layout(&plan->lc, to, p.c)) {
    return plan;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if (!Ok(cublasLtMatmulPreferenceCreate(&pref))) return plan;
  const uint64_t workspace = backend.gemm_workspace_bytes();
  // cuBLASLt's A, B, C and D; D is C.
  const cublasLtMatmulPreferenceAttributes_t aligned[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  bool described = Ok(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  for (int i = 0; i < 4 && described; ++i) {
    const uint32_t bytes = align[i < 3 ? i : 2];
    described = Ok(cublasLtMatmulPreferenceSetAttribute(pref, aligned[i], &bytes, sizeof(bytes)));
  }
  cublasLtMatmulHeuristicResult_t found = {};
  int count = 0;
  if (described &&
      Ok(cublasLtMatmulAlgoGetHeuristic(backend.cublaslt(), plan->op, plan->la, plan->lb, plan->lc,
                                        plan->lc, pref, 1, &found, &count)) &&
      count > 0) {
    plan->algo = found.algo;
    plan->usable = true;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return plan;
}

}  // namespace

bool CublasLtWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("TPC_CUBLASLT");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return wanted;
}

absl::StatusOr<bool> RunLtGemm(const KernelContext& ctx, FloatKind kind, FloatKind out,
                               const Gemm2D& g, const void* a, const void* b, void* c,
                               const void* bias, UnaryOp act) {
  // Not ReLU: cuBLASLt's may be max(x, 0), which drops a NaN the project's ReLU keeps.
  const bool gelu = act == UnaryOp::kGeluTanh;
  if (act != UnaryOp::kIdentity && !gelu) return false;
  const bool epilogue_wanted = bias != nullptr || gelu;
  const int64_t limit = INT32_MAX;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.count <= 0 || g.m > limit || g.n > limit ||
      g.k > limit || g.count > limit) {
    return false;  // nothing to multiply (k = 0: C = beta·C) or over 32 bits: cuBLAS's
  }
  // A matrix shared by a batch (stride 0) is cuBLAS's, which documents it. An epilogue
  // takes one product (its bias has no batch stride here), of the operands' type, with
  // a 16-byte aligned bias.
  if (g.count > 1 && (g.stride_a == 0 || g.stride_b == 0 || g.stride_c == 0)) return false;
  if (epilogue_wanted &&
      (g.count != 1 || out != kind || (bias != nullptr && Alignment(bias) < 16))) {
    return false;
  }
  const cublasLtEpilogue_t epilogue =
      !epilogue_wanted
          ? CUBLASLT_EPILOGUE_DEFAULT
          : (bias == nullptr ? CUBLASLT_EPILOGUE_GELU
                             : (gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS));
  CudaBackend& backend = BackendOf(ctx);
  const math::ColumnMajorGemm p = math::ColumnMajor(g);
  // cuBLASLt's A is our B, its B our A, C and D are Y.
  const std::array<uint32_t, 4> align = {Alignment(b), Alignment(a), Alignment(c),
                                         bias != nullptr ? Alignment(bias) : 256u};
  const LtKey key = KeyOf(p, kind, out, epilogue, align);
  std::shared_ptr<LtPlans>& plans = backend.lt_plans();
  if (plans == nullptr) plans = std::make_shared<LtPlans>();
  std::lock_guard<std::mutex> lock(plans->mu);
  auto it = plans->plans.find(key);
  if (it == plans->plans.end()) {
    if (plans->plans.size() >= LtPlans::kMaxPlans) plans->plans.clear();
    it = plans->plans.emplace(key, MakePlan(backend, p, kind, out, epilogue, bias, align)).first;
  }
  LtPlan& plan = *it->second;
  if (!plan.usable) return false;
  if (bias != nullptr && !Ok(cublasLtMatmulDescSetAttribute(
                             plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)))) {
    return false;
  }
  const cublasStatus_t s =
      cublasLtMatmul(backend.cublaslt(), plan.op, &g.alpha, b, plan.la, a, plan.lb, &g.beta, c,
                     plan.lc, c, plan.lc, &plan.algo, backend.gemm_workspace(),
                     backend.gemm_workspace_bytes(), backend.stream());
  // Refused before anything ran: not asked again, the cuBLAS GEMM (and the epilogue
  // kernel) instead.
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ||
      s == CUBLAS_STATUS_ARCH_MISMATCH) {
    plan.usable = false;
    return false;
  }
  if (!Ok(s)) {
    return absl::InternalError(
        absl::StrCat(ctx.node().Describe(), ": cuBLASLt failed: ", cublasGetStatusString(s)));
  }
  return true;
}

}  // namespace tpc::runtime::cuda
