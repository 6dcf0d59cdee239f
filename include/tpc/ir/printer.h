// The IR text form. Stable and readable; golden tests compare it, and ParseGraph reads
// it back so that Print(Parse(Print(g))) == Print(g) exactly.
#pragma once

#include <ostream>
#include <string>

#include "tpc/ir/graph.h"

namespace tpc::ir {

struct PrintOptions {
  // Constants with at most this many elements are printed with their values; larger
  // ones are printed as `elided` (their bytes stay in the ONNX files).
  int64_t max_inline_elements = 16;
};

std::string PrintGraph(const Graph& graph, const PrintOptions& options = {});
void PrintGraph(const Graph& graph, std::ostream& out, const PrintOptions& options = {});

}  // namespace tpc::ir
