// User constraints: the styles file, as the plans given to torch's parallelize_module.
//
//   # comment
//   *.mlp.down_proj.weight: rowwise        # a weight, by initializer name
//   /model/layers.*/mlp/up_proj/MatMul: colwise   # a node: applies to its weight
//   lm_head.weight: S(1)                   # an explicit placement
//   *norm*: replicate
//   /model/layers.*/Add_1_output_0: sequence      # a value (or node output)
//   model.layers.*.self_attn.q_proj: colwise     # a module path, as in DTensor plans
//   group: a.weight, b.weight              # values that must share one placement
//
// PATTERN is a glob (`*`, `?`, `[...]`) over initializer names, node names and value
// names. STYLE is colwise, rowwise, replicate, sequence, or a placement (R, S(d),
// S(d/k)). colwise/rowwise on a weight split it on the dim its consumer (MatMul,
// Gemm, Gather, through Transpose) treats as output / input features. A pattern with no
// '/' that names nothing else is read as a module path (colwise, rowwise, replicate):
// the nodes exported for the module that read a weight (`/model/layers.0/self_attn/
// q_proj/MatMul`), else the module's `.weight` and `.bias`. A pattern that
// matches nothing, or a style that cannot hold, is an error naming the file and line.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"

namespace tpc::shard {

// Parses `text` (named `origin` in errors, e.g. the file name) against `graph`.
absl::StatusOr<Constraints> ParseStyles(const std::string& text, const std::string& origin,
                                        const ir::Graph& graph, const ShardOptions& options);

// Reads and parses a styles file.
absl::StatusOr<Constraints> LoadStyles(const std::string& path, const ir::Graph& graph,
                                       const ShardOptions& options);

// `NAME=PLACEMENT` (for --input-placement / --output-placement): the graph inputs (or
// outputs) NAME names, with their placements. NAME may be a glob (`past_*`) and must
// match at least one; a negative split dim counts from the end of each value's rank.
absl::StatusOr<std::vector<std::pair<std::string, ir::Placement>>> ParseNamedPlacement(
    const std::string& arg, const ir::Graph& graph, bool input);

}  // namespace tpc::shard
