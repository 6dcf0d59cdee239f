// Convolutions and pools over a sliding window (Conv, MaxPool, AveragePool, LpPool, and
// Col2Im, which libonnx 1.12 predates): a rule
// of tpc's own rather than libonnx's, so that symbolic dims flow (the batch, and a length
// under a stride-1 window: `seq-4`) and so that what libonnx 1.12 does not know is right
// (pool dilations, added at opset 19; ceil_mode never starting a window in the padding).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// Attribute `name` with `n` values, `def` repeated when absent.
absl::StatusOr<std::vector<int64_t>> PerDim(const InferenceContext& ctx, const std::string& name,
                                            size_t n, int64_t def, int64_t min) {
  if (!ctx.node().has_attr(name)) return std::vector<int64_t>(n, def);
  std::vector<int64_t> v = ctx.node().attr_ints(name);
  if (v.size() != n) {
    return ctx.Error(
        absl::StrCat("attribute '", name, "' has ", v.size(), " values, ", n, " expected"));
  }
  for (int64_t x : v) {
    if (x < min) return ctx.Error(absl::StrCat("attribute '", name, "' has a value below ", min));
  }
  return v;
}

// One spatial output dim: exact when the input dim is static; symbolic when the window
// moves one element at a time (NOTSET or VALID: in + pads - extent + 1; SAME: in).
absl::StatusOr<Dim> WindowDim(const InferenceContext& ctx, const Dim& in, int64_t k, int64_t stride,
                              int64_t dilation, int64_t pad_begin, int64_t pad_end,
                              const std::string& auto_pad, bool ceil_mode) {
  const int64_t extent = (k - 1) * dilation + 1;
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "VALID") pad_begin = pad_end = 0;
  if (!in.is_static()) {
    // (ceil_mode with stride 1 differs only when the end padding holds a whole window.)
    if (stride != 1 || in.is_unknown() || (ceil_mode && pad_end >= extent)) return Dim::Unknown();
    return same ? in : in + Dim(pad_begin + pad_end - extent + 1);
  }
  const int64_t n = in.value();
  if (same) return Dim((n + stride - 1) / stride);
  const int64_t span = n + pad_begin + pad_end - extent;
  if (span < 0) {
    return ctx.Error(absl::StrCat("the window (", extent, " elements) is larger than the ",
                                  "padded input (", n + pad_begin + pad_end, ")"));
  }
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= n + pad_begin) --out;
  return Dim(out);
}

