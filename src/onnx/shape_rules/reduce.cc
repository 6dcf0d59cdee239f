// Reductions over axes: Reduce* (axes as attribute or input, keepdims,
// noop_with_empty_axes), ArgMax/ArgMin and TopK.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

}  // namespace

// The axes are an attribute before opset 18 (13 for ReduceSum) and input 1 since. Both
// forms are accepted whatever the opset, as exporters are not always strict.
absl::Status InferReduce(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const DType t = ctx.input_type(0).dtype;
  const auto& in = ctx.input_type(0).shape;
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool noop = ctx.node().attr_int("noop_with_empty_axes", 0) != 0;
  std::optional<std::vector<int64_t>> axes;
  if (ctx.node().has_attr("axes")) {
    axes = ctx.node().attr_ints("axes");
  } else if (ctx.has_input(1)) {
    axes = StaticInts(ctx, 1);
    if (!axes.has_value()) {
      // Which axes is unknown: the rank stays when the dims are kept.
      if (keepdims && in.has_value()) {
        ctx.set_output_type(0, TensorType(t, Dims(in->size())));
      } else {
        SetUnknownRank(ctx, 0, t);
      }
      return absl::OkStatus();
    }
  } else {
    axes.emplace();
  }
  if (!in.has_value()) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  if (axes->empty()) {
    if (noop) {
      ctx.set_output_type(0, ctx.input_type(0));
      return absl::OkStatus();
    }
    for (int64_t k = 0; k < rank; ++k) axes->push_back(k);
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    TPC_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
    reduced[static_cast<size_t>(a)] = true;
  }
  Dims out;
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[static_cast<size_t>(k)]) {
      out.push_back((*in)[static_cast<size_t>(k)]);
    } else if (keepdims) {
      out.push_back(Dim(1));
    }
  }
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferArgReduce(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  Dims out = *in;
  if (ctx.node().attr_int("keepdims", 1) != 0) {
    out[static_cast<size_t>(axis)] = Dim(1);
  } else {
    out.erase(out.begin() + axis);
  }
  ctx.set_output_type(0, TensorType(DType::kI64, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferTopK(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
  Dim k;
  if (ctx.node().has_attr("k")) {  // opset < 10
    k = Dim(ctx.node().attr_int("k", 0));
  } else {
    TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
    k = ScalarValue(ctx, 1).value_or(Dim());
  }
  const Dim& d = (*in)[static_cast<size_t>(axis)];
  if (k.is_static() && d.is_static() && k.value() > d.value()) {
    return ctx.Error(
        absl::StrCat("k ", k.value(), " exceeds dim ", d.value(), " of ", ir::DimsToString(*in)));
  }
  Dims out = *in;
  out[static_cast<size_t>(axis)] = k;
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, out));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, TensorType(DType::kI64, std::move(out)));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
