#include "tpc/shard/report.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tpc::shard {

std::vector<CollectiveSummary> SummarizeCollectives(const ShardResult& result) {
  const CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                  CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll};
  std::vector<CollectiveSummary> out;
  for (CollectiveKind k : kinds) {
    CollectiveSummary s{CollectiveName(k), 0, 0};
    for (const PlannedCollective& c : result.collectives) {
      if (c.kind != k) continue;
      ++s.count;
      s.bytes += c.bytes;
    }
    if (s.count > 0) out.push_back(s);
  }
  return out;
}

void WriteShardReport(const ir::Graph& graph, const ShardResult& result,
                      const ShardOptions& options, JsonWriter& json) {
  json.Key("options").BeginObject();
  json.Field("tp", options.mesh.tp());
  json.Field("objective", std::string(ObjectiveName(options.objective)));
  if (options.objective == Objective::kBalanced) json.Field("weight_slack", options.weight_slack);
  json.Field("device_profile", options.profile.name);
  json.Field("sequence_parallel", options.sequence_parallel);
  json.Key("dims").BeginObject();
  for (const auto& [name, size] : options.dim_sizes) json.Field(name, size);
  json.EndObject();
  json.Field("default_dim_size", options.default_dim_size);
  json.EndObject();

  json.Key("solver").BeginObject();
  json.Field("decisions", static_cast<int64_t>(result.decisions));
  json.Field("largest_table", result.largest_table);
  json.Field("optimal", result.optimal);
  if (!result.note.empty()) json.Field("note", result.note);
  json.EndObject();

  if (result.slack) {
    // What the weight slack bought, against the memory objective's plan.
    const SlackTrade& t = *result.slack;
    json.Key("weight_slack").BeginObject();
    json.Field("slack", t.slack);
    json.Field("memory_plan_per_rank_bytes", t.memory_plan_bytes);
    json.Field("budget_per_rank_bytes", t.budget_bytes);
    json.Field("weight_bytes_added_per_rank", t.weight_bytes_added);
    json.Field("time_us_saved", t.time_us_saved);
    json.Field("collectives_saved", static_cast<int64_t>(t.collectives_saved));
    json.Field("price_ps_per_byte", t.price_ps_per_byte);
    json.EndObject();
  }

  json.Key("rewrites").BeginArray();
  for (const std::string& r : result.rewrites) json.String(r);
  json.EndArray();

  json.Key("weights").BeginObject();
  json.Field("total_bytes", result.weight_bytes_total);
  json.Field("per_rank_bytes", result.weight_bytes_per_rank);
  json.Field("ideal_per_rank_bytes",
             result.weight_bytes_total / static_cast<double>(options.mesh.tp()));
  json.EndObject();

  json.Key("collectives_per_forward").BeginArray();
  for (const CollectiveSummary& s : SummarizeCollectives(result)) {
    json.BeginObject().Field("kind", s.kind).Field("count", static_cast<int64_t>(s.count));
    json.Field("bytes", s.bytes).EndObject();
  }
  json.EndArray();

  json.Key("collectives").BeginArray();
  for (const PlannedCollective& c : result.collectives) {
    json.BeginObject().Field("kind", std::string(CollectiveName(c.kind)));
    if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter) {
      static const char* kReduce[] = {"sum", "max", "min", "avg"};
      json.Field("reduce", std::string(kReduce[static_cast<int>(c.reduce)]));
    }
    json.Field("bytes", c.bytes);
    if (c.value != nullptr) json.Field("value", c.value->name());
    if (c.user != nullptr)
      json.Field("consumer", c.user->name().empty() ? c.user->op_type() : c.user->name());
    if (!c.internal) json.Field("from", c.from.ToString()).Field("to", c.to.ToString());
    json.Field("inside_op", c.internal);
    json.EndObject();
  }
  json.EndArray();

  json.Key("fallback_ops").BeginArray();
  for (const ir::Node* n : result.fallback_ops) {
    json.BeginObject().Field("node", n->name()).Field("op", n->op_type()).EndObject();
  }
  json.EndArray();

  json.Key("placements").BeginObject();
  for (ir::Node* n : graph.nodes()) {
    for (const ir::Value* v : n->outputs()) {
      if (v->sharding()) json.Field(v->name(), v->sharding()->ToString());
    }
  }
  json.EndObject();
}

std::string ShardSummary(const ShardResult& result, const ShardOptions& options) {
  std::string out = absl::StrFormat(
      "  weights per rank: %.2f MiB of %.2f MiB (%.3f x total/N)\n",
      result.weight_bytes_per_rank / 1048576.0, result.weight_bytes_total / 1048576.0,
      result.weight_bytes_per_rank /
          (result.weight_bytes_total / static_cast<double>(options.mesh.tp())));
  // The bytes depend on the symbolic dims: say which sizes they were computed at.
  std::vector<std::string> dims;
  for (const auto& [name, size] : options.dim_sizes) dims.push_back(absl::StrCat(name, "=", size));
  absl::StrAppend(&out, "  collectives per forward, at ",
                  dims.empty() ? "" : absl::StrCat(absl::StrJoin(dims, ", "), " and "),
                  dims.empty() ? "every" : "any other",
                  " symbolic dim = ", options.default_dim_size,
                  dims.empty() ? " (set them with --dim)" : "", ":");
  auto summary = SummarizeCollectives(result);
  if (summary.empty()) absl::StrAppend(&out, " none");
  for (const CollectiveSummary& s : summary) {
    absl::StrAppend(&out,
                    absl::StrFormat(" %d %s (%.1f MiB)", s.count, s.kind, s.bytes / 1048576.0));
  }
  absl::StrAppend(&out, "\n");
  if (result.slack && result.slack->time_us_saved > 0) {
    const SlackTrade& t = *result.slack;
    absl::StrAppend(
        &out, absl::StrFormat("  weight slack %.3g%%: %+.3f MiB of weights per rank (%+.1f%%) "
                              "bought %.2f us less modelled step time per forward",
                              100 * t.slack, t.weight_bytes_added / 1048576.0,
                              100 * t.weight_bytes_added / t.memory_plan_bytes, t.time_us_saved));
    if (t.collectives_saved > 0) {
      absl::StrAppend(&out, " (", t.collectives_saved, " fewer collectives)");
    }
    absl::StrAppend(&out, "\n");
  }
  if (!result.rewrites.empty()) {
    absl::StrAppend(&out,
                    "  rewritten before solving (report.json lists each): ", result.rewrites.size(),
                    "\n");
    for (size_t i = 0; i < result.rewrites.size() && i < 3; ++i) {
      absl::StrAppend(&out, "    ", result.rewrites[i], "\n");
    }
  }
  if (!result.fallback_ops.empty()) {
    std::map<std::string, int> ops;
    for (const ir::Node* n : result.fallback_ops) ++ops[n->op_type()];
    absl::StrAppend(&out, "  ops with no sharding rule (replicated):");
    for (const auto& [op, count] : ops) absl::StrAppend(&out, " ", op, " x", count);
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace tpc::shard
