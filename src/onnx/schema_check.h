// Internal to the importer: a node checked against its operator's ONNX schema, as
// onnx.checker does (input/output counts, attribute types, required attributes).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace tpc::onnx::internal {

// `node` (domain `domain`, canonical: "" for ai.onnx) under opset `opset` of its domain.
// Schemas come from libonnx. For an opset newer than libonnx knows, the newest known
// schema may be out of date, so only what does not change across versions is checked:
// the types of the attributes that schema declares and its minimum input count.
// Domains libonnx has no schemas for (com.microsoft, tpc) pass: their shape rules check them.
absl::Status CheckAgainstSchema(const ::onnx::NodeProto& node, const std::string& domain,
                                int64_t opset, const std::string& label);

}  // namespace tpc::onnx::internal
