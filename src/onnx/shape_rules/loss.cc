// Losses: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss. The loss is a scalar
// for reduction mean or sum, else shaped like the labels.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// scores [N, C, d1, ...] and labels [N, d1, ...]: the loss output 0.
absl::Status SetLoss(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const TensorType& scores = ctx.input_type(0);
  const TensorType& labels = ctx.input_type(1);
  if (scores.shape.has_value() && labels.shape.has_value()) {
    const Dims& s = *scores.shape;
    const Dims& l = *labels.shape;
    bool fits = s.size() >= 2 && l.size() + 1 == s.size();
    for (size_t k = 0; fits && k < l.size(); ++k) {
      const Dim& sd = s[k == 0 ? 0 : k + 1];
      fits = !(sd.is_static() && l[k].is_static() && sd != l[k]);
    }
    if (!fits) {
      return ctx.Error(
          absl::StrCat("labels ", ir::DimsToString(l), " do not fit scores ", ir::DimsToString(s)));
    }
  }
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  if (reduction == "mean" || reduction == "sum") {
    ctx.set_output_type(0, TensorType(scores.dtype, {}));
  } else if (reduction == "none") {
    TensorType t = labels;
    t.dtype = scores.dtype;
    ctx.set_output_type(0, std::move(t));
  } else {
    return ctx.Error(absl::StrCat("unknown reduction '", reduction, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InferSoftmaxCrossEntropyLoss(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(SetLoss(ctx));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, ctx.input_type(0));  // log_prob
  return absl::OkStatus();
}

absl::Status InferNegativeLogLikelihoodLoss(InferenceContext& ctx) { return SetLoss(ctx); }

}  // namespace tpc::onnx::shape_rules
