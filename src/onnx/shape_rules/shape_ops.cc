// Shape manipulation: Shape, Size, Identity, Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Expand. Ops that only rearrange a known value pass it on.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// Output 0 of the input's dtype and `shape`; the input's known value passes on.
void SetRearranged(InferenceContext& ctx, std::optional<Dims> shape) {
  TensorType type;
  type.dtype = ctx.input_type(0).dtype;
  type.shape = std::move(shape);
  ctx.set_output_type(0, std::move(type));
  if (ctx.input_value(0).has_value()) MaybeSetValue(ctx, 0, *ctx.input_value(0));
}

// Sorted, non-negative, distinct axes for a tensor of `rank`.
absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const InferenceContext& ctx,
                                                   std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) {
    TPC_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    return ctx.Error(absl::StrCat("repeated axis in [", absl::StrJoin(axes, ", "), "]"));
  }
  return axes;
}

// The count of axes that input 1 gives at run time; an error when it is not static
// (the output rank is then unknown).
absl::StatusOr<int64_t> RunTimeAxesCount(const InferenceContext& ctx) {
  const std::optional<int64_t> count = StaticLength(ctx, 1);
  if (!count.has_value()) {
    return ctx.Error(absl::StrCat("axes are computed at run time and their count is unknown (",
                                  ShapeString(ctx.input_type(1).shape),
                                  "): the output rank is unknown"));
  }
  return *count;
}

}  // namespace

absl::Status InferShape(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(ctx.node().attr_int("start", 0));
  const int64_t end = std::max(start, clamp(ctx.node().attr_int("end", rank)));
  Dims value(in->begin() + start, in->begin() + end);
  ctx.set_output_type(0, TensorType(DType::kI64, {Dim(end - start)}));
  MaybeSetValue(ctx, 0, std::move(value));
  return absl::OkStatus();
}

absl::Status InferSize(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  ctx.set_output_type(0, TensorType(DType::kI64, {}));
  const auto& shape = ctx.input_type(0).shape;
  if (shape.has_value()) MaybeSetValue(ctx, 0, {ir::Product(*shape)});
  return absl::OkStatus();
}

absl::Status InferIdentity(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  SetRearranged(ctx, ctx.input_type(0).shape);
  return absl::OkStatus();
}

absl::Status InferReshape(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const auto& in = ctx.input_type(0).shape;
  const auto& target = ctx.input_value(1);
  if (!target.has_value()) {
    // The rank is still known when the target's length is.
    const auto& ts = ctx.input_type(1).shape;
    if (ts.has_value() && ts->size() == 1 && (*ts)[0].is_static()) {
      SetRearranged(ctx, Dims(static_cast<size_t>((*ts)[0].value())));
    } else {
      SetRearranged(ctx, std::nullopt);
    }
    return absl::OkStatus();
  }
  const bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
  Dims out = *target;
  int infer = -1;
  for (size_t k = 0; k < out.size(); ++k) {
    Dim& d = out[k];
    if (!d.is_static()) continue;
    if (d.value() == 0 && !allowzero) {
      if (!in.has_value()) {
        d = Dim();
      } else if (k < in->size()) {
        d = (*in)[k];
      } else {
        return ctx.Error(absl::StrCat("target dim ", k, " is 0 but the input ",
                                      ir::DimsToString(*in), " has no dim ", k));
      }
    } else if (d.value() == -1) {
      if (infer >= 0) return ctx.Error("more than one -1 in the target shape");
      infer = static_cast<int>(k);
    } else if (d.value() < -1) {
      return ctx.Error(absl::StrCat("invalid target dim ", d.value()));
    }
  }
  if (infer >= 0) {
    Dims others = out;
    others.erase(others.begin() + infer);
    const Dim total = in.has_value() ? ir::Product(*in) : Dim();
    const Dim known = ir::Product(others);
    out[static_cast<size_t>(infer)] =
        total.DivExact(known).value_or(Dim::UnknownFrom(total, known));
  } else if (in.has_value()) {
    const Dim a = ir::Product(*in);
    const Dim b = ir::Product(out);
    if (a.is_static() && b.is_static() && a.value() != b.value()) {
      return ctx.Error(
          absl::StrCat("cannot reshape ", ir::DimsToString(*in), " to ", ir::DimsToString(out)));
    }
  }
  SetRearranged(ctx, std::move(out));
  return absl::OkStatus();
}

