// Internal to the importer: a node checked against its operator's ONNX schema, as
// onnx.checker does (input/output counts, attribute types, required attributes).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"
#include "tpc/ir/graph.h"

namespace onnx {
class OpSchema;
}  // namespace onnx

namespace tpc::onnx::internal {

// The schema libonnx has for `op` of `domain` at `opset` (nullptr when it has none) and, in
// `*current`, whether it is the operator's schema at that opset (libonnx 1.12 knows opsets up
// to 17; for a newer opset its newest schema is current unless the operator changed since).
const ::onnx::OpSchema* FindSchema(const std::string& op, const std::string& domain, int64_t opset,
                                   bool* current);

// `node` (domain `domain`, canonical: "" for ai.onnx) under opset `opset` of its domain.
// Schemas come from libonnx. For an opset newer than libonnx knows, the newest known
// schema is current unless the operator changed after it (a table of those, from ONNX's
// changelog); for those only what does not change across versions is checked:
// the types of the attributes that schema declares and its minimum input count.
// tpc's own table (schema_extra.h) adds what libonnx does not know: the attributes such an
// operator gained since (any other is refused), the schemas of the newer operators and of
// com.microsoft's that tpc runs, and the attribute values and inputs tpc does not
// implement. Other operators libonnx has no schema for (tpc's) pass: their shape rules
// check them.
absl::Status CheckAgainstSchema(const ::onnx::NodeProto& node, const std::string& domain,
                                int64_t opset, const std::string& label);

// The element types of `node`'s inputs (all typed) against its schema's type constraints,
// as onnx.checker's shape inference checks them: inputs bound to one type parameter (`T`
// of Add, Where's X and Y, Concat's inputs) have one element type, and, for opsets libonnx
// knows (or whose operator has not changed since), each is among the types it allows (Gather's
// indices are integers, Reshape's shape is i64).
absl::Status CheckInputTypes(const ir::Node& node, int64_t opset);

}  // namespace tpc::onnx::internal
