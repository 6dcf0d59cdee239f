// What the shard stage decided, for report.json and the summary tp-compile prints.
#pragma once

#include <string>
#include <vector>

#include "tpc/ir/graph.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/util/json_writer.h"

namespace tpc::shard {

struct CollectiveSummary {
  std::string kind;  // "all-reduce", ...
  int count = 0;
  double bytes = 0;  // whole-tensor bytes summed, at the --dim sizes
};

// Collectives per forward, grouped by kind (in a fixed order).
std::vector<CollectiveSummary> SummarizeCollectives(const ShardResult& result);

// Writes the stage's fields into the object `json` has open: options, placements of
// every value, fallback ops, collectives, weight bytes, solver statistics.
void WriteShardReport(const ir::Graph& graph, const ShardResult& result,
                      const ShardOptions& options, JsonWriter& json);

// A few lines for humans.
std::string ShardSummary(const ShardResult& result, const ShardOptions& options);

}  // namespace tpc::shard
