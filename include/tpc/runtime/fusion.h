// Fusion: a pass over a rank's graph, before it runs, that replaces chains of operators
// by one operator that computes the same values in one pass over memory
// (src/runtime/fusion/patterns.cc holds the patterns). Casts to the type their input
// already has go first (torch writes them around norms and softmaxes). Then the
// element-wise chains:
//
//   x·cos + Concat(-x[.., h:], x[.., :h])·sin    → tpc::RotaryHalf(x, cos, sin)
//   x / Sqrt(ReduceMean(x²) + eps) · w           → com.microsoft::SimplifiedLayerNormalization
//     (or x · (1 / Sqrt(..)) · w, torch's rsqrt)
//   0.5·x·(1 + Tanh(√(2/π)·(x + 0.044715·x³)))    → Gelu(approximate="tanh")
//   0.5·x·(1 + Erf(x / √2))                        → Gelu
//
// then the GEMMs, which may absorb what the first phase made:
//
//   MatMul(x, W) [+ bias] [→ Gelu | Relu | Tanh | x·Sigmoid(x)]
//       → tpc::FusedMatMul(x, W, bias?)               (the GEMM's epilogue)
//     and, in a half chain without bias, a Cast to f32 after it (a half-precision plan's
//     logits): the fused output is f32, never rounded to half
//   MatMul(Q, Kᵀ) [· or ÷ scale] [+ mask] → Softmax(last axis) → MatMul(·, V)
//       → tpc::AttentionCore(Q, K or Kᵀ, V, mask?)    (no [.., s, t] scores in memory)
//     where K and V are GQA's repeat_kv of fewer heads, Reshape(Expand(Unsqueeze(x))),
//     the core takes x itself (kv_grouped = 1: each head serves its group of query
//     heads) and the repeated heads are never written
//
// Chains of f32, f16 or bf16 values fuse (all of one type): in a half-precision plan the
// fused kernel computes in f32 between its half inputs and output, where the chain
// rounded after every op. It is backend-neutral: a chain is fused only when the backend
// has a kernel of its own for the fused operator that takes the chain's element types (a
// device backend's host stand-ins do not count), so a backend without one runs that chain
// as it was (the CPU and CUDA backends have all five). Fused nodes keep the
// name of the chain's first node, and the chain's last value keeps its name and type, so outputs,
// profiles and errors still speak of the model's names. Values read outside a chain (used
// elsewhere, graph outputs) are never fused away.
#pragma once

#include <map>
#include <string>

#include "tpc/ir/graph.h"
#include "tpc/runtime/backend.h"

namespace tpc::runtime {

struct FusionStats {
  // Fused nodes made, by fused op type (`FusedMatMul`), and the nodes removed: those
  // they replaced and the Casts to their input's own type.
  std::map<std::string, int> fused;
  int nodes_removed = 0;
};

// Fuses `graph` in place for `backend`. Never fails: a chain that does not match
// exactly (a value used outside it, a dtype, an axis) is left alone.
FusionStats FuseGraph(ir::Graph& graph, const Backend& backend);

}  // namespace tpc::runtime
