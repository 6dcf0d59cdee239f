// Reads the IR text form written by PrintGraph.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"

namespace tpc::ir {

// Errors name the line and column: `line 12:7: expected ')'`.
absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(std::string_view text);

// One dim in the text form: `seq`, `seq/2`, `past + seq`, `2*batch*seq`, `"odd name"`.
absl::StatusOr<Dim> ParseDim(std::string_view text);

}  // namespace tpc::ir
