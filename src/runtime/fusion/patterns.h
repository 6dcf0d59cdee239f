// The fusion patterns: each record matches a chain that starts at one node and says what
// replaces it. The driver (fusion.cc) checks that nothing outside the chain reads its
// inner values and that the backend has the fused kernel, then rewrites.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tpc/ir/graph.h"

namespace tpc::runtime::fusion {

struct Match {
  std::vector<ir::Node*> nodes;  // replaced; each after the nodes it reads
  std::string domain = "tpc";    // of the fused node
  std::string op_type;
  std::vector<ir::Value*> inputs;  // of the fused node
  ir::Attributes attrs;
  ir::Value* result = nullptr;  // the chain's last value (keeps its name)
};

struct Pattern {
  const char* name;
  // Patterns of phase 0 (element-wise chains into one op) run over the whole graph
  // before those of phase 1 (GEMMs and their epilogues), which may then absorb them.
  int phase;
  // A match starting at `anchor`, or nothing.
  std::optional<Match> (*match)(ir::Node* anchor);
};

// In the order they are tried at each node.
std::span<const Pattern> Patterns();

}  // namespace tpc::runtime::fusion
