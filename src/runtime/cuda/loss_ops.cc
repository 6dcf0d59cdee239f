// The losses on the device: SoftmaxCrossEntropyLoss (a log-softmax over the class axis,
// then the negative log-likelihood) and NegativeLogLikelihoodLoss. Labels stay on the
// device (a label out of range fails the run at its end, naming the node); the
// attributes and shapes as the CPU kernels (cpu/loss.cc).
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// Output 0 from log-probabilities `logp` (device memory, `shape` [N, C, d...]).
absl::Status NllLoss(KernelContext& ctx, FloatKind k, const void* logp, const Shape& shape) {
  const Tensor& target = ctx.input(1);
  const Tensor* weight = ctx.optional_input(2);
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return ctx.Error(absl::StrCat("reduction '", reduction, "' is not none, sum or mean"));
  }
  if (shape.size() < 2) return ctx.Error("scores must have rank >= 2");
  if (target.dtype() != ir::DType::kI64 && target.dtype() != ir::DType::kI32) {
    return ctx.Error("labels must be int64 or int32");
  }
  math::NllLayout l;
  l.n = shape[0];
  l.c = shape[1];
  for (size_t d = 2; d < shape.size(); ++d) l.inner *= shape[d];
  if (target.num_elements() != l.n * l.inner) return ctx.Error("labels do not match the scores");
  if (weight != nullptr &&
      (weight->num_elements() != l.c || weight->dtype() != ctx.input(0).dtype())) {
    return ctx.Error(absl::StrCat("the weight must be [", l.c, "] of the scores' type, got ",
                                  weight->TypeString()));
  }
  if (ctx.node().has_attr("ignore_index")) {
    l.has_ignore = true;
    l.ignore = ctx.node().attr_int("ignore_index", 0);
  }
  Shape out_shape;
  if (reduction == "none") {
    out_shape.push_back(l.n);
    out_shape.insert(out_shape.end(), shape.begin() + 2, shape.end());
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape, ctx.input(0).dtype()));
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("a label is out of range for ", l.c, " classes")).message()));
  return Check(ctx, LaunchNllLoss(k, logp, target.raw(), target.dtype() == ir::DType::kI64,
                                  weight != nullptr ? weight->raw() : nullptr, l,
                                  reduction == "none"  ? 0
                                  : reduction == "sum" ? 1
                                                       : 2,
                                  y->raw(), BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

}  // namespace

absl::Status SoftmaxCrossEntropyLoss(KernelContext& ctx) {
  const Tensor& scores = ctx.input(0);
  const Shape& shape = scores.shape();
  if (shape.size() < 2) return ctx.Error("scores must have rank >= 2");
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, scores.dtype()));
  // log_softmax over axis 1: into output 1 when wanted, else scratch.
  Tensor scratch;
  void* logp = nullptr;
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * lp, ctx.Output(1, shape, scores.dtype()));
    logp = lp->raw();
  } else {
    TPC_ASSIGN_OR_RETURN(scratch, Scratch(ctx, scores.dtype(), shape));
    logp = scratch.raw();
  }
  const int64_t n = shape[0], c = shape[1];
  const int64_t inner = n == 0 || c == 0 ? 0 : scores.num_elements() / (n * c);
  if (scores.num_elements() > 0) {
    TPC_RETURN_IF_ERROR(Check(
        ctx, LaunchSoftmax(k, scores.raw(), logp, RowLayout{n, c, inner}, true, StreamOf(ctx))));
  }
  return NllLoss(ctx, k, logp, shape);
}

absl::Status NegativeLogLikelihoodLoss(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, input.dtype()));
  return NllLoss(ctx, k, input.raw(), input.shape());
}

}  // namespace tpc::runtime::cuda
