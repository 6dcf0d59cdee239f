// Inlining of model-local functions (FunctionProto): torch's dynamo exporter may
// emit them. Every call is replaced by the function's body with values renamed
// apart (in the branches of its nodes too) and attribute references resolved, recursively.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tpc::onnx {

// The graph's nodes with every call of a function of `model` expanded.
absl::StatusOr<std::vector<::onnx::NodeProto>> InlineLocalFunctions(
    const ::onnx::ModelProto& model);
// `nodes` (a subgraph's: an If's branch) with every call of a function of `model`
// expanded, the names made for the bodies' values starting with `scope`.
absl::StatusOr<std::vector<::onnx::NodeProto>> InlineLocalFunctions(
    const ::onnx::ModelProto& model,
    const google::protobuf::RepeatedPtrField<::onnx::NodeProto>& nodes, const std::string& scope);

}  // namespace tpc::onnx
