// Element types of tensors. The numeric values are ONNX's TensorProto.DataType, so
// import and export convert by a cast.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tpc::ir {

enum class DType : int32_t {
  kUndefined = 0,
  kF32 = 1,
  kU8 = 2,
  kI8 = 3,
  kU16 = 4,
  kI16 = 5,
  kI32 = 6,
  kI64 = 7,
  kString = 8,
  kBool = 9,
  kF16 = 10,
  kF64 = 11,
  kU32 = 12,
  kU64 = 13,
  kBF16 = 16,
};

// Short name used in the text form: f32, i64, bool, ...
const char* DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);
// Size of one element in bytes; 0 for kUndefined and kString.
int64_t DTypeSize(DType t);
bool IsFloating(DType t);
bool IsInteger(DType t);
// True when the ONNX data-type number is one tpc knows.
bool IsKnownOnnxDType(int32_t onnx_type);

}  // namespace tpc::ir
