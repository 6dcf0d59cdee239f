// Losses: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss over [N, C, d1, ...].
#include <cmath>
#include <limits>
#include <optional>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// Output 0 from log-probabilities `logp` ([N, C, d...] as [N, C, inner]) and targets.
template <typename T>
absl::Status NllLoss(KernelContext& ctx, const T* logp, const Shape& shape, const Tensor& target,
                     const Tensor* weight) {
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  std::optional<int64_t> ignore;
  if (ctx.node().has_attr("ignore_index")) ignore = ctx.node().attr_int("ignore_index", 0);
  if (shape.size() < 2) return ctx.Error("scores must have rank >= 2");
  const int64_t n = shape[0], c = shape[1];
  int64_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  TPC_ASSIGN_OR_RETURN(auto labels, ReadInts(ctx, target));
  if (static_cast<int64_t>(labels.size()) != n * inner)
    return ctx.Error("labels do not match the scores");
  std::vector<double> loss(labels.size(), 0.0);
  double weight_sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const size_t at = static_cast<size_t>(b * inner + i);
      const int64_t label = labels[at];
      if (ignore && label == *ignore) continue;
      if (label < 0 || label >= c) {
        return ctx.Error(absl::StrCat("label ", label, " is out of range for ", c, " classes"));
      }
      const double w = weight ? ElementAsDouble(*weight, label) : 1.0;
      loss[at] = -w * static_cast<double>(logp[(b * c + label) * inner + i]);
      weight_sum += w;
    }
  }
  Shape out_shape;
  if (reduction == "none") {
    out_shape.push_back(n);
    out_shape.insert(out_shape.end(), shape.begin() + 2, shape.end());
  } else if (reduction != "sum" && reduction != "mean") {
    return ctx.Error(absl::StrCat("reduction '", reduction, "' is not none, sum or mean"));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape));
  if (reduction == "none") {
    for (size_t i = 0; i < loss.size(); ++i) y->data<T>()[i] = static_cast<T>(loss[i]);
    return absl::OkStatus();
  }
  double total = 0;
  for (double v : loss) total += v;
  if (reduction == "mean")
    total = weight_sum == 0 ? std::numeric_limits<double>::quiet_NaN() : total / weight_sum;
  y->data<T>()[0] = static_cast<T>(total);
  return absl::OkStatus();
}

}  // namespace

absl::Status SoftmaxCrossEntropyLoss(KernelContext& ctx) {
  const Tensor& scores = ctx.input(0);
  const Shape& shape = scores.shape();
  if (shape.size() < 2) return ctx.Error("scores must have rank >= 2");
  const int64_t n = shape[0], c = shape[1];
  const int64_t inner = c == 0 || n == 0 ? 0 : scores.num_elements() / (n * c);
  return VisitFloat(ctx, scores.dtype(), [&]<typename T>() -> absl::Status {
    // log_softmax over axis 1: into output 1 when wanted, else a scratch tensor.
    Tensor scratch;
    T* logp = nullptr;
    if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
      TPC_ASSIGN_OR_RETURN(Tensor * lp, ctx.Output(1, shape));
      logp = lp->data<T>();
    } else {
      TPC_ASSIGN_OR_RETURN(scratch, Tensor::Create(scores.dtype(), shape, ctx.node().Describe()));
      logp = scratch.data<T>();
    }
    const T* x = scores.data<T>();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = b * c * inner + i;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < c; ++j) mx = std::max(mx, x[base + j * inner]);
        double sum = 0;
        for (int64_t j = 0; j < c; ++j)
          sum += std::exp(static_cast<double>(x[base + j * inner] - mx));
        const double lse = std::log(sum);
        for (int64_t j = 0; j < c; ++j)
          logp[base + j * inner] = static_cast<T>(x[base + j * inner] - mx - lse);
      }
    }
    return NllLoss<T>(ctx, logp, shape, ctx.input(1), ctx.optional_input(2));
  });
}

absl::Status NegativeLogLikelihoodLoss(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  return VisitFloat(ctx, input.dtype(), [&]<typename T>() {
    return NllLoss<T>(ctx, input.data<T>(), input.shape(), ctx.input(1), ctx.optional_input(2));
  });
}

}  // namespace tpc::runtime::cpu
