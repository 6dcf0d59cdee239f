// Internal to the solver: removes the values of decisions that cannot be part of any
// plan of finite cost (arc consistency over the cost tables), then conditions on the
// decisions left with one value. A weight that must stay whole because every consumer
// forbids its splits then stops linking the layers it feeds, which keeps variable
// elimination's tables small. Exact: only impossible values go.
#pragma once

#include <vector>

#include "tpc/shard/min_sum.h"

namespace tpc::shard::internal {

struct PrunedProblem {
  MinSumProblem reduced;
  // For each original variable: its reduced variable, or -1 when it has one value left.
  std::vector<int> reduced_var;
  // For each original variable: its values still possible (reduced value k is
  // values[v][k]).
  std::vector<std::vector<int>> values;
  Cost constant;            // the factors left with no variable
  bool infeasible = false;  // some variable has no possible value
};

PrunedProblem Prune(const MinSumProblem& problem);

}  // namespace tpc::shard::internal
