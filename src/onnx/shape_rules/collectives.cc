// Shape rules of the collectives of the `tpc` domain (docs/collectives.md): the ops
// that per-rank plans use to communicate, Rank, and CheckIndices.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {

namespace {

absl::StatusOr<int64_t> GroupSize(const InferenceContext& ctx) {
  const int64_t n = ctx.node().attr_int("group_size", 0);
  if (n < 1) return ctx.Error("attribute group_size must be a positive integer");
  return n;
}

absl::Status CheckReduce(const InferenceContext& ctx) {
  const std::string r = ctx.node().attr_string("reduce", "sum");
  if (r != "sum" && r != "max" && r != "min" && r != "avg") {
    return ctx.Error(absl::StrCat("attribute reduce is '", r, "', not one of sum, max, min, avg"));
  }
  return absl::OkStatus();
}

// Dim `d` divided by `n`, or an error when it is not known to divide.
absl::StatusOr<ir::Dim> DivideDim(const InferenceContext& ctx, const ir::Dim& d, int64_t n) {
  if (d.is_unknown()) return ir::Dim();
  if (d.is_static() && d.value() % n != 0) {
    return ctx.Error(absl::StrCat("dim ", d.ToString(), " does not divide by group_size ", n));
  }
  // Symbolic dims split exactly (the plan asserts it): `seq` over 4 ranks is `seq/4`.
  return d.DivideBy(n);
}

}  // namespace

absl::Status InferAllReduce(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  TPC_RETURN_IF_ERROR(GroupSize(ctx).status());
  TPC_RETURN_IF_ERROR(CheckReduce(ctx));
  ctx.set_output_type(0, ctx.input_type(0));
  return absl::OkStatus();
}

absl::Status InferAllGather(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* dims, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(int64_t n, GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0),
                                                   static_cast<int64_t>(dims->size())));
  // `parts` < N: one copy of each of the parts groups of ranks hold (S(d@parts)).
  const int64_t parts = ctx.node().attr_int("parts", n);
  if (parts < 1 || parts > n || n % parts != 0) {
    return ctx.Error(absl::StrCat("parts ", parts, " does not divide group_size ", n));
  }
  Dims out = *dims;
  out[static_cast<size_t>(axis)] = out[static_cast<size_t>(axis)] * ir::Dim(parts);
  ctx.set_output_type(0, ir::TensorType(ctx.input_type(0).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferReduceScatter(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* dims, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(int64_t n, GroupSize(ctx));
  TPC_RETURN_IF_ERROR(CheckReduce(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0),
                                                   static_cast<int64_t>(dims->size())));
  Dims out = *dims;
  TPC_ASSIGN_OR_RETURN(out[static_cast<size_t>(axis)],
                       DivideDim(ctx, out[static_cast<size_t>(axis)], n));
  ctx.set_output_type(0, ir::TensorType(ctx.input_type(0).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferAllToAll(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* dims, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(int64_t n, GroupSize(ctx));
  const int64_t rank = static_cast<int64_t>(dims->size());
  TPC_ASSIGN_OR_RETURN(int64_t split,
                       NormalizeAxis(ctx, ctx.node().attr_int("split_axis", 0), rank));
  TPC_ASSIGN_OR_RETURN(int64_t concat,
                       NormalizeAxis(ctx, ctx.node().attr_int("concat_axis", 0), rank));
  Dims out = *dims;
  TPC_ASSIGN_OR_RETURN(out[static_cast<size_t>(split)],
                       DivideDim(ctx, out[static_cast<size_t>(split)], n));
  out[static_cast<size_t>(concat)] = out[static_cast<size_t>(concat)] * ir::Dim(n);
  ctx.set_output_type(0, ir::TensorType(ctx.input_type(0).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferShard(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* dims, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(int64_t n, GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0),
                                                   static_cast<int64_t>(dims->size())));
  // Each block cut in `parts` (default N; see docs/collectives.md).
  const int64_t parts = ctx.node().attr_int("parts", n);
  const int64_t stride = ctx.node().attr_int("stride", 1);
  if (parts < 1 || stride < 1 || parts * stride > n) {
    return ctx.Error(absl::StrCat("parts ", parts, " with stride ", stride, " need ",
                                  parts * stride, " ranks or fewer; group_size is ", n));
  }
  Dims out = *dims;
  TPC_ASSIGN_OR_RETURN(out[static_cast<size_t>(axis)],
                       DivideDim(ctx, out[static_cast<size_t>(axis)], parts));
  ctx.set_output_type(0, ir::TensorType(ctx.input_type(0).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferCheckIndices(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const ir::DType t = ctx.input_type(0).dtype;
  if (t != ir::DType::kI64 && t != ir::DType::kI32 && t != ir::DType::kUndefined) {
    return ctx.Error(absl::StrCat("input must be i64 or i32, not ", ir::DTypeName(t)));
  }
  if (ctx.node().attr_int("dim", 0) < 1) return ctx.Error("attribute dim must be positive");
  ctx.set_output_type(0, ctx.input_type(0));
  return absl::OkStatus();
}

absl::Status InferRank(InferenceContext& ctx) {
  ctx.set_output_type(0, ir::TensorType(ir::DType::kI64, {}));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
