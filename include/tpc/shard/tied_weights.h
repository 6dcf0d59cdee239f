// Tied weights: one parameter stored twice. Exporters that fold constants store a tied
// embedding and LM head as two initializers, the second the transpose of the first
// (torch's legacy exporter does this for GPT-2). Finding the pair lets the shard stage
// keep them split consistently, as one parameter.
#pragma once

#include <vector>

#include "tpc/ir/graph.h"

namespace tpc::shard {

struct TiedPair {
  const ir::Value* a;
  const ir::Value* b;
  bool transposed;  // b == transpose(a) (2-D); else b == a
};

// Pairs of float constants of at least `min_bytes` with equal data (or transposed
// data). Reads only pairs whose shapes match, and only as far as the first difference.
std::vector<TiedPair> FindTiedWeights(const ir::Graph& graph, int64_t min_bytes = 4096);

}  // namespace tpc::shard
