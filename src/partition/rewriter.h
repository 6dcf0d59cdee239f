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
#include "tpc/shard/lowering.h"

namespace tpc::partition::internal {

// The partition stage's side of shard::LocalGraph: ops with per-rank types and
// placements, per-rank constants, collectives from the factory, counted in the stats.
class Rewriter : public shard::LocalGraph {
 public:
  Rewriter(ir::Graph& graph, int64_t n, const CollectiveFactory& factory)
      : graph_(graph), n_(n), factory_(factory) {}

  ir::Graph& graph() override { return graph_; }
  int64_t n() const override { return n_; }
  const CollectiveFactory& factory() const { return factory_; }
  PartitionStats& stats() { return stats_; }

  ir::Value* Constant(const std::string& base, ir::Tensor t) override;
  ir::Value* Int64s(const std::string& base, const std::vector<int64_t>& values,
                    bool scalar = false) override;
  ir::Value* Scalar(const std::string& base, ir::DType dtype, double value) override;
  ir::Value* PerRank(const std::string& base, ir::Tensor table) override;
  ir::Value* Op(ir::Node* before, const std::string& op, std::vector<ir::Value*> inputs,
                ir::TensorType type, const ir::Placement& placement, ir::Attributes attrs = {},
                const std::string& domain = "") override;
  ir::Value* Unsqueeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes,
                       ir::TensorType type, const ir::Placement& p) override;
  ir::Value* Squeeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes, ir::TensorType type,
                     const ir::Placement& p) override;
  ir::Value* Reduce(ir::Node* before, const std::string& op, ir::Value* x,
                    std::vector<int64_t> axes, bool keepdims, ir::TensorType type,
                    const ir::Placement& p) override;
  ir::Value* AllReduce(ir::Node* before, ir::Value* x, ir::ReduceOp op) override;
  Replacements Replace(ir::Node* node, const std::vector<ir::Value*>& values) override;

  // Marks a tpc-domain op in the graph's opsets.
  void UseTpcDomain();

 private:
  ir::Node* FirstCall();
  ir::Graph& graph_;
  int64_t n_;
  const CollectiveFactory& factory_;
  PartitionStats stats_;
};

using shard::WithDim;
using shard::WithDType;
using Replacements = shard::LocalGraph::Replacements;

}  // namespace tpc::partition::internal
