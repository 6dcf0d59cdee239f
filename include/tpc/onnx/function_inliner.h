// Inlining of model-local functions (FunctionProto): torch's dynamo exporter may
// emit them. Every call is replaced by the function's body with values renamed
// apart and attribute references resolved, recursively.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tpc::onnx {

// The graph's nodes with every call of a function of `model` expanded.
absl::StatusOr<std::vector<::onnx::NodeProto>> InlineLocalFunctions(
    const ::onnx::ModelProto& model);

}  // namespace tpc::onnx
