// How the partition stage creates collectives. The rewrite only asks this factory for
// "an all-reduce of x"; the default makes ops of the `tpc` ONNX domain (see
// docs/collectives.md), and tests or another runtime can substitute their own.
#pragma once

#include <functional>
#include <string>

#include "tpc/ir/graph.h"
#include "tpc/shard/lowering.h"

namespace tpc::partition {

// Every function inserts its op right before `before` and returns the result value,
// whose type the caller sets.
struct CollectiveFactory {
  std::function<ir::Value*(ir::Graph&, ir::Node* before, ir::Value* x, ir::ReduceOp op)> all_reduce;
  // `blocks` > 1: the axis is `blocks` equal blocks, each split across the ranks
  // (placement S(d/k)); the collective works block by block. `parts` < N: the ranks hold
  // `parts` distinct parts in groups of N/parts (S(d@parts)); one copy of each is kept.
  std::function<ir::Value*(ir::Graph&, ir::Node* before, ir::Value* x, int64_t axis, int64_t blocks,
                           int64_t parts)>
      all_gather;
  std::function<ir::Value*(ir::Graph&, ir::Node* before, ir::Value* x, int64_t axis, int64_t blocks,
                           ir::ReduceOp op)>
      reduce_scatter;
  std::function<ir::Value*(ir::Graph&, ir::Node* before, ir::Value* x, int64_t split_axis,
                           int64_t concat_axis)>
      all_to_all;
  // Not a collective: this rank's part of a value every rank of a group holds whole.
  // Each block of `axis` is cut in `parts` and rank r takes part (r / stride) % parts:
  // R → S(d/k) is parts N, stride 1; R → S(d@g) parts g, stride N/g; S(d@g) → S(d)
  // parts N/g, stride 1 (a rank's part of its group's part).
  std::function<ir::Value*(ir::Graph&, ir::Node* before, ir::Value* x, int64_t axis, int64_t blocks,
                           int64_t parts, int64_t stride)>
      shard;
};

// The tpc-domain ops (`tpc::AllReduce`, `tpc::AllGather`, `tpc::ReduceScatter`,
// `tpc::AllToAll`, `tpc::Shard`, all with `group_size`).
CollectiveFactory TpcCollectives(int64_t group_size);

// The ONNX domain and opset version of those ops.
inline constexpr const char* kTpcDomain = shard::LocalGraph::kTpcDomain;
inline constexpr int64_t kTpcOpsetVersion = shard::LocalGraph::kTpcOpsetVersion;

}  // namespace tpc::partition
