// Softmax, LogSoftmax and the normalisation layers (LayerNormalization, RMS norm).
#include <cmath>
#include <limits>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// Softmax over `len` elements at stride `inner`, for each of outer * inner lines.
absl::Status SoftmaxImpl(KernelContext& ctx, bool log) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  int64_t outer = 1, len = 1, inner = 1;
  if (ctx.opset() < 13) {
    // Before opset 13 the input is coerced to 2-D at `axis` (default 1).
    TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 1),
                                                     std::max<int64_t>(rank, 1)));
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : len) *= x.dim(i);
  } else {
    TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : (i == axis ? len : inner)) *= x.dim(i);
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    ctx.pool().ParallelFor(outer * inner, std::max<int64_t>(1, 8192 / std::max<int64_t>(len, 1)),
                           [&](int64_t b, int64_t e) {
                             for (int64_t line = b; line < e; ++line) {
                               const int64_t base = (line / inner) * len * inner + line % inner;
                               T mx = -std::numeric_limits<T>::infinity();
                               for (int64_t j = 0; j < len; ++j)
                                 mx = std::max(mx, px[base + j * inner]);
                               double sum = 0;
                               for (int64_t j = 0; j < len; ++j) {
                                 const T ev = std::exp(px[base + j * inner] - mx);
                                 if (!log) py[base + j * inner] = ev;
                                 sum += ev;
                               }
                               if (log) {
                                 const T lse = static_cast<T>(std::log(sum));
                                 for (int64_t j = 0; j < len; ++j)
                                   py[base + j * inner] = px[base + j * inner] - mx - lse;
                               } else {
                                 const T inv = static_cast<T>(1.0 / sum);
                                 for (int64_t j = 0; j < len; ++j) py[base + j * inner] *= inv;
                               }
                             }
                           });
    return absl::OkStatus();
  });
}

// Normalises each row of the trailing dims from `axis`; rms: no mean subtraction.
absl::Status NormImpl(KernelContext& ctx, bool rms) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* bias = rms ? nullptr : ctx.optional_input(2);
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? rows : cols) *= x.dim(i);
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  // Scale and bias broadcast to the normalised shape.
  TPC_ASSIGN_OR_RETURN(Shape ss, BroadcastShapes(ctx, {scale.shape(), norm_shape}));
  if (ss != norm_shape ||
      (bias && BroadcastShapes(ctx, {bias->shape(), norm_shape}).value_or(Shape{}) != norm_shape)) {
    return ctx.Error("scale or bias does not broadcast to the normalised dims");
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(static_cast<size_t>(rank), 1);
  Tensor* mean_out = nullptr;
  Tensor* inv_out = nullptr;
  const int inv_index = rms ? 1 : 2;
  if (!rms && ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(mean_out, ctx.Output(1, stat_shape));
  }
  if (ctx.wants_output(inv_index)) {
    TPC_ASSIGN_OR_RETURN(inv_out, ctx.Output(inv_index, stat_shape));
  }
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    // Scale and bias as full rows (they are usually exactly the normalised shape).
    std::vector<T> g(static_cast<size_t>(cols)), bv(static_cast<size_t>(cols), T(0));
    ForEachBroadcast<1>(ctx.pool(), norm_shape, {scale.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) {
                          g[static_cast<size_t>(i)] = scale.data<T>()[o[0]];
                        });
    if (bias) {
      ForEachBroadcast<1>(ctx.pool(), norm_shape, {bias->shape()},
                          [&](int64_t i, const std::array<int64_t, 1>& o) {
                            bv[static_cast<size_t>(i)] = bias->data<T>()[o[0]];
                          });
    }
    const T* px = x.data<T>();
    T* py = y->data<T>();
    ctx.pool().ParallelFor(
        rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const T* row = px + r * cols;
            double mean = 0;
            if (!rms) {
              for (int64_t j = 0; j < cols; ++j) mean += row[j];
              mean /= static_cast<double>(cols);
            }
            double var = 0;
            for (int64_t j = 0; j < cols; ++j) {
              const double d = row[j] - mean;
              var += d * d;
            }
            var /= static_cast<double>(cols);
            const double inv = 1.0 / std::sqrt(var + eps);
            for (int64_t j = 0; j < cols; ++j) {
              py[r * cols + j] = static_cast<T>((row[j] - mean) * inv * g[static_cast<size_t>(j)] +
                                                bv[static_cast<size_t>(j)]);
            }
            if (mean_out) mean_out->data<T>()[r] = static_cast<T>(mean);
            if (inv_out) inv_out->data<T>()[r] = static_cast<T>(inv);
          }
        });
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status Softmax(KernelContext& ctx) { return SoftmaxImpl(ctx, false); }
absl::Status LogSoftmax(KernelContext& ctx) { return SoftmaxImpl(ctx, true); }
absl::Status LayerNormalization(KernelContext& ctx) { return NormImpl(ctx, false); }
absl::Status RMSNormalization(KernelContext& ctx) { return NormImpl(ctx, true); }

}  // namespace tpc::runtime::cpu
