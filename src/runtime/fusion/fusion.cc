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

void Rewrite(ir::Graph& graph, const fusion::Match& m) {
  ir::Node* last = m.result->producer();
  const std::string name = m.result->name();
  ir::Node* fused =
      graph.InsertCallBefore(last, m.domain, m.op_type, m.inputs,
                             {graph.UniqueName(name + ".fused")}, m.attrs, m.nodes.front()->name());
  ir::Value* out = fused->output();
  out->set_type(m.result->type());
  out->set_sharding(m.result->sharding());
  m.result->ReplaceAllUsesWith(out);
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) graph.Erase(*it);
  graph.RenameValue(out, name);
}

}  // namespace

FusionStats FuseGraph(ir::Graph& graph, const Backend& backend) {
  FusionStats stats;
  for (int phase = 0; phase < 2; ++phase) {
    absl::flat_hash_set<const ir::Node*> erased;
    for (ir::Node* node : graph.NodeVector()) {
      if (erased.contains(node) || !node->is_call()) continue;
      for (const fusion::Pattern& p : fusion::Patterns()) {
        if (p.phase != phase) continue;
        std::optional<fusion::Match> m = p.match(node);
        if (!m || !Closed(*m)) continue;
        // Only into a kernel of the backend's own: a device backend offers host kernels
        // for what it lacks, and a fused op on the host would cost copies both ways.
        const Kernel* k = backend.FindKernel(m->domain, m->op_type);
        if (k == nullptr || k->host) continue;
        for (const ir::Node* n : m->nodes) erased.insert(n);
        stats.nodes_removed += static_cast<int>(m->nodes.size());
        ++stats.fused[m->op_type];
        if (!graph.opsets().count(m->domain)) graph.opsets()[m->domain] = 1;
        Rewrite(graph, *m);
        break;
      }
    }
  }
  return stats;
}

}  // namespace tpc::runtime
