// Internal to the ONNX stage: IR types and attributes written as their ONNX protos (the
// exporter writes them; the libonnx shape-inference fallback hands them to libonnx).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"
#include "tpc/ir/attribute.h"
#include "tpc/ir/tensor_type.h"

namespace tpc::onnx::internal {

// A tensor type: static dims as dim_value, symbolic ones as dim_param (their text form,
// `batch*seq`), unknown dims left empty; no shape for an unknown rank.
void SetType(const ir::TensorType& type, ::onnx::TypeProto* out);

// An attribute; fails for a tensor attribute without data.
absl::Status SetAttribute(const std::string& name, const ir::AttrValue& value,
                          ::onnx::AttributeProto* a);

}  // namespace tpc::onnx::internal
