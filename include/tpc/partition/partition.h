// The partition stage: turns a sharded graph into the program every rank runs.
//
// Where a producer's placement differs from what a consumer needs, the transition of
// DESIGN §6 is inserted (all-gather, all-reduce, reduce-scatter, all-to-all, a local
// shard, a local "keep on one rank"). Every value gets its per-rank type; shape inputs
// (Reshape, Expand, ConstantOfShape, Split sizes) get per-rank values; ops whose
// strategy needs more than their local form are lowered (the masked embedding lookup,
// the vocab-parallel softmax and cross-entropy). The result is SPMD: one program.
// Per-rank constants are constants with an S(d) sharding whose type is the per-rank
// part: a split weight, or a table with one row per rank (a rank's vocab offset); the
// plan writer gives each rank its slice.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "tpc/ir/graph.h"
#include "tpc/partition/collective_factory.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"

namespace tpc::partition {

struct PartitionStats {
  int collectives = 0;    // inserted collective ops
  int local_shards = 0;   // R → S slices
  int lowered_ops = 0;    // ops replaced by their distributed form
  int removed_nodes = 0;  // dead code removed afterwards
};

// Rewrites `graph` (sharded by ShardGraph with `result`) in place. `factory` defaults
// to TpcCollectives(N).
absl::StatusOr<PartitionStats> PartitionGraph(ir::Graph& graph, const shard::ShardResult& result,
                                              const shard::ShardOptions& options,
                                              const CollectiveFactory* factory = nullptr);

// The per-rank type of a value of type `global` placed `p` on `n` ranks.
ir::TensorType LocalType(const ir::TensorType& global, const ir::Placement& p, int64_t n);

}  // namespace tpc::partition
