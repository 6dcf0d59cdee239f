// Internal to the partition stage: graph-building helpers shared by the transitions
// and the lowerings, with per-rank constants and opset-correct op forms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/partition/collective_factory.h"
#include "tpc/partition/partition.h"

namespace tpc::partition::internal {

class Rewriter {
 public:
  Rewriter(ir::Graph& graph, int64_t n, const CollectiveFactory& factory)
      : graph_(graph), n_(n), factory_(factory) {}

  ir::Graph& graph() { return graph_; }
  int64_t n() const { return n_; }
  const CollectiveFactory& factory() const { return factory_; }
  PartitionStats& stats() { return stats_; }

  // A replicated constant, placed before the first call.
  ir::Value* Constant(const std::string& base, ir::Tensor t);
  ir::Value* Int64s(const std::string& base, const std::vector<int64_t>& values,
                    bool scalar = false);
  ir::Value* Scalar(const std::string& base, ir::DType dtype, double value);
  // A per-rank constant: rank r sees rows [r·m, (r+1)·m) of `table` (shape [N·m, ...]),
  // so its type is [m, ...].
  ir::Value* PerRank(const std::string& base, ir::Tensor table);

  // An op before `before` with one output of type `type` (sharding `placement`).
  ir::Value* Op(ir::Node* before, const std::string& op, std::vector<ir::Value*> inputs,
                ir::TensorType type, const ir::Placement& placement, ir::Attributes attrs = {},
                const std::string& domain = "");

  // Opset-correct forms of ops whose signature changed.
  ir::Value* Unsqueeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes,
                       ir::TensorType type, const ir::Placement& p);
  ir::Value* Squeeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes, ir::TensorType type,
                     const ir::Placement& p);
  ir::Value* Reduce(ir::Node* before, const std::string& op, ir::Value* x,
                    std::vector<int64_t> axes, bool keepdims, ir::TensorType type,
                    const ir::Placement& p);

  // Marks a tpc-domain op in the graph's opsets.
  void UseTpcDomain();

 private:
  ir::Node* FirstCall();
  ir::Graph& graph_;
  int64_t n_;
  const CollectiveFactory& factory_;
  PartitionStats stats_;
};

// Type helpers.
ir::TensorType WithDim(ir::TensorType t, int64_t axis, ir::Dim d);
ir::TensorType WithDType(ir::TensorType t, ir::DType d);

// Lowerings of strategies that need more than the op's local form. Each takes the
// node (inputs already converted to the strategy's placements, outputs typed per rank)
// and replaces it; the returned pairs map each old output to the value that now stands
// for it (under the old name).
using Replacements = std::vector<std::pair<ir::Value*, ir::Value*>>;
absl::StatusOr<Replacements> LowerMaskedGather(Rewriter& rw, ir::Node* node);
absl::StatusOr<Replacements> LowerVocabParallelLoss(Rewriter& rw, ir::Node* node);
absl::StatusOr<Replacements> LowerVocabParallelSoftmax(Rewriter& rw, ir::Node* node);
absl::StatusOr<Replacements> LowerVocabParallelNll(Rewriter& rw, ir::Node* node);
// Replaces `node`'s outputs by `values` (same order), erases it and gives each new
// value the old name.
Replacements ReplaceNode(Rewriter& rw, ir::Node* node, const std::vector<ir::Value*>& values);

// Shape inputs of an op whose output is split: Reshape's target, Expand's shape,
// ConstantOfShape's input, a blocked Split's sizes; Shape/Size of a split value.
absl::Status FixShapeInputs(Rewriter& rw, ir::Node* node, const std::vector<ir::Placement>& outputs,
                            const std::vector<std::optional<ir::Placement>>& inputs);

}  // namespace tpc::partition::internal
