// Tensor generators: Constant, ConstantOfShape, Range. Their values are known when small.
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {

using ir::Dim;
using ir::DType;
using ir::TensorType;

absl::Status InferConstant(InferenceContext& ctx) {
  const ir::Attributes& attrs = ctx.node().attrs();
  if (auto it = attrs.find("value"); it != attrs.end()) {
    const auto* t = std::get_if<ir::Tensor>(&it->second);
    if (t == nullptr) return ctx.Error("attribute 'value' is not a tensor");
    ctx.set_output_type(0, TensorType(t->dtype(), Dims(t->shape().begin(), t->shape().end())));
    if (t->has_data() && TracksValues(t->dtype()) && t->num_elements() <= kMaxKnownValueElements) {
      std::vector<int64_t> v = t->ToInt64();
      MaybeSetValue(ctx, 0, Dims(v.begin(), v.end()));
    }
    return absl::OkStatus();
  }
  if (ctx.node().has_attr("value_int")) {
    ctx.set_output_type(0, TensorType(DType::kI64, {}));
    MaybeSetValue(ctx, 0, {Dim(ctx.node().attr_int("value_int", 0))});
    return absl::OkStatus();
  }
  if (ctx.node().has_attr("value_ints")) {
    std::vector<int64_t> v = ctx.node().attr_ints("value_ints");
    ctx.set_output_type(0, TensorType(DType::kI64, {Dim(static_cast<int64_t>(v.size()))}));
    MaybeSetValue(ctx, 0, Dims(v.begin(), v.end()));
    return absl::OkStatus();
  }
  if (ctx.node().has_attr("value_float")) {
    ctx.set_output_type(0, TensorType(DType::kF32, {}));
    return absl::OkStatus();
  }
  if (auto it = attrs.find("value_floats"); it != attrs.end()) {
    const auto* v = std::get_if<std::vector<float>>(&it->second);
    const int64_t n = v != nullptr ? static_cast<int64_t>(v->size()) : 0;
    ctx.set_output_type(0, TensorType(DType::kF32, {Dim(n)}));
    return absl::OkStatus();
  }
  return ctx.Error("no supported value attribute");
}

absl::Status InferConstantOfShape(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  DType t = DType::kF32;
  std::optional<Dim> element = Dim(0);
  const ir::Attributes& attrs = ctx.node().attrs();
  if (auto it = attrs.find("value"); it != attrs.end()) {
    const auto* v = std::get_if<ir::Tensor>(&it->second);
    if (v == nullptr || v->num_elements() != 1) {
      return ctx.Error("attribute 'value' must be a one-element tensor");
    }
    t = v->dtype();
    element =
        v->has_data() && TracksValues(t) ? std::optional(Dim(v->ElementAsInt64(0))) : std::nullopt;
  }
  const auto& shape = ctx.input_value(0);
  if (!shape.has_value()) {
    const auto& ss = ctx.input_type(0).shape;
    if (ss.has_value() && ss->size() == 1 && (*ss)[0].is_static()) {
      ctx.set_output_type(0, TensorType(t, Dims(static_cast<size_t>((*ss)[0].value()))));
    } else {
      SetUnknownRank(ctx, 0, t);
    }
    return absl::OkStatus();
  }
  ctx.set_output_type(0, TensorType(t, *shape));
  if (element.has_value()) {
    const Dim n = ir::Product(*shape);
    if (n.is_static() && n.value() >= 0 && n.value() <= kMaxKnownValueElements) {
      MaybeSetValue(ctx, 0, Dims(static_cast<size_t>(n.value()), *element));
    }
  }
  return absl::OkStatus();
}

absl::Status InferRange(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  const DType t = ctx.input_type(0).dtype;
  std::optional<Dim> start = ScalarValue(ctx, 0);
  std::optional<Dim> limit = ScalarValue(ctx, 1);
  std::optional<Dim> delta = ScalarValue(ctx, 2);
  Dim size;
  if (start && limit && delta && delta->is_static()) {
    const int64_t step = delta->value();
    if (step == 0) return ctx.Error("delta is 0");
    if (start->is_static() && limit->is_static()) {
      const int64_t span = limit->value() - start->value();
      const int64_t n = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
      size = Dim(std::max<int64_t>(0, n));
    } else if (step == 1) {
      size = *limit - *start;
    } else {
      const Dim span = *limit - *start;
      size = span.DivExact(*delta).value_or(Dim::UnknownFrom(span, *delta));
    }
  }
  ctx.set_output_type(0, TensorType(t, {size}));
  if (size.is_static() && size.value() <= kMaxKnownValueElements && start->is_static()) {
    Dims value;
    for (int64_t k = 0; k < size.value(); ++k) value.push_back(*start + Dim(k * delta->value()));
    MaybeSetValue(ctx, 0, std::move(value));
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
