// Indexing, joining and splitting: Slice, Gather, GatherElements, GatherND, Scatter*,
// Concat, Split, Tile, Pad, CenterCropPad. Slices, gathers and concatenations of known values are
// evaluated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules.h"
#include "tpc/util/checked_math.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// Ends at or beyond this are "to the end" (exporters write INT64_MAX or INT32_MAX).
constexpr int64_t kToEnd = INT32_MAX;

// Merges two dims that must be equal (Concat's other dims); nullopt on a static mismatch.
std::optional<Dim> MergeEqual(const Dim& a, const Dim& b) {
  if (a.is_unknown() && b.is_unknown()) return Dim::UnknownFrom(a, b);
  if (a == b || b.is_unknown()) return a;
  if (a.is_unknown()) return b;
  if (a.is_static() && b.is_static()) return std::nullopt;
  return a.is_static() ? a : b;
}

struct SliceRange {
  Dim size;
  // Static start and step when the dim is static (for slicing known values).
  int64_t start = 0;
  int64_t step = 1;
  bool is_static = false;
};

// The length of dim `d` sliced by [start:end:step].
SliceRange SliceDim(const Dim& d, const Dim& start, const Dim& end, int64_t step) {
  SliceRange r;
  if (d.is_static() && start.is_static() && end.is_static()) {
    const int64_t n = d.value();
    int64_t s = start.value();
    int64_t e = end.value();
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
    }
    const int64_t len = step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    r.size = Dim(std::max<int64_t>(0, len));
    r.start = s;
    r.step = step;
    r.is_static = true;
    return r;
  }
  if (step != 1) return r;  // unknown
  // Symbolic: a static start or end is taken to lie within the dim; negative ones count
  // from its end.
  auto position = [&d](const Dim& p, bool is_end) {
    if (!p.is_static()) return p;
    if (is_end && p.value() >= kToEnd) return d;
    if (p.value() < 0) return d + p;
    return p;
  };
  r.size = position(end, true) - position(start, false);
  return r;
}

// Concatenation of fully known values of any rank (static shapes).
void ConcatValues(InferenceContext& ctx, int64_t axis, const Dims& out) {
  std::optional<std::vector<int64_t>> out_dims = StaticShape(out);
  if (!out_dims.has_value()) return;
  std::vector<std::vector<int64_t>> dims;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    std::optional<std::vector<int64_t>> d = StaticShape(ctx.input_type(i).shape);
    if (!d.has_value() || !ctx.input_value(i).has_value()) return;
    dims.push_back(*d);
  }
  const std::vector<int64_t> out_strides = Strides(*out_dims);
  int64_t count = 1;
  for (int64_t d : *out_dims) count *= d;
  if (count > kMaxKnownValueElements) return;
  Dims joined(static_cast<size_t>(count));
  const size_t ax = static_cast<size_t>(axis);
  for (int64_t f = 0; f < count; ++f) {
    std::vector<int64_t> o(out_dims->size());
    for (size_t k = 0; k < o.size(); ++k) o[k] = f / out_strides[k] % (*out_dims)[k];
    size_t i = 0;
    while (o[ax] >= dims[i][ax]) o[ax] -= dims[i++][ax];
    const std::vector<int64_t> in_strides = Strides(dims[i]);
    int64_t src = 0;
    for (size_t k = 0; k < o.size(); ++k) src += o[k] * in_strides[k];
    joined[static_cast<size_t>(f)] =
        (*ctx.input_value(static_cast<int>(i)))[static_cast<size_t>(src)];
  }
  MaybeSetValue(ctx, 0, std::move(joined));
}

}  // namespace

