// tpc's own shape and type inference (Debian's libonnx knows opsets up to 17 only).
//
// Runs over the graph in order, giving every call's outputs an element type and a
// shape with integer or symbolic dims. Small integer tensors that carry shapes
// (`Shape → Gather → Unsqueeze → Concat → Reshape`) are evaluated to known values
// made of dims, so a Reshape's target is known even when it is computed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tpc/ir/graph.h"

namespace tpc::onnx {

// Known values are tracked for integer tensors of rank 0 or 1 up to this many elements.
inline constexpr int64_t kMaxKnownValueElements = 64;

// What a shape rule sees of one node.
class InferenceContext {
 public:
  InferenceContext(ir::Node& node, int64_t opset) : node_(node), opset_(opset) {}

  const ir::Node& node() const { return node_; }
  // Opset of the default domain the model imports (signatures differ across opsets).
  int64_t opset() const { return opset_; }

  int num_inputs() const { return node_.num_inputs(); }
  // Input i present (within range and not omitted).
  bool has_input(int i) const { return node_.optional_input(i) != nullptr; }
  const ir::TensorType& input_type(int i) const { return node_.input(i)->type(); }
  // The evaluated value of input i, when known (shape computations, small constants).
  const std::optional<std::vector<ir::Dim>>& input_value(int i) const {
    return node_.input(i)->known_value();
  }
  // The constant data of input i when it is produced by a constant node, else null.
  const ir::Tensor* input_constant(int i) const;

  int num_outputs() const { return node_.num_outputs(); }
  void set_output_type(int i, ir::TensorType type) { node_.output(i)->set_type(std::move(type)); }
  void set_output_value(int i, std::vector<ir::Dim> value) {
    node_.output(i)->set_known_value(std::move(value));
  }

  // InvalidArgument naming the node: `node '/h.0/Add' (Add): <message>`.
  absl::Status Error(std::string_view message) const;

 private:
  ir::Node& node_;
  int64_t opset_;
};

using ShapeRule = absl::Status (*)(InferenceContext&);

// The rule for an op of the default ONNX domain (or "com.microsoft", or "tpc" for the
// collectives of per-rank plans), or null.
ShapeRule FindShapeRule(std::string_view domain, std::string_view op_type);
// Whether an op gets its output types at `opset`: a rule above, or libonnx's own
// inference for an op of the default domain.
bool CanInferShapes(std::string_view domain, std::string_view op_type, int64_t opset);
// Op types that have a rule, sorted (for docs and tests).
std::vector<std::string> SupportedOps();

// Infers every call in order. Fails on the first node with no rule (unsupported op) or
// whose inputs do not fit the operator, naming the node.
absl::Status InferShapes(ir::Graph& graph);

// Infers, in order, the calls whose outputs have no type yet (those added since the
// last inference: the last calls of the importer's graph) and gives constants their
// known values: the importer's look at the graph it has so far, to read an If's
// condition or a SequenceAt's index. Costs the new calls and the constants, not the graph.
absl::Status InferUntypedShapes(ir::Graph& graph);

}  // namespace tpc::onnx
