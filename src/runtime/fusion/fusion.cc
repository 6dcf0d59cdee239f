// The fusion driver: tries every pattern at every node, in graph order, and rewrites
// the chains it may (tpc/runtime/fusion.h).
#include "tpc/runtime/fusion.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "patterns.h"

namespace tpc::runtime {
namespace {

// Every value the chain makes, except its result, is read only inside the chain.
bool Closed(const fusion::Match& m) {
  for (const ir::Node* n : m.nodes) {
    for (const ir::Value* v : n->outputs()) {
      if (v == m.result) continue;
      for (const ir::Use& u : v->uses()) {
        if (std::find(m.nodes.begin(), m.nodes.end(), u.user) == m.nodes.end()) return false;
      }
    }
  }
  return true;
}

// Puts the fused node before the chain's last node and returns it, unless the backend has
// no kernel of its own for it with these element types: a device backend offers host
// kernels for what it lacks, and a fused op on the host would cost copies both ways.
ir::Node* InsertFused(ir::Graph& graph, const fusion::Match& m, const Backend& backend) {
  const Kernel* any = backend.FindKernel(m.domain, m.op_type);
  if (any == nullptr || any->host) return nullptr;
  ir::Node* fused = graph.InsertCallBefore(m.result->producer(), m.domain, m.op_type, m.inputs,
                                           {graph.UniqueName(m.result->name() + ".fused")}, m.attrs,
                                           m.nodes.front()->name());
  fused->output()->set_type(m.result->type());
  const Kernel* k = backend.FindKernelFor(*fused);
  if (k == nullptr || k->host) {
    graph.Erase(fused);
    return nullptr;
  }
  return fused;
}

// Moves the chain's readers to `fused` and removes the chain.
void Rewrite(ir::Graph& graph, const fusion::Match& m, ir::Node* fused) {
  const std::string name = m.result->name();
  ir::Value* out = fused->output();
  out->set_sharding(m.result->sharding());
  m.result->ReplaceAllUsesWith(out);
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) graph.Erase(*it);
  graph.RenameValue(out, name);
}

// Removes every Cast to the type its input already has (torch's exporters write them
// around norms and softmaxes, `.to(float32)` of an f32 model; a half-precision plan's
// Casts to f32 become such Casts too): they would split the chains below. A Cast whose
// output is a graph output stays.
int RemoveIdentityCasts(ir::Graph& graph) {
  const std::vector<ir::Value*> outputs = graph.outputs();
  int removed = 0;
  for (ir::Node* n : graph.NodeVector()) {
    if (!n->is_call() || !n->domain().empty() || n->op_type() != "Cast" || n->num_inputs() != 1 ||
        n->num_outputs() != 1) {
      continue;
    }
    ir::Value* in = n->input(0);
    ir::Value* out = n->output();
    const ir::DType dtype = in->type().dtype;
    if (dtype == ir::DType::kUndefined || out->type().dtype != dtype ||
        n->attr_int("to", 0) != static_cast<int64_t>(dtype) ||
        std::find(outputs.begin(), outputs.end(), out) != outputs.end()) {
      continue;
    }
    out->ReplaceAllUsesWith(in);
    graph.Erase(n);
    ++removed;
  }
  return removed;
}

}  // namespace

FusionStats FuseGraph(ir::Graph& graph, const Backend& backend) {
  FusionStats stats;
  stats.nodes_removed = RemoveIdentityCasts(graph);
  for (int phase = 0; phase < 2; ++phase) {
    absl::flat_hash_set<const ir::Node*> erased;
    for (ir::Node* node : graph.NodeVector()) {
      if (erased.contains(node) || !node->is_call()) continue;
      for (const fusion::Pattern& p : fusion::Patterns()) {
        if (p.phase != phase) continue;
        std::optional<fusion::Match> m = p.match(node);
        if (!m || !Closed(*m)) continue;
        ir::Node* fused = InsertFused(graph, *m, backend);
        if (fused == nullptr) continue;
        if (!graph.opsets().count(m->domain)) graph.opsets()[m->domain] = 1;
        for (const ir::Node* n : m->nodes) erased.insert(n);
        stats.nodes_removed += static_cast<int>(m->nodes.size());
        ++stats.fused[m->op_type];
        Rewrite(graph, *m, fused);
        break;
      }
    }
  }
  return stats;
}

}  // namespace tpc::runtime
