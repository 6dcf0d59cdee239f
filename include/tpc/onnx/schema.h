// What ONNX's operator schemas allow, for stages that change a graph's types.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "tpc/ir/graph.h"

namespace tpc::onnx {

// OK when every input of `node` (default domain, opset `opset`) has an element type its
// schema takes, and inputs of one type parameter agree; else an error naming the node.
absl::Status CheckInputTypes(const ir::Node& node, int64_t opset);

}  // namespace tpc::onnx
