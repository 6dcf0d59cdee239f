#include "tpc/ir/dtype.h"

#include <array>
#include <utility>

namespace tpc::ir {
namespace {

constexpr std::array<std::pair<DType, std::string_view>, 15> kNames = {{
    {DType::kUndefined, "undef"},
    {DType::kF32, "f32"},
    {DType::kU8, "u8"},
    {DType::kI8, "i8"},
    {DType::kU16, "u16"},
    {DType::kI16, "i16"},
    {DType::kI32, "i32"},
    {DType::kI64, "i64"},
    {DType::kString, "str"},
    {DType::kBool, "bool"},
    {DType::kF16, "f16"},
    {DType::kF64, "f64"},
    {DType::kU32, "u32"},
    {DType::kU64, "u64"},
    {DType::kBF16, "bf16"},
}};

}  // namespace

const char* DTypeName(DType t) {
  for (const auto& [type, name] : kNames) {
    if (type == t) return name.data();
  }
  return "undef";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& [type, n] : kNames) {
    if (n == name) return type;
  }
  return std::nullopt;
}

int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kU8:
    case DType::kI8:
      return 1;
    case DType::kU16:
    case DType::kI16:
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI32:
    case DType::kU32:
    case DType::kF32:
      return 4;
    case DType::kI64:
    case DType::kU64:
    case DType::kF64:
      return 8;
    case DType::kUndefined:
    case DType::kString:
      return 0;
  }
  return 0;
}

bool IsFloating(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kU8:
    case DType::kI8:
    case DType::kU16:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
    case DType::kU32:
    case DType::kU64:
      return true;
    default:
      return false;
  }
}

bool IsKnownOnnxDType(int32_t onnx_type) {
  for (const auto& [type, name] : kNames) {
    if (static_cast<int32_t>(type) == onnx_type && type != DType::kUndefined) return true;
  }
  return false;
}

}  // namespace tpc::ir
