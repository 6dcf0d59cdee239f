// Linear quantization: QuantizeLinear and DequantizeLinear keep x's dims; their element
// types come from the zero point, the scale or (opsets 21 and 23) `output_dtype`, which
// libonnx 1.12's older schemas do not know.
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::DType;
using ir::TensorType;

// Attribute `output_dtype` (0 or absent: none), or an error for a type tpc lacks.
absl::StatusOr<DType> OutputDtypeAttr(const InferenceContext& ctx) {
  const int64_t t = ctx.node().attr_int("output_dtype", 0);
  if (t == 0) return DType::kUndefined;
  if (t < 0 || t > INT32_MAX || !ir::IsKnownOnnxDType(static_cast<int32_t>(t))) {
    return ctx.Error(absl::StrCat("unsupported output_dtype ", t));
  }
  return static_cast<DType>(t);
}

// Output 0: x's dims, element type `t`.
absl::Status SetLikeX(InferenceContext& ctx, DType t) {
  TensorType type = ctx.input_type(0);
  type.dtype = t;
  ctx.set_output_type(0, std::move(type));
  return absl::OkStatus();
}

}  // namespace

// The zero point's type, else output_dtype, else uint8.
absl::Status InferQuantizeLinear(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TPC_ASSIGN_OR_RETURN(DType t, OutputDtypeAttr(ctx));
  if (ctx.has_input(2)) {
    const DType zp = ctx.input_type(2).dtype;
    if (t != DType::kUndefined && t != zp) {
      return ctx.Error(absl::StrCat("output_dtype ", ir::DTypeName(t),
                                    " differs from the zero point's type ", ir::DTypeName(zp)));
    }
    t = zp;
  }
  return SetLikeX(ctx, t == DType::kUndefined ? DType::kU8 : t);
}

// output_dtype (opset 23), else the scale's type (opset 19 on), else f32.
absl::Status InferDequantizeLinear(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TPC_ASSIGN_OR_RETURN(DType t, OutputDtypeAttr(ctx));
  if (t == DType::kUndefined) t = ctx.opset() >= 19 ? ctx.input_type(1).dtype : DType::kF32;
  return SetLikeX(ctx, t);
}

}  // namespace tpc::onnx::shape_rules
