// The GEMMs' index arithmetic, shared by the CUDA backend's cuBLAS and cuBLASLt calls
// (cuda/matmul_ops.cc, cuda/lt_gemm.cc) and tested on the host against a row-major
// product (tests/runtime/device_gemm_math_test.cc):
// - Gemm2D, one row-major product (batched by strides) as the kernels describe it;
// - ColumnMajor, the same product as the column-major libraries are told it: row-major
//   Y = op(A)·op(B) is column-major Yᵀ = op(B)ᵀ·op(A)ᵀ, so the library's first operand is
//   our B and its second our A, each stored matrix read as its transpose;
// - PlanMatMulGemm, how MatMul with batch dims becomes one such product.
#pragma once

#include <cstdint>

namespace tpc::runtime::math {

// Y[m, n] = alpha·op(A)·op(B) + beta·Y, row-major, `count` times with the given element
// strides between matrices; op(A) is A [m, k] (lda ≥ k), or Aᵀ of a stored [k, m]
// (`ta`, lda ≥ m); op(B) is B [k, n] (ldb ≥ n), or Bᵀ of a stored [n, k] (`tb`).
struct Gemm2D {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t count = 1;
  float alpha = 1.0f, beta = 0.0f;
};

// A stored matrix as a column-major library reads it: `rows` × `cols` with leading
// dimension `ld` (the element step between columns), `stride` elements between the
// matrices of a batch, and whether the product takes its transpose (CUBLAS_OP_T).
struct ColumnMajorMatrix {
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  bool transposed = false;
};

// D [m, n] = op(A) [m, k] · op(B) [k, n], column-major, `count` times: what cublasGemm*
// and cublasLtMatmul are given (A, B, C/D their operands in their order).
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0, count = 1;
  ColumnMajorMatrix a, b, c;
};

// `g` as a column-major product. Leading dims are at least 1 (the libraries refuse 0
// even where k = 0 leaves the operand unread).
inline ColumnMajorGemm ColumnMajor(const Gemm2D& g) {
  const auto at_least_1 = [](int64_t v) { return v < 1 ? int64_t{1} : v; };
  ColumnMajorGemm c;
  c.m = g.n;  // Yᵀ is [n, m]
  c.n = g.m;
  c.k = g.k;
  c.count = g.count;
  // Its A is op(B)ᵀ [n, k]: B [k, n] row-major is [n, k] column-major as stored; a
  // transposed B, stored [n, k] row-major, is [k, n] column-major and read transposed.
  c.a = {g.tb ? g.k : g.n, g.tb ? g.n : g.k, at_least_1(g.ldb), g.stride_b, g.tb};
  // Its B is op(A)ᵀ [k, m] likewise.
  c.b = {g.ta ? g.m : g.k, g.ta ? g.k : g.m, at_least_1(g.lda), g.stride_a, g.ta};
  c.c = {g.n, g.m, at_least_1(g.ldc), g.stride_c, false};
  return c;
}

// How a MatMul of A [batch_a.., m, k] by B [batch_b.., k, n] into Y [batch.., m, n] (the
// batch dims broadcast, `na`, `nb`, `nbatch` matrices) runs as GEMMs: one product over
// every row of A when B is one matrix for all (`g.m` = nbatch · m); one strided batch
// when each operand is a full batch laid out as Y's or one matrix for all (stride 0);
// else (`per_matrix`) one product `g` per output matrix at the operands' offsets.
struct MatMulGemm {
  Gemm2D g;
  bool per_matrix = false;
};

inline MatMulGemm PlanMatMulGemm(int64_t m, int64_t k, int64_t n, int64_t na, int64_t nb,
                                 int64_t nbatch) {
  MatMulGemm p;
  p.g.m = m;
  p.g.n = n;
  p.g.k = k;
  p.g.lda = k;
  p.g.ldb = n;
  p.g.ldc = n;
  p.g.stride_c = m * n;
  if (nb == 1 && na == nbatch) {
    p.g.m = nbatch * m;
  } else if ((na == 1 || na == nbatch) && (nb == 1 || nb == nbatch)) {
    p.g.stride_a = na == 1 ? 0 : m * k;
    p.g.stride_b = nb == 1 ? 0 : k * n;
    p.g.count = nbatch;
  } else {
    p.per_matrix = true;
  }
  return p;
}

}  // namespace tpc::runtime::math