absl::Status InferFlatten(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < -rank || axis > rank) {
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  const Dims head(in->begin(), in->begin() + axis);
  const Dims tail(in->begin() + axis, in->end());
  SetRearranged(ctx, Dims{ir::Product(head), ir::Product(tail)});
  return absl::OkStatus();
}

absl::Status InferSqueeze(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  std::optional<std::vector<int64_t>> axes;
  if (IntsComputedAtRunTime(ctx, "axes", 1)) {
    // Axes known only at run time: the rank drops by their count, which must be static.
    TPC_ASSIGN_OR_RETURN(const int64_t count, RunTimeAxesCount(ctx));
    if (count > rank) {
      return ctx.Error(absl::StrCat(count, " axes to squeeze from ", ir::DimsToString(*in)));
    }
    if (count > 0) {
      // The dims are known when exactly `count` dims are 1 and the others static.
      std::optional<std::vector<int64_t>> dims = StaticShape(*in);
      if (dims.has_value() && std::count(dims->begin(), dims->end(), 1) == count) {
        Dims out;
        for (int64_t d : *dims) {
          if (d != 1) out.push_back(Dim(d));
        }
        SetRearranged(ctx, std::move(out));
      } else {
        SetRearranged(ctx, Dims(static_cast<size_t>(rank - count)));
      }
      return absl::OkStatus();
    }
    // No axes: every dim that is 1, as below.
  } else {
    TPC_ASSIGN_OR_RETURN(axes, IntsFromAttrOrInput(ctx, "axes", 1));
  }
  Dims out;
  if (!axes.has_value() || axes->empty()) {
    // Every dim that is 1. Symbolic dims are taken to be more than 1; an unknown dim
    // leaves the rank unknown.
    for (const Dim& d : *in) {
      if (d.is_unknown()) {
        SetRearranged(ctx, std::nullopt);
        return absl::OkStatus();
      }
      if (!(d.is_static() && d.value() == 1)) out.push_back(d);
    }
  } else {
    TPC_ASSIGN_OR_RETURN(std::vector<int64_t> sorted, NormalizeAxes(ctx, *axes, rank));
    for (int64_t k = 0; k < rank; ++k) {
      const Dim& d = (*in)[static_cast<size_t>(k)];
      if (!std::binary_search(sorted.begin(), sorted.end(), k)) {
        out.push_back(d);
      } else if (d.is_static() && d.value() != 1) {
        return ctx.Error(
            absl::StrCat("cannot squeeze dim ", k, " of ", ir::DimsToString(*in), " (not 1)"));
      }
    }
  }
  SetRearranged(ctx, std::move(out));
  return absl::OkStatus();
}

absl::Status InferUnsqueeze(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  if (IntsComputedAtRunTime(ctx, "axes", 1)) {
    // Axes known only at run time: the rank grows by their count, which must be static;
    // where the new dims go is unknown.
    TPC_ASSIGN_OR_RETURN(const int64_t count, RunTimeAxesCount(ctx));
    const bool all_ones = std::all_of(in->begin(), in->end(),
                                      [](const Dim& d) { return d.is_static() && d.value() == 1; });
    const size_t out_rank = in->size() + static_cast<size_t>(count);
    if (count == 0) {
      SetRearranged(ctx, *in);
    } else if (all_ones) {  // a scalar or all-1 input: every dim is 1 wherever the axes are
      SetRearranged(ctx, Dims(out_rank, Dim(1)));
    } else {
      SetRearranged(ctx, Dims(out_rank));
    }
    return absl::OkStatus();
  }
  TPC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes,
                       IntsFromAttrOrInput(ctx, "axes", 1));
  if (!axes.has_value()) return ctx.Error("missing axes");
  const int64_t rank = static_cast<int64_t>(in->size() + axes->size());
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> sorted, NormalizeAxes(ctx, *axes, rank));
  Dims out;
  size_t next = 0;
  for (int64_t k = 0; k < rank; ++k) {
    if (std::binary_search(sorted.begin(), sorted.end(), k)) {
      out.push_back(Dim(1));
    } else {
      out.push_back((*in)[next++]);
    }
  }
  SetRearranged(ctx, std::move(out));
  return absl::OkStatus();
}

