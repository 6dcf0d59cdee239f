// Det: the determinant of each square matrix in the last two dims, by LU decomposition
// with partial pivoting in double (math::LuDeterminant).
#include <vector>

#include "kernels.h"
#include "tpc/runtime/math/det.h"

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
        const double det = math::LuDeterminant(a.data(), m);
        y->data<T>()[k] = static_cast<T>(det);
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