absl::Status InferSlice(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  const DType t = ctx.input_type(0).dtype;
  const ir::Node& node = ctx.node();
  // Starts and ends as dims (they may be symbolic), axes and steps as integers.
  std::optional<Dims> starts;
  std::optional<Dims> ends;
  std::optional<std::vector<int64_t>> axes;
  std::optional<std::vector<int64_t>> steps;
  auto to_dims = [](const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); };
  if (node.has_attr("starts")) {  // opset < 10
    starts = to_dims(node.attr_ints("starts"));
    ends = to_dims(node.attr_ints("ends"));
    if (node.has_attr("axes")) axes = node.attr_ints("axes");
  } else {
    TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
    starts = ctx.input_value(1);
    ends = ctx.input_value(2);
    if (ctx.has_input(3)) {
      axes = StaticInts(ctx, 3);
      // Axes known only at run time: any dim may be sliced, so all are unknown.
      if (!axes.has_value()) {
        ctx.set_output_type(0, TensorType(t, Dims(in->size())));
        return absl::OkStatus();
      }
    }
    if (ctx.has_input(4)) steps = StaticInts(ctx, 4);
  }
  // Bounds or steps known only at run time: the sliced dims are unknown.
  if (!starts.has_value() || !ends.has_value() || (ctx.has_input(4) && !steps.has_value())) {
    // Which dims change is unknown unless the axes are: those become unknown.
    Dims out = *in;
    if (axes.has_value()) {
      for (int64_t a : *axes) {
        TPC_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
        out[static_cast<size_t>(a)] = Dim();
      }
    } else {
      out.assign(in->size(), Dim());
    }
    ctx.set_output_type(0, TensorType(t, std::move(out)));
    return absl::OkStatus();
  }
  const size_t n = starts->size();
  if (!axes.has_value()) {
    axes.emplace();
    for (size_t k = 0; k < n; ++k) axes->push_back(static_cast<int64_t>(k));
  }
  if (!steps.has_value()) steps = std::vector<int64_t>(n, 1);
  if (ends->size() != n || axes->size() != n || steps->size() != n) {
    return ctx.Error(absl::StrCat("starts, ends, axes and steps differ in length (", n, ", ",
                                  ends->size(), ", ", axes->size(), ", ", steps->size(), ")"));
  }
  Dims out = *in;
  // Per-axis static start and step, for slicing a known value.
  std::vector<int64_t> first(static_cast<size_t>(rank), 0);
  std::vector<int64_t> stride(static_cast<size_t>(rank), 1);
  bool static_slice = true;
  for (size_t k = 0; k < n; ++k) {
    TPC_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, (*axes)[k], rank));
    if ((*steps)[k] == 0) return ctx.Error("slice step is 0");
    SliceRange r = SliceDim((*in)[static_cast<size_t>(a)], (*starts)[k], (*ends)[k], (*steps)[k]);
    out[static_cast<size_t>(a)] = r.size;
    first[static_cast<size_t>(a)] = r.start;
    stride[static_cast<size_t>(a)] = r.step;
    static_slice &= r.is_static;
  }
  ctx.set_output_type(0, TensorType(t, out));
  const auto& value = ctx.input_value(0);
  std::optional<std::vector<int64_t>> in_dims = StaticShape(*in);
  std::optional<std::vector<int64_t>> out_dims = StaticShape(out);
  if (value.has_value() && static_slice && in_dims.has_value() && out_dims.has_value()) {
    const std::vector<int64_t> in_strides = Strides(*in_dims);
    const std::vector<int64_t> out_strides = Strides(*out_dims);
    int64_t count = 1;
    for (int64_t d : *out_dims) count *= d;
    Dims sliced(static_cast<size_t>(count));
    for (int64_t f = 0; f < count; ++f) {
      int64_t src = 0;
      for (size_t k = 0; k < out_dims->size(); ++k) {
        const int64_t o = f / out_strides[k] % (*out_dims)[k];
        src += (first[k] + o * stride[k]) * in_strides[k];
      }
      sliced[static_cast<size_t>(f)] = (*value)[static_cast<size_t>(src)];
    }
    MaybeSetValue(ctx, 0, std::move(sliced));
  }
  return absl::OkStatus();
}

absl::Status InferGather(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* data, RankedInput(ctx, 0));
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DType t = ctx.input_type(0).dtype;
  const auto& indices = ctx.input_type(1).shape;
  const int64_t rank = static_cast<int64_t>(data->size());
  if (rank == 0) return ctx.Error("cannot gather from a scalar");
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  if (!indices.has_value()) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  Dims out(data->begin(), data->begin() + axis);
  out.insert(out.end(), indices->begin(), indices->end());
  out.insert(out.end(), data->begin() + axis + 1, data->end());
  ctx.set_output_type(0, TensorType(t, out));
  const auto& value = ctx.input_value(0);
  std::optional<std::vector<int64_t>> idx = StaticInts(ctx, 1);
  if (rank == 1 && value.has_value() && idx.has_value()) {
    Dims gathered;
    const int64_t size = static_cast<int64_t>(value->size());
    for (int64_t i : *idx) {
      if (i < -size || i >= size) {
        return ctx.Error(absl::StrCat("index ", i, " is out of range for ", size, " elements"));
      }
      gathered.push_back((*value)[static_cast<size_t>(i < 0 ? i + size : i)]);
    }
    MaybeSetValue(ctx, 0, std::move(gathered));
  }
  return absl::OkStatus();
}

