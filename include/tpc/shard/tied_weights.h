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

// Pairs of float matrices of at least `min_bytes` with equal data (or transposed data).
// Reads kSamples sampled elements of each matrix; only pairs whose shapes and samples
// agree are compared whole. Matrices whose samples are all equal (zeros) are never
// taken for copies.
std::vector<TiedPair> FindTiedWeights(const ir::Graph& graph, int64_t min_bytes = 4096);

}  // namespace tpc::shard