// [N, channels, spatial...] for input 0 under a window of `kernel` taps.
absl::StatusOr<Dims> WindowShape(const InferenceContext& ctx, const Dims& x, const Dim& channels,
                                 const std::vector<int64_t>& kernel) {
  const size_t s = x.size() - 2;
  if (kernel.size() != s) {
    return ctx.Error(
        absl::StrCat("the kernel has ", kernel.size(), " spatial dims, the input ", s));
  }
  for (int64_t k : kernel) {
    if (k < 1) return ctx.Error("the kernel has an empty spatial dim");
  }
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> strides, PerDim(ctx, "strides", s, 1, 1));
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, PerDim(ctx, "dilations", s, 1, 1));
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PerDim(ctx, "pads", 2 * s, 0, 0));
  const std::string auto_pad = ctx.node().attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return ctx.Error(absl::StrCat("auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, ",
                                  "SAME_LOWER, VALID"));
  }
  const bool ceil_mode = ctx.node().attr_int("ceil_mode", 0) != 0;
  Dims out = {x[0], channels};
  for (size_t d = 0; d < s; ++d) {
    TPC_ASSIGN_OR_RETURN(Dim o, WindowDim(ctx, x[d + 2], kernel[d], strides[d], dilations[d],
                                          pads[d], pads[d + s], auto_pad, ceil_mode));
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

absl::Status InferConv(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  if (!x.shape || !w.shape) {
    SetUnknownRank(ctx, 0, x.dtype);
    return absl::OkStatus();
  }
  if (x.rank() < 3 || w.rank() != x.rank()) {
    return ctx.Error(absl::StrCat("X ", x.ToString(), " must be [N, C, spatial...] and W ",
                                  w.ToString(), " of the same rank"));
  }
  const int64_t group = ctx.node().attr_int("group", 1);
  const Dims& wd = *w.shape;
  const Dim& c = (*x.shape)[1];
  if (group < 1 || (c.is_static() && wd[1].is_static() && c.value() != wd[1].value() * group) ||
      (wd[0].is_static() && wd[0].value() % group != 0)) {
    return ctx.Error(absl::StrCat("X ", x.ToString(), " and W ", w.ToString(), " do not fit ",
                                  group, " groups"));
  }
  std::vector<int64_t> kernel;
  for (size_t d = 2; d < wd.size(); ++d) {
    if (!wd[d].is_static()) {
      // The kernel's size is a weight's dim, static in every export; without it the
      // output length is unknown.
      Dims out = {(*x.shape)[0], wd[0]};
      out.resize(x.shape->size(), Dim::Unknown());
      ctx.set_output_type(0, TensorType(x.dtype, std::move(out)));
      return absl::OkStatus();
    }
    kernel.push_back(wd[d].value());
  }
  if (ctx.node().has_attr("kernel_shape") && ctx.node().attr_ints("kernel_shape") != kernel) {
    return ctx.Error("attribute 'kernel_shape' differs from W's spatial dims");
  }
  TPC_ASSIGN_OR_RETURN(Dims out, WindowShape(ctx, *x.shape, wd[0], kernel));
  ctx.set_output_type(0, TensorType(x.dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferPool(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const TensorType& x = ctx.input_type(0);
  if (!ctx.node().has_attr("kernel_shape")) return ctx.Error("attribute 'kernel_shape' is missing");
  if (!x.shape) {
    SetUnknownRank(ctx, 0, x.dtype);
    if (ctx.num_outputs() > 1) SetUnknownRank(ctx, 1, DType::kI64);
    return absl::OkStatus();
  }
  if (x.rank() < 3)
    return ctx.Error(absl::StrCat("X ", x.ToString(), " must be [N, C, spatial...]"));
  TPC_ASSIGN_OR_RETURN(
      Dims out, WindowShape(ctx, *x.shape, (*x.shape)[1], ctx.node().attr_ints("kernel_shape")));
  // MaxPool's Indices: the argmax of each window.
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, TensorType(DType::kI64, out));
  ctx.set_output_type(0, TensorType(x.dtype, std::move(out)));
  return absl::OkStatus();
}

// [N, C * prod(block_shape), L] -> [N, C, image_shape...]; dims from the known values of
// image_shape and block_shape (unknown where they are not known).
absl::Status InferCol2Im(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  TPC_ASSIGN_OR_RETURN(const Dims* x, RankedInput(ctx, 0));
  const DType t = ctx.input_type(0).dtype;
  if (x->size() != 3) {
    return ctx.Error(absl::StrCat("input ", ir::DimsToString(*x), " must be [N, C * taps, L]"));
  }
  const std::optional<Dims>& image = ctx.input_value(1);
  const std::optional<std::vector<int64_t>> block = StaticInts(ctx, 2);
  std::optional<int64_t> spatial;
  if (image.has_value()) {
    spatial = static_cast<int64_t>(image->size());
  } else if (const auto& s = ctx.input_type(1).shape; s && s->size() == 1 && (*s)[0].is_static()) {
    spatial = (*s)[0].value();
  }
  if (!spatial.has_value()) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  Dims out = {(*x)[0], Dim::Unknown()};
  if (block.has_value() && (*x)[1].is_static()) {
    int64_t taps = 1;
    for (int64_t b : *block) taps *= b;
    if (taps <= 0 || (*x)[1].value() % taps != 0) {
      return ctx.Error(
          absl::StrCat("input ", ir::DimsToString(*x), " does not hold blocks of ", taps, " taps"));
    }
    out[1] = (*x)[1].value() / taps;
  }
  for (int64_t d = 0; d < *spatial; ++d) {
    out.push_back(image.has_value() ? (*image)[static_cast<size_t>(d)] : Dim::Unknown());
  }
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

// onnxruntime's CausalConvWithState: the output is the input's type; the present state
// [batch, channels, (k - 1) · dilation] from the weight's kernel size when it is known,
// else the past state's type.
absl::Status InferCausalConvWithState(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const TensorType& x = ctx.input_type(0);
  const auto& w = ctx.input_type(1).shape;
  if ((x.shape && x.shape->size() != 3) || (w && w->size() != 3)) {
    return ctx.Error("input must be [batch, channels, length] and weight [channels, 1, k]");
  }
  const int64_t dilation = ctx.node().attr_int("dilation", 1);
  if (dilation < 1 || dilation > (int64_t{1} << 32) ||
      (w && (*w)[2].is_static() && ((*w)[2].value() < 1 || (*w)[2].value() > (int64_t{1} << 20)))) {
    return ctx.Error(absl::StrCat("dilation ", dilation, " and the kernel size ",
                                  w ? ir::DimsToString(*w) : "?",
                                  " must be at least 1 (and at most 2^32, 2^20)"));
  }
  if (ctx.node().num_outputs() > 2) {
    return ctx.Error("state_update (output 2) is not supported (onnxruntime's CUDA kernel's)");
  }
  ctx.set_output_type(0, x);
  if (ctx.node().num_outputs() < 2) return absl::OkStatus();
  if (x.shape && w && (*w)[2].is_static()) {
    ctx.set_output_type(1, TensorType(x.dtype, {(*x.shape)[0], (*x.shape)[1],
                                                Dim(((*w)[2].value() - 1) * dilation)}));
  } else if (ctx.has_input(3)) {
    ctx.set_output_type(1, ctx.input_type(3));
  } else {
    SetUnknownRank(ctx, 1, x.dtype);
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
