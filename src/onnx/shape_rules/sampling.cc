// Operators that sample their input at computed coordinates: GridSample, AffineGrid and
// DeformConv. Rules of tpc's own: AffineGrid (opset 20) and DeformConv (19) are newer than
// libonnx 1.12, and GridSample's N-D form (20) is too; the batch and the grid's dims flow
// symbolically.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {

using ir::Dim;
using ir::TensorType;

// X [N, C, D1..Dr], grid [N, H1..Hr, r] -> [N, C, H1..Hr], X's type.
absl::Status InferGridSample(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TPC_ASSIGN_OR_RETURN(const Dims* x, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(const Dims* grid, RankedInput(ctx, 1));
  const size_t r = x->size() < 2 ? 0 : x->size() - 2;
  if (r < 1 || grid->size() != r + 2) {
    return ctx.Error(absl::StrCat("X ", ShapeString(*x), " and grid ", ShapeString(*grid),
                                  " do not fit: expected [N, C, D1..Dr] and [N, H1..Hr, r]"));
  }
  const Dim& last = grid->back();
  if (last.is_static() && last.value() != static_cast<int64_t>(r)) {
    return ctx.Error(
        absl::StrCat("the grid's last dim is ", last.value(), ", X has ", r, " spatial dims"));
  }
  Dims out{(*x)[0].is_unknown() ? (*grid)[0] : (*x)[0], (*x)[1]};
  out.insert(out.end(), grid->begin() + 1, grid->end() - 1);
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, out));
  return absl::OkStatus();
}

// theta [N, 2, 3] or [N, 3, 4], size (4 or 5 values) -> [N, H, W, 2] or [N, D, H, W, 3],
// theta's type; the spatial dims are those of `size` when known.
absl::Status InferAffineGrid(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TPC_ASSIGN_OR_RETURN(const Dims* theta, RankedInput(ctx, 0));
  if (theta->size() != 3 || !(*theta)[1].is_static() ||
      ((*theta)[1].value() != 2 && (*theta)[1].value() != 3)) {
    return ctx.Error(
        absl::StrCat("theta ", ShapeString(*theta), " is neither [N, 2, 3] nor [N, 3, 4]"));
  }
  const int64_t r = (*theta)[1].value();
  Dims out{(*theta)[0]};
  const auto& size = ctx.input_value(1);
  if (size && static_cast<int64_t>(size->size()) != r + 2) {
    return ctx.Error(absl::StrCat("size has ", size->size(), " values, theta needs ", r + 2));
  }
  for (int64_t d = 0; d < r; ++d) {
    out.push_back(size ? (*size)[static_cast<size_t>(d + 2)] : Dim::Unknown());
  }
  out.push_back(Dim(r));
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, out));
  return absl::OkStatus();
}

// X [N, C, ...], W [oC, C / group, k...], offset [N, ..., o...] -> [N, oC, o...], X's type:
// the output positions are the offset's (the operator requires them to match the window).
absl::Status InferDeformConv(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  TPC_ASSIGN_OR_RETURN(const Dims* x, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(const Dims* w, RankedInput(ctx, 1));
  TPC_ASSIGN_OR_RETURN(const Dims* offset, RankedInput(ctx, 2));
  if (x->size() < 3 || w->size() != x->size() || offset->size() != x->size()) {
    return ctx.Error(absl::StrCat("X ", ShapeString(*x), ", W ", ShapeString(*w), " and offset ",
                                  ShapeString(*offset), " must have the same rank, at least 3"));
  }
  Dims out{(*x)[0], (*w)[0]};
  out.insert(out.end(), offset->begin() + 2, offset->end());
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, out));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
