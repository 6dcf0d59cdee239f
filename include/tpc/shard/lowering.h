// How an operator's strategy becomes per-rank ops, where its local form is not enough.
//
// Two kinds of operator knowledge need to edit the graph after the solver has chosen:
// lowerings (a strategy such as the vocab-parallel loss, whose op is replaced by a
// small per-rank sub-graph with its own collectives) and shape inputs (an op such as
// Reshape that carries the size of a split dim in an input, which must hold the
// per-rank size). Both live in the operator's record (op_record.h) and edit the graph
// through `LocalGraph`, which the partition stage implements: the shard stage says
// what an operator needs, the partition stage owns how values are created and placed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/ir/sharding.h"

namespace tpc::shard {

// The graph being rewritten for one rank (every rank's graph is the same but for the
// per-rank constants). Every op it makes is inserted before `before` and gets the
// given type (per-rank) and placement.
class LocalGraph {
 public:
  virtual ~LocalGraph() = default;

  // The ONNX domain of tpc's own ops (collectives, CheckIndices; docs/collectives.md).
  static constexpr const char* kTpcDomain = "tpc";
  static constexpr int64_t kTpcOpsetVersion = 1;

  virtual int64_t n() const = 0;
  virtual ir::Graph& graph() = 0;
  // The ONNX opset of the graph's default domain (ops whose signature changed).
  int64_t opset() { return graph().onnx_opset(); }

  // Replicated constants, placed before the first call.
  virtual ir::Value* Constant(const std::string& base, ir::Tensor t) = 0;
  virtual ir::Value* Int64s(const std::string& base, const std::vector<int64_t>& values,
                            bool scalar = false) = 0;
  virtual ir::Value* Scalar(const std::string& base, ir::DType dtype, double value) = 0;
  // A per-rank constant: rank r sees rows [r·m, (r+1)·m) of `table` (shape [N·m, ...]).
  virtual ir::Value* PerRank(const std::string& base, ir::Tensor table) = 0;

  virtual ir::Value* Op(ir::Node* before, const std::string& op, std::vector<ir::Value*> inputs,
                        ir::TensorType type, const ir::Placement& placement,
                        ir::Attributes attrs = {}, const std::string& domain = "") = 0;
  // Opset-correct forms of ops whose signature changed (axes as attribute or input).
  virtual ir::Value* Unsqueeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes,
                               ir::TensorType type, const ir::Placement& p) = 0;
  virtual ir::Value* Squeeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes,
                             ir::TensorType type, const ir::Placement& p) = 0;
  virtual ir::Value* Reduce(ir::Node* before, const std::string& op, ir::Value* x,
                            std::vector<int64_t> axes, bool keepdims, ir::TensorType type,
                            const ir::Placement& p) = 0;
  // An all-reduce of the partial value `x` (counted with the plan's collectives); the
  // result is replicated and has x's type.
  virtual ir::Value* AllReduce(ir::Node* before, ir::Value* x, ir::ReduceOp op) = 0;

  // Old output → the value that now stands for it (under the old name).
  using Replacements = std::vector<std::pair<ir::Value*, ir::Value*>>;
  // Replaces `node`'s outputs by `values` (same order), erases it when nothing else
  // uses it and gives each new value the old name.
  virtual Replacements Replace(ir::Node* node, const std::vector<ir::Value*>& values) = 0;
};

// A lowering: `node`'s inputs are already in the strategy's placements and its outputs
// typed per rank; it builds the per-rank form and replaces the node.
using LoweringFn = absl::StatusOr<LocalGraph::Replacements> (*)(LocalGraph& g, ir::Node* node);

// Per-rank shape inputs: called for every op of the record (with its chosen strategy's
// placements, or empty ones when the op runs on replicated values only) after its
// inputs are converted; rewrites the inputs that carry a size of a split dim.
using ShapeInputsFn = absl::Status (*)(LocalGraph& g, ir::Node* node,
                                       const std::vector<ir::Placement>& outputs,
                                       const std::vector<std::optional<ir::Placement>>& inputs);

// Type helpers for lowerings.
inline ir::TensorType WithDim(ir::TensorType t, int64_t axis, ir::Dim d) {
  (*t.shape)[static_cast<size_t>(axis)] = std::move(d);
  return t;
}
inline ir::TensorType WithDType(ir::TensorType t, ir::DType d) {
  t.dtype = d;
  return t;
}

}  // namespace tpc::shard