absl::Status InferGatherElements(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TensorType type = ctx.input_type(1);
  type.dtype = ctx.input_type(0).dtype;
  ctx.set_output_type(0, std::move(type));
  return absl::OkStatus();
}

absl::Status InferGatherND(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DType t = ctx.input_type(0).dtype;
  const auto& data = ctx.input_type(0).shape;
  const auto& indices = ctx.input_type(1).shape;
  const int64_t batch = ctx.node().attr_int("batch_dims", 0);
  if (!data.has_value() || !indices.has_value() || indices->empty() ||
      !indices->back().is_static()) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  const int64_t last = indices->back().value();
  if (batch < 0 || batch + last > static_cast<int64_t>(data->size())) {
    return ctx.Error(absl::StrCat("indices ", ir::DimsToString(*indices), " do not fit data ",
                                  ir::DimsToString(*data)));
  }
  Dims out(indices->begin(), indices->end() - 1);
  out.insert(out.end(), data->begin() + batch + last, data->end());
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

// NonZero(x): int64 [rank of x, count], the count of non-zero elements sized by the data
// (the tokens a mixture of experts routes to one expert: Dim::SizedByData).
absl::Status InferNonZero(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const auto& x = ctx.input_type(0).shape;
  const Dim rank = x.has_value() ? Dim(static_cast<int64_t>(x->size())) : Dim::Unknown();
  ctx.set_output_type(0, TensorType(DType::kI64, {rank, Dim::SizedByData()}));
  return absl::OkStatus();
}

// Compress(x, condition, axis): the selected slices along the axis, or of the flattened
// x without one; their count is sized by the data.
absl::Status InferCompress(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DType t = ctx.input_type(0).dtype;
  if (!ctx.node().has_attr("axis")) {
    ctx.set_output_type(0, TensorType(t, {Dim::SizedByData()}));
    return absl::OkStatus();
  }
  if (!ctx.input_type(0).shape) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  const Dims* x = &*ctx.input_type(0).shape;
  const int64_t rank = static_cast<int64_t>(x->size());
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  Dims out = *x;
  out[static_cast<size_t>(axis)] = Dim::SizedByData();
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

// OneHot(indices, depth, values, axis): the indices' shape with a dim of `depth` inserted
// at the axis, the values' type. A constant depth (of any numeric type, as ONNX allows,
// truncated)
// or a known shape value gives the dim; otherwise it is unknown.
absl::Status InferOneHot(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  if (!ctx.input_type(0).shape) {
    SetUnknownRank(ctx, 0, ctx.input_type(2).dtype);
    return absl::OkStatus();
  }
  const Dims* indices = &*ctx.input_type(0).shape;
  const int64_t rank = static_cast<int64_t>(indices->size()) + 1;
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
  Dim depth = Dim::Unknown();
  if (const ir::Tensor* t = ctx.input_constant(1); t != nullptr && t->has_data()) {
    if (t->num_elements() != 1) return ctx.Error("depth must hold one element");
    // Truncated to an integer, as the kernels read it.
    const double d = std::trunc(t->ElementAsDouble(0));
    if (!(d >= 0 && d <= static_cast<double>(kMaxTensorElements))) {
      return ctx.Error(absl::StrCat("depth ", d, " is negative or too large"));
    }
    depth = Dim(static_cast<int64_t>(d));
  } else if (const auto& v = ctx.input_value(1); v.has_value() && v->size() == 1) {
    depth = (*v)[0];
    if (depth.is_static() && depth.value() < 0) {
      return ctx.Error(absl::StrCat("depth ", depth.value(), " is negative or too large"));
    }
  }
  Dims out(indices->begin(), indices->end());
  out.insert(out.begin() + axis, depth);
  ctx.set_output_type(0, TensorType(ctx.input_type(2).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferScatter(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  ctx.set_output_type(0, ctx.input_type(0));
  return absl::OkStatus();
}

absl::Status InferConcat(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* first, RankedInput(ctx, 0));
  const DType t = ctx.input_type(0).dtype;
  const int64_t rank = static_cast<int64_t>(first->size());
  if (!ctx.node().has_attr("axis")) return ctx.Error("missing attribute 'axis'");
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  Dims out = *first;
  std::optional<Dims> value = Dims();
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, i));
    if (static_cast<int64_t>(in->size()) != rank) {
      return ctx.Error(absl::StrCat("cannot concatenate ", ir::DimsToString(*first), " with ",
                                    ir::DimsToString(*in), " (ranks differ)"));
    }
    for (int64_t k = 0; k < rank; ++k) {
      const size_t kk = static_cast<size_t>(k);
      if (i == 0) continue;
      if (k == axis) {
        out[kk] = out[kk] + (*in)[kk];
        continue;
      }
      std::optional<Dim> d = MergeEqual(out[kk], (*in)[kk]);
      if (!d.has_value()) {
        return ctx.Error(absl::StrCat("cannot concatenate ", ir::DimsToString(*first), " with ",
                                      ir::DimsToString(*in), " on axis ", axis));
      }
      out[kk] = *d;
    }
    // Known values join; an input of static length without a value adds unknown elements.
    if (value.has_value() && rank == 1) {
      if (ctx.input_value(i).has_value()) {
        const Dims& v = *ctx.input_value(i);
        value->insert(value->end(), v.begin(), v.end());
      } else if ((*in)[0].is_static() && (*in)[0].value() <= kMaxKnownValueElements) {
        value->insert(value->end(), static_cast<size_t>((*in)[0].value()), Dim());
      } else {
        value.reset();
      }
    }
  }
  ctx.set_output_type(0, TensorType(t, out));
  if (rank == 1 && value.has_value() &&
      std::any_of(value->begin(), value->end(), [](const Dim& d) { return !d.is_unknown(); })) {
    MaybeSetValue(ctx, 0, std::move(*value));
  } else if (rank > 1) {
    ConcatValues(ctx, axis, out);
  }
  return absl::OkStatus();
}

absl::Status InferSplit(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const DType t = ctx.input_type(0).dtype;
  const int64_t rank = static_cast<int64_t>(in->size());
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  const Dim& d = (*in)[static_cast<size_t>(axis)];
  const int outputs = ctx.num_outputs();
  const std::optional<int64_t> split_length = StaticLength(ctx, 1);
  if (IntsComputedAtRunTime(ctx, "split", 1) && split_length != 0) {
    // Sizes known only at run time: one part per output, each of unknown length on the
    // axis (unless there is one part, or nothing to split).
    if (ctx.node().has_attr("num_outputs")) {
      return ctx.Error("has both split sizes and num_outputs; ONNX allows one of them");
    }
    if (ctx.input_type(1).dtype != DType::kI64) {
      return ctx.Error(absl::StrCat("split sizes are ", ir::DTypeName(ctx.input_type(1).dtype),
                                    "; ONNX wants int64"));
    }
    if (split_length.has_value() && *split_length != outputs) {
      return ctx.Error(
          absl::StrCat("split has ", *split_length, " sizes for ", outputs, " outputs"));
    }
    const bool whole = outputs == 1 || (d.is_static() && d.value() == 0);
    for (int k = 0; k < outputs; ++k) {
      Dims out = *in;
      out[static_cast<size_t>(axis)] = whole ? d : Dim();
      ctx.set_output_type(k, TensorType(t, std::move(out)));
    }
    return absl::OkStatus();
  }
  std::optional<std::vector<int64_t>> split;
  if (!IntsComputedAtRunTime(ctx, "split", 1)) {
    TPC_ASSIGN_OR_RETURN(split, IntsFromAttrOrInput(ctx, "split", 1));
  }
  Dims sizes;
  if (split.has_value() && !split->empty()) {
    if (ctx.node().has_attr("num_outputs")) {
      return ctx.Error("has both split sizes and num_outputs; ONNX allows one of them");
    }
    if (static_cast<int>(split->size()) != outputs) {
      return ctx.Error(absl::StrCat("split [", absl::StrJoin(*split, ", "), "] has ", split->size(),
                                    " parts for ", outputs, " outputs"));
    }
    int64_t total = 0;
    for (int64_t s : *split) {
      if (s < 0) return ctx.Error(absl::StrCat("negative split size ", s));
      sizes.push_back(Dim(s));
      total += s;
    }
    if (d.is_static() && d.value() != total) {
      return ctx.Error(absl::StrCat("split sizes [", absl::StrJoin(*split, ", "),
                                    "] do not add up to ", d.value()));
    }
  } else {
    // Opset 18+: with no split sizes, num_outputs (an int) must say how many parts.
    const auto& attrs = ctx.node().attrs();
    auto num = attrs.find("num_outputs");
    if (ctx.opset() >= 18 &&
        (num == attrs.end() || !std::holds_alternative<int64_t>(num->second))) {
      return ctx.Error("needs the split input or an int attribute num_outputs (opset 18+)");
    }
    const int64_t parts = ctx.node().attr_int("num_outputs", outputs);
    if (parts != outputs || parts <= 0) {
      return ctx.Error(absl::StrCat("num_outputs ", parts, " but ", outputs, " outputs"));
    }
    if (d.is_static()) {
      // Opset 18: the last chunk may be smaller.
      const int64_t chunk = (d.value() + parts - 1) / parts;
      for (int64_t k = 0; k < parts; ++k) {
        sizes.push_back(Dim(std::max<int64_t>(0, std::min(chunk, d.value() - k * chunk))));
      }
    } else {
      sizes.assign(static_cast<size_t>(parts),
                   d.DivExact(Dim(parts)).value_or(Dim::UnknownFrom(d, Dim(parts))));
    }
  }
  for (int k = 0; k < outputs; ++k) {
    Dims out = *in;
    out[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(k)];
    ctx.set_output_type(k, TensorType(t, std::move(out)));
  }
  return absl::OkStatus();
}

absl::Status InferTile(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DType t = ctx.input_type(0).dtype;
  // 1-D, as ONNX says and onnxruntime checks (torch's TorchScript export of Mamba writes
  // [1, 1] repeats, which onnxruntime refuses when it runs).
  if (const auto& r = ctx.input_type(1).shape; r && r->size() != 1) {
    return ctx.Error(absl::StrCat("repeats is ", ctx.input_type(1).ToString(),
                                  "; a Tile's repeats is 1-D, one count per dim of the input"));
  }
  const auto& repeats = ctx.input_value(1);
  if (!repeats.has_value()) {
    ctx.set_output_type(0, TensorType(t, Dims(in->size())));
    return absl::OkStatus();
  }
  if (repeats->size() != in->size()) {
    return ctx.Error(
        absl::StrCat("repeats of length ", repeats->size(), " for ", ir::DimsToString(*in)));
  }
  Dims out(in->size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = (*in)[k] * (*repeats)[k];
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

// x's dims, those of `axes` (default all) the known values of `shape` (else unknown).
absl::Status InferCenterCropPad(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const int64_t rank = static_cast<int64_t>(in->size());
  std::vector<int64_t> axes;
  if (ctx.node().has_attr("axes")) {
    axes = ctx.node().attr_ints("axes");
  } else {
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  }
  const std::optional<Dims>& sizes = ctx.input_value(1);
  if (sizes.has_value() && sizes->size() != axes.size()) {
    return ctx.Error(
        absl::StrCat("shape has ", sizes->size(), " sizes for ", axes.size(), " axes"));
  }
  Dims out = *in;
  for (size_t k = 0; k < axes.size(); ++k) {
    TPC_ASSIGN_OR_RETURN(const int64_t a, NormalizeAxis(ctx, axes[k], rank));
    out[static_cast<size_t>(a)] = sizes.has_value() ? (*sizes)[k] : Dim::Unknown();
  }
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferPad(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* in, RankedInput(ctx, 0));
  const DType t = ctx.input_type(0).dtype;
  const int64_t rank = static_cast<int64_t>(in->size());
  std::optional<Dims> pads;
  if (ctx.node().has_attr("pads")) {  // opset < 11
    std::vector<int64_t> p = ctx.node().attr_ints("pads");
    pads = Dims(p.begin(), p.end());
  } else if (ctx.has_input(1)) {
    pads = ctx.input_value(1);
  } else {
    return ctx.Error("missing pads");
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    std::optional<std::vector<int64_t>> a = StaticInts(ctx, 3);
    if (!a.has_value()) {
      // Axes known only at run time: any dim may be padded, so all are unknown, unless
      // every pad is a known 0.
      const bool no_padding =
          pads.has_value() && std::all_of(pads->begin(), pads->end(), [](const Dim& p) {
            return p.is_static() && p.value() == 0;
          });
      ctx.set_output_type(0, TensorType(t, no_padding ? *in : Dims(in->size())));
      return absl::OkStatus();
    }
    axes = *a;
  } else {
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  }
  Dims out = *in;
  if (!pads.has_value()) {
    for (int64_t a : axes) {
      TPC_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
      out[static_cast<size_t>(a)] = Dim();
    }
  } else {
    if (pads->size() != 2 * axes.size()) {
      return ctx.Error(absl::StrCat(pads->size(), " pads for ", axes.size(), " axes"));
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      TPC_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[k], rank));
      Dim& d = out[static_cast<size_t>(a)];
      d = d + (*pads)[k] + (*pads)[k + axes.size()];
    }
  }
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
