// Det: the determinant of each square matrix in the last two dims, by LU decomposition
// with partial pivoting (in double).
#include <cmath>
#include <utility>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {

absl::Status Det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
    return ctx.Error(absl::StrCat("x must be [..., M, M], got ", x.TypeString()));
  }
  const int64_t m = x.dim(x.rank() - 1);
  const Shape batch(x.shape().begin(), x.shape().end() - 2);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, batch, x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const int64_t count = NumElements(batch);
    ctx.pool().ParallelFor(count, 1, [&](int64_t b, int64_t e) {
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t k = b; k < e; ++k) {
        const T* src = x.data<T>() + k * m * m;
        for (size_t i = 0; i < a.size(); ++i) a[i] = src[i];
        double det = 1;
        for (int64_t col = 0; col < m && det != 0; ++col) {
          int64_t pivot = col;
          for (int64_t r = col + 1; r < m; ++r) {
            if (std::abs(a[static_cast<size_t>(r * m + col)]) >
                std::abs(a[static_cast<size_t>(pivot * m + col)])) {
              pivot = r;
            }
          }
          const double p = a[static_cast<size_t>(pivot * m + col)];
          if (p == 0) {
            det = 0;
            break;
          }
          if (pivot != col) {
            for (int64_t j = 0; j < m; ++j) {
              std::swap(a[static_cast<size_t>(pivot * m + j)], a[static_cast<size_t>(col * m + j)]);
            }
            det = -det;
          }
          det *= p;
          for (int64_t r = col + 1; r < m; ++r) {
            const double f = a[static_cast<size_t>(r * m + col)] / p;
            for (int64_t j = col; j < m; ++j) {
              a[static_cast<size_t>(r * m + j)] -= f * a[static_cast<size_t>(col * m + j)];
            }
          }
        }
        y->data<T>()[k] = static_cast<T>(det);
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
