// Helpers shared by the shape rules: axes, broadcasting, known values.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {

using ir::Dim;
using ir::DType;

absl::Status RequireInputs(const InferenceContext& ctx, int count) {
  for (int i = 0; i < count; ++i) {
    if (!ctx.has_input(i)) {
      return ctx.Error(absl::StrCat("missing input ", i, " (", count, " required)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Dims*> RankedInput(const InferenceContext& ctx, int i) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, i + 1));
  const auto& shape = ctx.input_type(i).shape;
  if (!shape.has_value()) return ctx.Error(absl::StrCat("input ", i, " has an unknown rank"));
  return &*shape;
}

absl::StatusOr<int64_t> NormalizeAxis(const InferenceContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

void SetUnknownRank(InferenceContext& ctx, int i, DType t) {
  ir::TensorType type;
  type.dtype = t;
  ctx.set_output_type(i, std::move(type));
}

std::string ShapeString(const std::optional<Dims>& dims) {
  return dims.has_value() ? ir::DimsToString(*dims) : "[*]";
}

std::optional<Dim> BroadcastDim(const Dim& a, const Dim& b) {
  if (a.is_unknown() && b.is_unknown()) return Dim::UnknownFrom(a, b);
  if (a == b) return a;
  if (a.is_static() && a.value() == 1) return b;
  if (b.is_static() && b.value() == 1) return a;
  if (a.is_static() && b.is_static()) return std::nullopt;
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  if (a.is_unknown()) return b;
  if (b.is_unknown()) return a;
  return Dim();  // two different symbolic dims: either may be 1 at run time
}

absl::StatusOr<Dims> BroadcastShapes(const InferenceContext& ctx, const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // Align from the right.
    const Dim da = k < rank - a.size() ? Dim(1) : a[k - (rank - a.size())];
    const Dim db = k < rank - b.size() ? Dim(1) : b[k - (rank - b.size())];
    std::optional<Dim> d = BroadcastDim(da, db);
    if (!d.has_value()) {
      return ctx.Error(
          absl::StrCat("cannot broadcast ", ir::DimsToString(a), " with ", ir::DimsToString(b)));
    }
    out[k] = *d;
  }
  return out;
}

absl::StatusOr<std::optional<Dims>> BroadcastInputs(const InferenceContext& ctx, int first,
                                                    int end) {
  if (end < 0) end = ctx.num_inputs();
  std::optional<Dims> out;
  for (int i = first; i < end; ++i) {
    if (!ctx.has_input(i)) continue;
    const auto& shape = ctx.input_type(i).shape;
    if (!shape.has_value()) return std::optional<Dims>();
    if (!out.has_value()) {
      out = *shape;
    } else {
      TPC_ASSIGN_OR_RETURN(out, BroadcastShapes(ctx, *out, *shape));
    }
  }
  return out;
}

bool TracksValues(DType t) { return ir::IsInteger(t) || t == DType::kBool; }

void MaybeSetValue(InferenceContext& ctx, int i, Dims value) {
  const ir::Value* out = ctx.node().output(i);
  const ir::TensorType& type = out->type();
  if (!TracksValues(type.dtype) || !type.shape.has_value()) return;
  if (static_cast<int64_t>(value.size()) > kMaxKnownValueElements) return;
  std::optional<std::vector<int64_t>> shape = StaticShape(type.shape);
  if (!shape.has_value()) return;
  int64_t count = 1;
  for (int64_t d : *shape) count *= d;
  if (count != static_cast<int64_t>(value.size())) return;
  ctx.set_output_value(i, std::move(value));
}

std::optional<std::vector<int64_t>> StaticShape(const std::optional<Dims>& shape) {
  if (!shape.has_value()) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *shape) {
    if (!d.is_static() || d.value() < 0) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) strides[k - 1] = strides[k] * shape[k];
  return strides;
}

std::optional<std::vector<int64_t>> StaticInts(const InferenceContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  if (const auto& value = ctx.input_value(i); value.has_value()) {
    std::vector<int64_t> out;
    out.reserve(value->size());
    for (const Dim& d : *value) {
      if (!d.is_static()) return std::nullopt;
      out.push_back(d.value());
    }
    return out;
  }
  const ir::Tensor* t = ctx.input_constant(i);
  if (t == nullptr || !t->has_data() || !TracksValues(t->dtype()) || t->shape().size() > 1) {
    return std::nullopt;
  }
  return t->ToInt64();
}

std::optional<Dim> ScalarValue(const InferenceContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const auto& value = ctx.input_value(i);
  if (!value.has_value() || value->size() != 1 || (*value)[0].is_unknown()) return std::nullopt;
  return (*value)[0];
}

std::optional<std::vector<Dims>> BroadcastValues(const InferenceContext& ctx,
                                                 const std::vector<int>& inputs) {
  std::vector<Dims> values;
  size_t n = 1;
  for (int i : inputs) {
    if (!ctx.has_input(i) || !ctx.input_value(i).has_value()) return std::nullopt;
    values.push_back(*ctx.input_value(i));
    const size_t size = values.back().size();
    if (size == 1) continue;
    if (n != 1 && n != size) return std::nullopt;
    n = size;
  }
  for (Dims& v : values) {
    if (v.size() == 1 && n != 1) v.assign(n, v[0]);
    if (v.size() != n) return std::nullopt;
  }
  return values;
}

absl::StatusOr<std::optional<std::vector<int64_t>>> IntsFromAttrOrInput(const InferenceContext& ctx,
                                                                        const std::string& name,
                                                                        int input) {
  if (ctx.node().has_attr(name)) return std::optional(ctx.node().attr_ints(name));
  if (!ctx.has_input(input)) return std::optional<std::vector<int64_t>>();
  std::optional<std::vector<int64_t>> ints = StaticInts(ctx, input);
  if (!ints.has_value()) {
    return ctx.Error(
        absl::StrCat("input ", input, " ('", name, "') must be a constant list of integers"));
  }
  return ints;
}

bool IntsComputedAtRunTime(const InferenceContext& ctx, const std::string& name, int input) {
  return !ctx.node().has_attr(name) && ctx.has_input(input) && !StaticInts(ctx, input).has_value();
}

std::optional<int64_t> StaticLength(const InferenceContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const auto& shape = ctx.input_type(i).shape;
  if (!shape.has_value() || shape->size() > 1) return std::nullopt;
  if (shape->empty()) return 1;
  const Dim& d = (*shape)[0];
  if (!d.is_static()) return std::nullopt;
  return d.value();
}

}  // namespace tpc::onnx::shape_rules
