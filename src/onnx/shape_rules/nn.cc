// Neural-network layers with more than an elementwise shape: Softmax and LogSoftmax
// (axis checked), layer normalizations with their optional statistics outputs, Dropout.
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// The statistics' type: stash_type (f32 by default) for LayerNormalization, else the
// input's.
DType StatsType(const InferenceContext& ctx) {
  if (ctx.node().has_attr("stash_type")) {
    const int64_t s = ctx.node().attr_int("stash_type", 1);
    if (s > 0 && s <= INT32_MAX && ir::IsKnownOnnxDType(static_cast<int32_t>(s))) {
      return static_cast<DType>(s);
    }
  }
  return ctx.node().op_type() == "LayerNormalization" ? DType::kF32 : ctx.input_type(0).dtype;
}

// Sets outputs [first, first + count) to the statistics shape: the input's dims before
// `axis`, then 1s.
absl::Status SetStats(InferenceContext& ctx, int first, int count) {
  const TensorType& x = ctx.input_type(0);
  const DType t = StatsType(ctx);
  for (int i = first; i < first + count && i < ctx.num_outputs(); ++i) {
    if (!x.shape.has_value()) {
      SetUnknownRank(ctx, i, t);
      continue;
    }
    const int64_t rank = x.rank();
    TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
    Dims dims(x.shape->begin(), x.shape->begin() + axis);
    dims.resize(static_cast<size_t>(rank), Dim(1));
    ctx.set_output_type(i, TensorType(t, std::move(dims)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InferSoftmax(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const TensorType& x = ctx.input_type(0);
  if (x.shape.has_value()) {
    TPC_RETURN_IF_ERROR(NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), x.rank()).status());
  }
  ctx.set_output_type(0, x);
  return absl::OkStatus();
}

absl::Status InferLayerNorm(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  ctx.set_output_type(0, ctx.input_type(0));
  // LayerNormalization: Mean, InvStdDev; SimplifiedLayerNormalization: InvStdVar.
  return SetStats(ctx, 1, 2);
}

absl::Status InferSkipLayerNorm(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const TensorType& x = ctx.input_type(0);
  if (x.shape.has_value() && ctx.input_type(1).shape.has_value()) {
    TPC_RETURN_IF_ERROR(BroadcastShapes(ctx, *x.shape, *ctx.input_type(1).shape).status());
  }
  ctx.set_output_type(0, x);
  // Outputs: output, mean, inv_std_var, input_skip_bias_sum (the simplified form's too, as
  // onnxruntime 1.32 has them; its mean is 0).
  TPC_RETURN_IF_ERROR(SetStats(ctx, 1, 2));
  if (ctx.num_outputs() > 3) ctx.set_output_type(3, x);
  return absl::OkStatus();
}

absl::Status InferDropout(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const TensorType& x = ctx.input_type(0);
  ctx.set_output_type(0, x);
  if (ctx.num_outputs() > 1) {
    TensorType mask = x;
    mask.dtype = DType::kBool;
    ctx.set_output_type(1, std::move(mask));
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
