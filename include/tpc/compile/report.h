// What a compilation decided, gathered once (tpc::Compile) and rendered three ways:
// report.json, report.html and the summary tp-compile prints.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpc/ir/graph.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"

namespace tpc::compile {

struct CollectiveSummary {
  std::string kind;  // "all-reduce", ...
  int count = 0;
  double bytes = 0;  // whole-tensor bytes summed, at the report's dims
};

struct ReportCollective {
  std::string kind;
  std::string reduce;  // all-reduce and reduce-scatter only
  double bytes = 0;    // whole-tensor bytes at the report's dims
  std::string value;
  std::string consumer;  // node name (or op type); empty: a graph output
  std::string from, to;  // empty when inside_op
  bool inside_op = false;
  std::string layer;  // see LayerOf
};

// One value of the graph before partitioning, in graph order.
struct ReportValue {
  std::string name;
  std::string type;       // "f32[batch, seq, 768]"
  std::string placement;  // "S(1)", "R"; empty: no sharding decided (replicated)
  std::string producer;   // node name, or "input" / "constant"
  std::string op;         // op type of the producer ("" for inputs and constants)
  bool weight = false;    // an initializer
  int64_t bytes = 0;      // weights only: bytes unsharded
  std::string used_by;    // weights only: the first consumer's node name
  std::string layer;
};

struct Report {
  std::string model;
  std::string tpc_version;
  int64_t tp = 1;
  std::string dtype = "f32";
  // The options that shaped the plan.
  std::string objective;
  std::optional<double> weight_slack;
  std::string device_profile;
  bool sequence_parallel = false;
  std::map<std::string, int64_t> dims;         // --dim sizes
  int64_t default_dim_size = 0;                // every other symbolic dim
  std::optional<int64_t> data_sized_dim_size;  // dims only the data decides, if the graph has any
  // The solver.
  int64_t decisions = 0;
  int64_t largest_table = 0;
  bool optimal = true;
  std::string note;
  std::optional<shard::SlackTrade> slack;
  std::vector<std::string> rewrites;
  // Weights.
  double weight_bytes_total = 0;
  double weight_bytes_per_rank = 0;
  std::vector<int64_t> per_rank_weight_bytes;  // as the rank files hold them
  // Collectives per forward.
  std::vector<CollectiveSummary> collectives_per_forward;
  std::vector<ReportCollective> collectives;
  std::vector<std::pair<std::string, std::string>> fallback_ops;  // node name, op type
  std::vector<ReportValue> values;
  // The partition stage.
  int64_t collectives_inserted = 0;
  int64_t local_shards = 0;
  int64_t lowered_ops = 0;
  int64_t removed_nodes = 0;
  int64_t ops_per_rank = 0;
  std::map<std::string, double> compile_seconds;  // stage -> seconds
};

// The layer a node or value name belongs to, as people name them: "layers.3", "h.0",
// "layer.11", "blocks.2", "block.1" (from "/model/layers.3/mlp/..." or
// "m.transformer.h.0.attn.c_attn.weight"); "" outside any layer.
std::string LayerOf(const std::string& name);

// The shard stage's part of the report; taken before partitioning rewrites the values
// it names.
void CollectShardReport(const ir::Graph& graph, const shard::ShardResult& result,
                        const shard::ShardOptions& options, Report& report);

// report.json (README.md, "What tp-compile writes", lists its fields).
std::string ReportJson(const Report& report);

// report.html: one self-contained page (no script or style from the network).
std::string ReportHtml(const Report& report);

// "batch=4 and any other symbolic dim = 512": the sizes the bytes were computed at.
std::string DimsPhrase(const Report& report);

// The few lines tp-compile prints.
std::string ReportSummary(const Report& report, const std::string& out_dir);

}  // namespace tpc::compile
