// Rewrites the shard stage makes before solving, so that the solver's choices exist.
// Each appends one line per rewrite to `notes` when given (the report lists them).
#pragma once

#include <string>
#include <vector>

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
int SplitFusedProjections(ir::Graph& graph, const Constraints& constraints,
                          std::vector<std::string>* notes = nullptr);

// A MatMul whose weight is the transpose of a 2-D constant W (a Transpose node, or a
// transposed copy the exporter stored beside W: a tied embedding and LM head) becomes
// Gemm(x, W, transB=1), through a Reshape of x to 2-D and back when x has batch dims:
// W is then stored once per rank and read transposed by the GEMM, with no transpose at
// run time. Constrained nodes are left alone. Returns how many products were rewritten.
int UseTransposedWeights(ir::Graph& graph, const Constraints& constraints,
                         std::vector<std::string>* notes = nullptr);

// A vocabulary `n` does not divide (GPT-2's 50257): every 2-D float weight read only as
// an embedding table (Gather rows) or only as a head (MatMul / Gemm output columns),
// whose vocab dim is at least 64·n, not a multiple of n and at least its other dim (a
// K/V projection narrower than the hidden size is not a vocabulary), is padded with zeros to the
// next multiple, as Megatron pads its vocabulary. The head's padded logits are sliced
// back to the vocabulary at once, and a lookup's ids are checked against the true
// vocabulary first (tpc::CheckIndices), so outputs and errors are the unpadded model's.
// Weights `constraints` name are left alone. Returns how many weights were padded.
int PadVocabularies(ir::Graph& graph, int64_t n, const Constraints& constraints,
                    std::vector<std::string>* notes = nullptr);

}  // namespace tpc::shard
