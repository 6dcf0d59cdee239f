// Linear quantization: QuantizeLinear and DequantizeLinear keep x's dims; their element
// types come from the zero point, the scale or (opsets 21 and 23) `output_dtype`, which
// libonnx 1.12's older schemas do not know. Block quantization: onnxruntime's
// GatherBlockQuantized.
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

// onnxruntime's GatherBlockQuantized (the builder's tied int4 embedding): a uint8 table
// [rows, K · bits / 8] gathered by rows (gather_axis 0), quantized along its last axis in
// blocks; the output is indices' dims + [K], in the scales' type. The kernels check the
// scales and zero points (cpu/gather_block_quantized.cc).
absl::Status InferGatherBlockQuantized(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  const ir::Node& node = ctx.node();
  const int64_t bits = node.attr_int("bits", 4), block = node.attr_int("block_size", 128);
  const int64_t quantize_axis = node.attr_int("quantize_axis", 1);
  const TensorType& data = ctx.input_type(0);
  if (data.dtype != DType::kU8 || (data.shape && data.shape->size() != 2) ||
      (quantize_axis != 1 && quantize_axis != -1) || (bits != 4 && bits != 8) || block < 16 ||
      (block & (block - 1)) != 0) {
    return ctx.Error(absl::StrCat(
        "a uint8 table [rows, K · bits / 8] quantized along its last axis (quantize_axis ",
        quantize_axis, "), 4 or 8 bits (", bits,
        ") in power-of-two blocks of at least 16 (block_size ", block, ") is supported"));
  }
  const DType t = ctx.input_type(2).dtype;
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) {
    return ctx.Error("scales must be float32, float16 or bfloat16");
  }
  const DType index = ctx.input_type(1).dtype;
  if (index != DType::kI64 && index != DType::kI32) {
    return ctx.Error("indices must be int64 or int32");
  }
  const auto& indices = ctx.input_type(1).shape;
  if (!indices) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  Dims out = *indices;
  out.push_back(data.shape && (*data.shape)[1].is_static()
                    ? ir::Dim((*data.shape)[1].value() * 8 / bits)
                    : ir::Dim::Unknown());
  if (out.back().is_static() && out.back().value() % block != 0) {
    return ctx.Error(absl::StrCat("K = ", out.back().value(), " is not whole blocks of ", block));
  }
  ctx.set_output_type(0, TensorType(t, out));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
