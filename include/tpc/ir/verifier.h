// Structural checks every stage may rely on: SSA (one producer per value, unique
// names), topological order (inputs defined before use), consistent use lists (no
// dangling uses), well-formed types, constants whose data matches their type, one
// output node at the end.
#pragma once

#include "absl/status/status.h"
#include "tpc/ir/graph.h"

namespace tpc::ir {

// OK, or FailedPrecondition naming the first offending node/value and the reason.
absl::Status VerifyGraph(const Graph& graph);

}  // namespace tpc::ir
