// MatMul (numpy batching) and Gemm; f32 and f64 through BLAS, integers by loops.
#include <cblas.h>

#include <algorithm>

#include "kernels.h"

namespace tpc::runtime::cpu {

template <typename T>
void Gemm2D(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
        }
        c[i * ldc + j] =
            static_cast<T>(alpha * acc + (beta == T(0) ? T(0) : beta * c[i * ldc + j]));
      }
    }
  }
}

template void Gemm2D<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                            const float*, int64_t, float, float*, int64_t);
template void Gemm2D<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                             const double*, int64_t, double, double*, int64_t);

absl::Status MatMul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.Error("operand types differ");
  if (a.rank() == 0 || b.rank() == 0) return ctx.Error("MatMul operands must have rank >= 1");
  Shape sa = a.shape(), sb = b.shape();
  const bool vec_a = sa.size() == 1, vec_b = sb.size() == 1;
  if (vec_a) sa.insert(sa.begin(), 1);
  if (vec_b) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k) {
    return ctx.Error(absl::StrCat("inner dims differ: ", a.TypeString(), " x ", b.TypeString()));
  }
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  TPC_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(ctx, {batch_a, batch_b}));
  Shape out = batch;
  if (!vec_a) out.push_back(m);
  if (!vec_b) out.push_back(n);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, a.dtype()));
  return VisitNumeric(ctx, a.dtype(), [&]<typename T>() -> absl::Status {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y->data<T>();
    if (NumElements(batch_b) == 1) {
      // B shared by every batch: one GEMM over all rows of A (A is contiguous).
      const int64_t rows = NumElements(batch) * m;
      if (NumElements(batch_a) == NumElements(batch)) {
        Gemm2D<T>(false, false, rows, n, k, T(1), pa, k, pb, n, T(0), py, n);
        return absl::OkStatus();
      }
    }
    const int64_t nb = NumElements(batch);
    Shape sa_b = BroadcastStrides(batch_a, batch), sb_b = BroadcastStrides(batch_b, batch);
    Shape bs = Strides(batch);
    for (int64_t i = 0; i < nb; ++i) {
      int64_t oa = 0, ob = 0, rem = i;
      for (size_t d = 0; d < batch.size(); ++d) {
        const int64_t idx = rem / bs[d];
        rem %= bs[d];
        oa += idx * sa_b[d];
        ob += idx * sb_b[d];
      }
      Gemm2D<T>(false, false, m, n, k, T(1), pa + oa * m * k, k, pb + ob * k * n, n, T(0),
                py + i * m * n, n);
    }
    return absl::OkStatus();
  });
}

absl::Status Gemm(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.optional_input(2);
  if (a.rank() != 2 || b.rank() != 2) return ctx.Error("Gemm operands must be matrices");
  const bool ta = ctx.node().attr_int("transA", 0) != 0;
  const bool tb = ctx.node().attr_int("transB", 0) != 0;
  const double alpha = ctx.node().attr_float("alpha", 1.0f);
  const double beta = ctx.node().attr_float("beta", 1.0f);
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  if ((tb ? b.dim(1) : b.dim(0)) != k) {
    return ctx.Error(absl::StrCat("inner dims differ: ", a.TypeString(), " x ", b.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {m, n}, a.dtype()));
  return VisitNumeric(ctx, a.dtype(), [&]<typename T>() -> absl::Status {
    T* py = y->data<T>();
    T beta_t = T(0);
    if (c != nullptr && beta != 0) {
      TPC_ASSIGN_OR_RETURN(Shape s, BroadcastShapes(ctx, {c->shape(), {m, n}}));
      if (s != Shape{m, n}) return ctx.Error("C does not broadcast to [M, N]");
      ForEachBroadcast<1>(ctx.pool(), {m, n}, {c->shape()},
                          [&](int64_t i, const std::array<int64_t, 1>& o) {
                            py[i] = static_cast<T>(beta * c->data<T>()[o[0]]);
                          });
      beta_t = T(1);
    }
    Gemm2D<T>(ta, tb, m, n, k, static_cast<T>(alpha), a.data<T>(), a.dim(1), b.data<T>(), b.dim(1),
              beta_t, py, n);
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
