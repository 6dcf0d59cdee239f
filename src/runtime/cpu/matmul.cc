// MatMul (numpy batching) and Gemm; f32 and f64 through BLAS (a few rows of f32 against a
// small B through isa_loops.h's SmallGemm), integers by loops.
#include <cblas.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "isa_loops.h"
#include "kernels.h"

namespace tpc::runtime::cpu {

template <typename T>
void Gemm2D(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta·C (BLAS refuses the leading dims of empty operands)
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
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

template <typename T>
void ParallelGemm2D(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                    const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t parts = pool.size();
  // Below ~2^18 multiply-adds (tens of microseconds) a hand-off costs more than it saves.
  const bool big = m * n * k >= (int64_t{1} << 18);
  if (parts > 1 && big && m >= 8 * parts) {
    const int64_t block = (m + parts - 1) / parts;
    pool.ParallelParts(parts, [&](int64_t p) {
      const int64_t r = p * block, rows = std::min(block, m - r);
      if (rows <= 0) return;
      Gemm2D<T>(ta, tb, rows, n, k, alpha, ta ? a + r : a + r * lda, lda, b, ldb, beta, c + r * ldc,
                ldc);
    });
  } else if (parts > 1 && big && n >= 64 * parts) {
    const int64_t block = (n / parts + 15) / 16 * 16;  // whole vectors per block
    pool.ParallelParts(parts, [&](int64_t p) {
      const int64_t col = p * block, cols = std::min(block, n - col);
      if (cols <= 0) return;
      Gemm2D<T>(ta, tb, m, cols, k, alpha, a, lda, tb ? b + col * ldb : b + col, ldb, beta, c + col,
                ldc);
    });
  } else {
    Gemm2D<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

template void ParallelGemm2D<float>(ThreadPool&, bool, bool, int64_t, int64_t, int64_t, float,
                                    const float*, int64_t, const float*, int64_t, float, float*,
                                    int64_t);
template void ParallelGemm2D<double>(ThreadPool&, bool, bool, int64_t, int64_t, int64_t, double,
                                     const double*, int64_t, const double*, int64_t, double,
                                     double*, int64_t);

template void Gemm2D<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                            const float*, int64_t, float, float*, int64_t);
template void Gemm2D<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                             const double*, int64_t, double, double*, int64_t);

absl::StatusOr<MatMulShape> MatMulShapes(const KernelContext& ctx, const Tensor& a,
                                         const Tensor& b) {
  if (a.rank() == 0 || b.rank() == 0) return ctx.Error("operands must have rank >= 1");
  MatMulShape g;
  g.a = a.shape();
  g.b = b.shape();
  const bool vec_a = g.a.size() == 1, vec_b = g.b.size() == 1;
  // A vector operand as a matrix (written as assignments: gcc 12 at -O3 warns falsely
  // on push_back/insert into a vector known to hold one element).
  if (vec_a) g.a = Shape{1, g.a[0]};
  if (vec_b) g.b = Shape{g.b[0], 1};
  g.m = g.a[g.a.size() - 2];
  g.k = g.a.back();
  g.n = g.b.back();
  if (g.b[g.b.size() - 2] != g.k) {
    return ctx.Error(absl::StrCat("inner dims differ: ", a.TypeString(), " x ", b.TypeString()));
  }
  g.batch_a.assign(g.a.begin(), g.a.end() - 2);
  g.batch_b.assign(g.b.begin(), g.b.end() - 2);
  TPC_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(ctx, {g.batch_a, g.batch_b}));
  g.out = g.batch;
  if (!vec_a) g.out.push_back(g.m);
  if (!vec_b) g.out.push_back(g.n);
  return g;
}

namespace {

// HalfWeightGemm's rows through column tiles; more rows convert B once.
constexpr int64_t kHalfTileRows = 64;

// Y = A · B by numpy's batching, A, B and Y contiguous of g's shapes.
template <typename T>
void MatMulBody(ThreadPool& pool, const MatMulShape& g, const T* pa, const T* pb, T* py) {
  const int64_t m = g.m, k = g.k, n = g.n;
  if (NumElements(g.batch_b) == 1 && NumElements(g.batch_a) == NumElements(g.batch)) {
    // B shared by every batch: one GEMM over all rows of A (A is contiguous).
    const int64_t rows = NumElements(g.batch) * m;
    ParallelGemm2D<T>(pool, false, false, rows, n, k, T(1), pa, k, pb, n, T(0), py, n);
    return;
  }
  const int64_t count = NumElements(g.batch);
  if (count < pool.size()) {
    g.ForEachMatrix([&](int64_t i, int64_t oa, int64_t ob) {
      ParallelGemm2D<T>(pool, false, false, m, n, k, T(1), pa + oa, k, pb + ob, n, T(0),
                        py + i * m * n, n);
    });
    return;
  }
  // Many matrices (attention's heads): whole matrices per thread.
  const BroadcastOffsets<2> offsets = g.MatrixOffsets();
  pool.ParallelFor(count, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const auto [oa, ob] = offsets.At(i);
      Gemm2D<T>(false, false, m, n, k, T(1), pa + oa, k, pb + ob, n, T(0), py + i * m * n, n);
    }
  });
}

}  // namespace