absl::Status InferTranspose(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (!ctx.node().has_attr("perm")) {
    for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return ctx.Error(absl::StrCat("perm [", absl::StrJoin(perm, ", "), "] does not fit ",
                                  ir::DimsToString(*in)));
  }
  // A permutation of 0 .. rank - 1: ONNX's shape inference and onnxruntime refuse
  // negative entries (torch's TorchScript export of Mamba 2 writes [0, -2, -1, 1]).
  if (std::any_of(perm.begin(), perm.end(), [](int64_t p) { return p < 0; })) {
    return ctx.Error(absl::StrCat(
        "perm [", absl::StrJoin(perm, ", "),
        "] has a negative entry; a Transpose's perm is a permutation of 0 to ", rank - 1));
  }
  std::vector<int64_t> check = perm;
  TPC_ASSIGN_OR_RETURN(check, NormalizeAxes(ctx, check, rank));
  Dims out;
  for (int64_t p : perm) out.push_back((*in)[static_cast<size_t>(p)]);
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, std::move(out)));
  std::optional<std::vector<int64_t>> dims = StaticShape(ctx.input_type(0).shape);
  const auto& value = ctx.input_value(0);
  if (value.has_value() && dims.has_value()) {
    // Output element at o reads the input at i with i[perm[k]] = o[k].
    std::vector<int64_t> out_dims;
    for (int64_t p : perm) out_dims.push_back((*dims)[static_cast<size_t>(p)]);
    const std::vector<int64_t> in_strides = Strides(*dims);
    const std::vector<int64_t> out_strides = Strides(out_dims);
    Dims moved(value->size());
    for (size_t f = 0; f < moved.size(); ++f) {
      int64_t src = 0;
      for (size_t k = 0; k < perm.size(); ++k) {
        const int64_t o = static_cast<int64_t>(f) / out_strides[k] % out_dims[k];
        src += o * in_strides[static_cast<size_t>(perm[k])];
      }
      moved[f] = (*value)[static_cast<size_t>(src)];
    }
    MaybeSetValue(ctx, 0, std::move(moved));
  }
  return absl::OkStatus();
}

absl::Status InferExpand(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const auto& in = ctx.input_type(0).shape;
  const DType t = ctx.input_type(0).dtype;
  const auto& target = ctx.input_value(1);
  if (!target.has_value() || !in.has_value()) {
    const auto& ts = ctx.input_type(1).shape;
    if (in.has_value() && ts.has_value() && ts->size() == 1 && (*ts)[0].is_static()) {
      const size_t rank = std::max(in->size(), static_cast<size_t>((*ts)[0].value()));
      ctx.set_output_type(0, TensorType(t, Dims(rank)));
    } else {
      SetUnknownRank(ctx, 0, t);
    }
    return absl::OkStatus();
  }
  TPC_ASSIGN_OR_RETURN(Dims out, BroadcastShapes(ctx, *in, *target));
  ctx.set_output_type(0, TensorType(t, out));
  const auto& value = ctx.input_value(0);
  if (value.has_value() && value->size() == 1) {
    const Dim n = ir::Product(out);
    if (n.is_static() && n.value() <= kMaxKnownValueElements) {
      MaybeSetValue(ctx, 0, Dims(static_cast<size_t>(n.value()), (*value)[0]));
    }
  } else if (value.has_value()) {
    MaybeSetValue(ctx, 0, *value);
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
