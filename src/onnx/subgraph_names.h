// The names a subgraph (an If's branch, a Loop's body) reads from the scopes around it:
// ONNX lets its nodes use any value visible where the node holding it stands. And the
// names a subgraph defines, renamed apart when its nodes join the graph around it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tpc::onnx::internal {

// The names `g` and the subgraphs nested in it read but do not define (inputs of nodes,
// and outputs that are outer values), each once, in order of first use.
std::vector<std::string> OuterNames(const ::onnx::GraphProto& g);

// The outer names of every subgraph of `node`'s attributes (an If's two branches).
std::vector<std::string> SubgraphReads(const ::onnx::NodeProto& node);

// Renames those references in place (`rename` maps an outer name to its new one).
void RenameOuterNames(::onnx::GraphProto* g,
                      const std::function<std::string(const std::string&)>& rename);

// Renames every name `g` defines (its initializers and node outputs; not its nested
// subgraphs' own) to `fresh(name)`, wherever `g` and its nested subgraphs read it, its
// outputs included.
void RenameDefinedNames(::onnx::GraphProto* g,
                        const std::function<std::string(const std::string&)>& fresh);

}  // namespace tpc::onnx::internal