void HalfWeightGemm(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* a,
                    const uint16_t* b, bool bf16, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  if (m > kHalfTileRows) {
    // Many rows (a prefill, an encoder): B converted once, in parallel, and the rows
    // shared out among the threads by ParallelGemm2D. Through the tiles, A would be read
    // once per tile (a 4096-row product took 4 s against 0.85 through a whole copy).
    std::unique_ptr<float[]> w(new float[static_cast<size_t>(k * n)]);
    pool.ParallelFor(k, std::max<int64_t>(1, 16384 / n), [&](int64_t lo, int64_t hi) {
      HalfBlockToFloat(b + lo * n, n, hi - lo, n, w.get() + lo * n, n, bf16);
    });
    ParallelGemm2D<float>(pool, false, false, m, n, k, 1.0f, a, k, w.get(), n, 0.0f, c, n);
    return;
  }
  // A few rows (a decode step): tiles of whole 16-column vectors whose f32 copy is about
  // 256 KiB (at least 16 columns), converted into a buffer of the thread's own; B is read
  // as stored, never copied whole. A decode step of a bf16 plan read each weight through
  // a whole f32 copy before: 15x slower than the f32 plan (docs/cuda.md).
  const int64_t tile = std::min<int64_t>(std::max<int64_t>((65536 / k) / 16 * 16, 16), n);
  pool.ParallelFor((n + tile - 1) / tile, 1, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<float[]> w(new float[static_cast<size_t>(k * tile)]);  // not zeroed
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t col = t * tile, cols = std::min(tile, n - col);
      HalfBlockToFloat(b + col, n, k, cols, w.get(), cols, bf16);
      Gemm2D<float>(false, false, m, cols, k, 1.0f, a, k, w.get(), cols, 0.0f, c + col, n);
    }
  });
}

absl::Status HalfMatMul(KernelContext& ctx, const Tensor* bias, Activation act) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype() || !IsHalfType(a.dtype())) return ctx.Error("operand types differ");
  TPC_ASSIGN_OR_RETURN(const MatMulShape g, MatMulShapes(ctx, a, b));
  if (bias != nullptr && (bias->dtype() != a.dtype() || bias->num_elements() != g.n)) {
    return ctx.Error(absl::StrCat("bias ", bias->TypeString(), " is not ", g.n, " values of ",
                                  ir::DTypeName(a.dtype())));
  }
  if (ctx.output_dtype(0) != a.dtype()) {
    return ctx.Error(absl::StrCat("gives ", ir::DTypeName(ctx.output_dtype(0)), " from ",
                                  ir::DTypeName(a.dtype()), " operands"));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, a.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const Tensor a32 = ConvertFloats(a, ir::DType::kF32);
  Tensor y32 = Tensor::Allocate(ir::DType::kF32, g.out);
  const int64_t rows = y->num_elements() / g.n;
  if (b.rank() == 2 && a.rank() >= 2) {
    // A weight: read as stored, a tile at a time.
    HalfWeightGemm(ctx.pool(), rows, g.n, g.k, a32.data<float>(), b.data<uint16_t>(),
                   a.dtype() == ir::DType::kBF16, y32.data<float>());
  } else {
    const Tensor b32 = ConvertFloats(b, ir::DType::kF32);
    MatMulBody<float>(ctx.pool(), g, a32.data<float>(), b32.data<float>(), y32.data<float>());
  }
  if (bias != nullptr || act != Activation::kNone) {
    const Tensor bias32 = bias != nullptr ? ConvertFloats(*bias, ir::DType::kF32) : Tensor();
    const float* pbias = bias != nullptr ? bias32.data<float>() : nullptr;
    float* py = y32.data<float>();
    const int64_t n = g.n;
    ctx.pool().ParallelFor(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t lo, int64_t hi) {
      ActivationRows(act, py + lo * n, hi - lo, n, n, pbias);
    });
  }
  ConvertFloats(y32, *y);
  return absl::OkStatus();
}

absl::Status MatMul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.Error("operand types differ");
  if (IsHalfType(a.dtype())) return HalfMatMul(ctx, nullptr, Activation::kNone);
  TPC_ASSIGN_OR_RETURN(const MatMulShape g, MatMulShapes(ctx, a, b));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, a.dtype()));
  if (b.rank() == 2 && a.rank() >= 2 && a.dtype() == ir::DType::kF32) {
    // A few rows against a small B (under 2^16 multiply-adds): a loop of our own.
    const int64_t rows = g.k > 0 ? a.num_elements() / g.k : 0;
    if (rows > 0 && rows <= 4 && g.n > 0 && rows * g.n * g.k <= (int64_t{1} << 16)) {
      SmallGemm(a.data<float>(), b.data<float>(), y->data<float>(), rows, g.n, g.k);
      return absl::OkStatus();
    }
  }
  if (b.rank() == 2 && a.rank() >= 2) {
    TPC_ASSIGN_OR_RETURN(const bool packed, PackedMatMul(ctx, a, b, y));
    if (packed) return absl::OkStatus();
  }
  return VisitNumeric(ctx, a.dtype(), [&]<typename T>() -> absl::Status {
    MatMulBody<T>(ctx.pool(), g, a.data<T>(), b.data<T>(), y->data<T>());
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
    ParallelGemm2D<T>(ctx.pool(), ta, tb, m, n, k, static_cast<T>(alpha), a.data<T>(), a.dim(1),
                      b.data<T>(), b.dim(1), beta_t, py, n);
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
