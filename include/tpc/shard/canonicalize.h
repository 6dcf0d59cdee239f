// Rewrites the shard stage makes before solving, so that the solver's choices exist.
#pragma once

#include "tpc/ir/graph.h"
#include "tpc/shard/shard_pass.h"

namespace tpc::shard {

// A projection (MatMul or Gemm with a constant weight, optionally followed by a bias
// Add) whose output is only cut by Slices or a Split of its last axis into parts of
// unequal sizes (a grouped-query fused QKV) becomes one projection per part, reading
// its columns of the weight and bias; the part values keep their names. Parts of equal
// sizes are left alone (one GEMM, a blocked split), and so is a projection whose nodes
// or values `constraints` name (a style on the fused weight keeps it fused). Returns how
// many were split.
int SplitFusedProjections(ir::Graph& graph, const Constraints& constraints);

}  // namespace tpc::shard
