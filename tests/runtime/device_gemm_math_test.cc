// The GEMMs' index arithmetic (math/gemm.h) on the host: a row-major product described
// as a Gemm2D, told to a column-major library by ColumnMajor (what the cuBLAS and cuBLASLt
// calls pass), computed here as that library defines its operands (column-major stored
// matrices, op(X) = X or Xᵀ, leading dims, batch strides), must equal the row-major
// product computed from its own definition; and MatMul's batches planned by
// PlanMatMulGemm, run that way, must equal a broadcast product computed element by element.
#include <cstdint>
#include <random>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/math/gemm.h"

namespace tpc::runtime {
namespace {

using math::ColumnMajorGemm;
using math::ColumnMajorMatrix;
using math::Gemm2D;

std::vector<double> Values(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(g);
  return v;
}

// Element (r, c) of op(X) of batch entry `e`, X stored column-major as the library reads
// it, checked against the buffer's bounds and the library's rule ld ≥ rows.
double At(const ColumnMajorMatrix& x, const std::vector<double>& buf, int64_t e, int64_t r,
          int64_t c) {
  REQUIRE(x.ld >= x.rows);
  const int64_t row = x.transposed ? c : r, col = x.transposed ? r : c;
  REQUIRE(row < x.rows);
  REQUIRE(col < x.cols);
  const int64_t i = e * x.stride + col * x.ld + row;
  REQUIRE(i >= 0);
  REQUIRE(i < static_cast<int64_t>(buf.size()));
  return buf[static_cast<size_t>(i)];
}

// D = alpha·op(A)·op(B) + beta·C, column-major, as cublasGemmStridedBatchedEx and
// cublasLtMatmul define it; A, B are the library's operands (our B, our A).
void ColumnMajorProduct(const ColumnMajorGemm& p, float alpha, float beta,
                        const std::vector<double>& a, const std::vector<double>& b,
                        std::vector<double>& d) {
  // op(A) is m × k and op(B) k × n.
  REQUIRE((p.a.transposed ? p.a.cols : p.a.rows) == p.m);
  REQUIRE((p.a.transposed ? p.a.rows : p.a.cols) == p.k);
  REQUIRE((p.b.transposed ? p.b.cols : p.b.rows) == p.k);
  REQUIRE((p.b.transposed ? p.b.rows : p.b.cols) == p.n);
  REQUIRE(p.c.rows == p.m);
  REQUIRE(p.c.cols == p.n);
  REQUIRE(!p.c.transposed);
  for (int64_t e = 0; e < p.count; ++e) {
    for (int64_t j = 0; j < p.n; ++j) {
      for (int64_t i = 0; i < p.m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) sum += At(p.a, a, e, i, l) * At(p.b, b, e, l, j);
        const int64_t at = e * p.c.stride + j * p.c.ld + i;
        REQUIRE(at < static_cast<int64_t>(d.size()));
        double& out = d[static_cast<size_t>(at)];
        out = alpha * sum + (beta == 0 ? 0.0 : beta * out);
      }
    }
  }
}

// The row-major definition of g: Y[i, j] = alpha·Σ op(A)[i, l]·op(B)[l, j] + beta·Y[i, j].
void RowMajorProduct(const Gemm2D& g, const std::vector<double>& a, const std::vector<double>& b,
                     std::vector<double>& y) {
  for (int64_t e = 0; e < g.count; ++e) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          const int64_t ia = e * g.stride_a + (g.ta ? l * g.lda + i : i * g.lda + l);
          const int64_t ib = e * g.stride_b + (g.tb ? j * g.ldb + l : l * g.ldb + j);
          sum += a[static_cast<size_t>(ia)] * b[static_cast<size_t>(ib)];
        }
        double& out = y[static_cast<size_t>(e * g.stride_c + i * g.ldc + j)];
        out = g.alpha * sum + (g.beta == 0 ? 0.0 : g.beta * out);
      }
    }
  }
}

void RequireNear(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("ColumnMajor tells a column-major library the row-major product",
          "[runtime][device][gemm]") {
  uint32_t seed = 1;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      // One product; a batch; a batch sharing A (stride 0) and one sharing B; padded
      // leading dims; beta 0 and not; k = 1.
      for (const int shape : {0, 1, 2, 3, 4, 5}) {
        Gemm2D g;
        g.ta = ta;
        g.tb = tb;
        g.m = shape == 5 ? 1 : 3 + shape;
        g.n = 2 + (shape % 3);
        g.k = shape == 4 ? 1 : 4 + shape;
        const int64_t pad = shape % 2 == 1 ? 3 : 0;
        // Stored A is [m, k] (or [k, m] transposed), B [k, n] (or [n, k]), row-major.
        g.lda = (ta ? g.m : g.k) + pad;
        g.ldb = (tb ? g.k : g.n) + pad;
        g.ldc = g.n + pad;
        const int64_t rows_a = ta ? g.k : g.m, rows_b = tb ? g.n : g.k;
        g.count = shape == 0 || shape == 5 ? 1 : 3;
        g.stride_a = shape == 2 ? 0 : rows_a * g.lda + 1;
        g.stride_b = shape == 3 ? 0 : rows_b * g.ldb + 2;
        g.stride_c = g.m * g.ldc + 1;
        g.alpha = shape == 1 ? 0.5f : 1.0f;
        g.beta = shape % 2 == 1 ? 0.25f : 0.0f;
        INFO("ta " << ta << " tb " << tb << " shape " << shape);
        const auto a = Values(static_cast<size_t>(g.count * (g.stride_a + rows_a * g.lda)), ++seed);
        const auto b = Values(static_cast<size_t>(g.count * (g.stride_b + rows_b * g.ldb)), ++seed);
        const auto y0 = Values(static_cast<size_t>(g.count * g.stride_c), ++seed);
        std::vector<double> want = y0, got = y0;
        RowMajorProduct(g, a, b, want);
        // The library's A is our B and its B our A.
        ColumnMajorProduct(math::ColumnMajor(g), g.alpha, g.beta, b, a, got);
        RequireNear(got, want);
      }
    }
  }
}

TEST_CASE("ColumnMajor gives leading dims of at least 1 where k = 0", "[runtime][device][gemm]") {
  Gemm2D g;
  g.m = 2;
  g.n = 3;
  g.k = 0;
  g.ldc = 3;
  const ColumnMajorGemm p = math::ColumnMajor(g);
  CHECK(p.a.ld == 1);
  CHECK(p.b.ld == 1);
  CHECK(p.c.ld == 3);
  CHECK(p.m == 3);
  CHECK(p.n == 2);
}

// Y = A·B with the batch dims broadcast (numpy's rule), element by element.
std::vector<double> BroadcastMatMul(const std::vector<int64_t>& batch_a,
                                    const std::vector<int64_t>& batch_b,
                                    const std::vector<int64_t>& batch, int64_t m, int64_t k,
                                    int64_t n, const std::vector<double>& a,
                                    const std::vector<double>& b) {
  const size_t rank = batch.size();
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  std::vector<double> y(static_cast<size_t>(count * m * n));
  // The operand's matrix index for output matrix `e` (its dims right-aligned; a dim of
  // 1 repeats).
  const auto index_of = [&](const std::vector<int64_t>& dims, int64_t e) {
    int64_t index = 0, step = 1;
    for (size_t d = 0; d < rank; ++d) {
      const size_t od = rank - 1 - d;
      const int64_t coord = e % batch[od];
      e /= batch[od];
      if (d < dims.size()) {
        const int64_t size = dims[dims.size() - 1 - d];
        index += (size == 1 ? 0 : coord) * step;
        step *= size;
      }
    }
    return index;
  };
  for (int64_t e = 0; e < count; ++e) {
    const int64_t ea = index_of(batch_a, e), eb = index_of(batch_b, e);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += a[static_cast<size_t>(ea * m * k + i * k + l)] *
                 b[static_cast<size_t>(eb * k * n + l * n + j)];
        }
        y[static_cast<size_t>(e * m * n + i * n + j)] = sum;
      }
    }
  }
  return y;
}

TEST_CASE("PlanMatMulGemm's products equal MatMul with broadcast batch dims",
          "[runtime][device][gemm]") {
  struct Case {
    std::vector<int64_t> batch_a, batch_b, batch;
    bool per_matrix;
  };
  const Case cases[] = {{{}, {}, {}, false},              // one product
                        {{3}, {}, {3}, false},            // B shared: every row of A at once
                        {{2, 3}, {1, 1}, {2, 3}, false},  // the same, B with batch dims of 1
                        {{}, {3}, {3}, false},            // A shared: a strided batch, A's stride 0
                        {{2, 3}, {2, 3}, {2, 3}, false},  // both full: a strided batch
                        {{1, 3}, {2, 3}, {2, 3}, true},   // A repeated along one dim only
                        {{3, 1}, {1, 4}, {3, 4}, true},   // an outer product of the batches
                        {{2, 1, 3}, {4, 1}, {2, 4, 3}, true}};  // ranks differ
  const int64_t m = 3, k = 4, n = 5;
  uint32_t seed = 100;
  for (const Case& c : cases) {
    int64_t na = 1, nb = 1, nbatch = 1;
    for (int64_t d : c.batch_a) na *= d;
    for (int64_t d : c.batch_b) nb *= d;
    for (int64_t d : c.batch) nbatch *= d;
    INFO("A " << na << " B " << nb << " Y " << nbatch << " matrices");
    const math::MatMulGemm plan = math::PlanMatMulGemm(m, k, n, na, nb, nbatch);
    REQUIRE(plan.per_matrix == c.per_matrix);
    const auto a = Values(static_cast<size_t>(na * m * k), ++seed);
    const auto b = Values(static_cast<size_t>(nb * k * n), ++seed);
    const auto want = BroadcastMatMul(c.batch_a, c.batch_b, c.batch, m, k, n, a, b);
    std::vector<double> got(want.size(), -7.0);
    if (!plan.per_matrix) {
      ColumnMajorProduct(math::ColumnMajor(plan.g), plan.g.alpha, plan.g.beta, b, a, got);
      RequireNear(got, want);
    } else {
      // One product `plan.g` per output matrix; its operands are whole matrices.
      CHECK(plan.g.count == 1);
      CHECK(plan.g.m == m);
      CHECK(plan.g.lda == k);
      CHECK(plan.g.ldb == n);
      CHECK(plan.g.ldc == n);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
