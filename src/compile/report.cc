// The report gathered once, written as report.json and as tp-compile's summary.
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tpc/compile/report.h"
#include "tpc/util/json_writer.h"

namespace tpc::compile {
namespace {

const char* ReduceName(ir::ReduceOp op) {
  static const char* kReduce[] = {"sum", "max", "min", "avg"};
  return kReduce[static_cast<int>(op)];
}

std::vector<CollectiveSummary> Summarize(const std::vector<ReportCollective>& collectives) {
  std::vector<CollectiveSummary> out;
  for (const char* kind : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}) {
    CollectiveSummary s{kind, 0, 0};
    for (const ReportCollective& c : collectives) {
      if (c.kind != kind) continue;
      ++s.count;
      s.bytes += c.bytes;
    }
    if (s.count > 0) out.push_back(s);
  }
  return out;
}

bool IsDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

}  // namespace

std::string LayerOf(const std::string& name) {
  // Split on the separators of both naming schemes ('/' for node paths, '.' for module
  // paths) and look for a layer word followed by its index.
  std::vector<std::string> parts;
  std::string cur;
  for (char c : name) {
    if (c == '/' || c == '.' || c == ':') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& w = parts[i];
    if ((w == "layers" || w == "layer" || w == "h" || w == "blocks" || w == "block") &&
        IsDigits(parts[i + 1])) {
      return absl::StrCat(w, ".", parts[i + 1]);
    }
  }
  return "";
}

void CollectShardReport(const ir::Graph& graph, const shard::ShardResult& result,
                        const shard::ShardOptions& options, Report& report) {
  report.tp = options.mesh.tp();
  report.objective = shard::ObjectiveName(options.objective);
  if (options.objective == shard::Objective::kBalanced) report.weight_slack = options.weight_slack;
  report.device_profile = options.profile.name;
  report.sequence_parallel = options.sequence_parallel;
  report.dims = options.dim_sizes;
  report.default_dim_size = options.default_dim_size;
  if (graph.HasDataSizedDim()) report.data_sized_dim_size = options.data_sized_dim_size;
  report.decisions = result.decisions;
  report.largest_table = result.largest_table;
  report.optimal = result.optimal;
  report.note = result.note;
  report.slack = result.slack;
  report.rewrites = result.rewrites;
  report.weight_bytes_total = result.weight_bytes_total;
  report.weight_bytes_per_rank = result.weight_bytes_per_rank;

  report.collectives.clear();
  for (const shard::PlannedCollective& c : result.collectives) {
    ReportCollective rc;
    rc.kind = shard::CollectiveName(c.kind);
    if (c.kind == shard::CollectiveKind::kAllReduce ||
        c.kind == shard::CollectiveKind::kReduceScatter) {
      rc.reduce = ReduceName(c.reduce);
    }
    rc.bytes = c.bytes;
    if (c.value != nullptr) rc.value = c.value->name();
    if (c.user != nullptr)
      rc.consumer = c.user->name().empty() ? c.user->op_type() : c.user->name();
    rc.inside_op = c.internal;
    if (!c.internal) {
      rc.from = c.from.ToString();
      rc.to = c.to.ToString();
    }
    rc.layer = LayerOf(!rc.consumer.empty() ? rc.consumer : rc.value);
    if (rc.layer.empty()) rc.layer = LayerOf(rc.value);
    report.collectives.push_back(std::move(rc));
  }
  report.collectives_per_forward = Summarize(report.collectives);

  report.fallback_ops.clear();
  for (const ir::Node* n : result.fallback_ops)
    report.fallback_ops.emplace_back(n->name(), n->op_type());

  report.values.clear();
  for (ir::Node* n : graph.nodes()) {
    if (n->kind() == ir::NodeKind::kOutput) continue;
    for (const ir::Value* v : n->outputs()) {
      ReportValue rv;
      rv.name = v->name();
      rv.type = v->type().ToString();
      if (v->sharding()) rv.placement = v->sharding()->ToString();
      switch (n->kind()) {
        case ir::NodeKind::kPlaceholder:
          rv.producer = "input";
          break;
        case ir::NodeKind::kConstant:
          rv.producer = "constant";
          rv.weight = true;
          rv.bytes = static_cast<int64_t>(n->tensor().nbytes());
          for (const ir::Use& use : v->uses()) {
            if (use.user->is_call()) {
              rv.used_by = use.user->name();
              break;
            }
          }
          break;
        default:
          rv.producer = n->name();
          rv.op = n->op_type();
      }
      rv.layer = LayerOf(rv.weight && !rv.used_by.empty() ? rv.used_by
                         : rv.weight                      ? rv.name
                                                          : rv.producer);
      if (rv.layer.empty()) rv.layer = LayerOf(rv.name);
      report.values.push_back(std::move(rv));
    }
  }
}

std::string ReportJson(const Report& r) {
  JsonWriter json;
  json.BeginObject();
  json.Key("options").BeginObject();
  json.Field("tp", r.tp);
  json.Field("dtype", r.dtype);
  json.Field("objective", r.objective);
  if (r.weight_slack) json.Field("weight_slack", *r.weight_slack);
  json.Field("device_profile", r.device_profile);
  json.Field("sequence_parallel", r.sequence_parallel);
  json.Key("dims").BeginObject();
  for (const auto& [name, size] : r.dims) json.Field(name, size);
  json.EndObject();
  json.Field("default_dim_size", r.default_dim_size);
  if (r.data_sized_dim_size) json.Field("data_sized_dim_size", *r.data_sized_dim_size);
  json.EndObject();

  json.Key("solver").BeginObject();
  json.Field("decisions", r.decisions);
  json.Field("largest_table", r.largest_table);
  json.Field("optimal", r.optimal);
  if (!r.note.empty()) json.Field("note", r.note);
  json.EndObject();

  if (r.slack) {
    // What the weight slack bought, against the memory objective's plan.
    const shard::SlackTrade& t = *r.slack;
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
  for (const std::string& s : r.rewrites) json.String(s);
  json.EndArray();

  json.Key("weights").BeginObject();
  json.Field("total_bytes", r.weight_bytes_total);
  json.Field("per_rank_bytes", r.weight_bytes_per_rank);
  json.Field("ideal_per_rank_bytes", r.weight_bytes_total / static_cast<double>(r.tp));
  json.EndObject();

  json.Key("collectives_per_forward").BeginArray();
  for (const CollectiveSummary& s : r.collectives_per_forward) {
    json.BeginObject().Field("kind", s.kind).Field("count", static_cast<int64_t>(s.count));
    json.Field("bytes", s.bytes).EndObject();
  }
  json.EndArray();

  json.Key("collectives").BeginArray();
  for (const ReportCollective& c : r.collectives) {
    json.BeginObject().Field("kind", c.kind);
    if (!c.reduce.empty()) json.Field("reduce", c.reduce);
    json.Field("bytes", c.bytes);
    if (!c.value.empty()) json.Field("value", c.value);
    if (!c.consumer.empty()) json.Field("consumer", c.consumer);
    if (!c.inside_op) json.Field("from", c.from).Field("to", c.to);
    json.Field("inside_op", c.inside_op);
    if (!c.layer.empty()) json.Field("layer", c.layer);
    json.EndObject();
  }
  json.EndArray();

  json.Key("fallback_ops").BeginArray();
  for (const auto& [node, op] : r.fallback_ops) {
    json.BeginObject().Field("node", node).Field("op", op).EndObject();
  }
  json.EndArray();

  json.Key("placements").BeginObject();
  for (const ReportValue& v : r.values) {
    if (!v.placement.empty()) json.Field(v.name, v.placement);
  }
  json.EndObject();

  // Each weight under its own name and under the node that reads it.
  json.Key("weight_placements").BeginArray();
  for (const ReportValue& v : r.values) {
    if (!v.weight) continue;
    json.BeginObject().Field("weight", v.name).Field("bytes", v.bytes);
    json.Field("placement", v.placement.empty() ? std::string("R") : v.placement);
    if (!v.used_by.empty()) json.Field("used_by", v.used_by);
    json.EndObject();
  }
  json.EndArray();

  json.Field("tpc_version", r.tpc_version);
  json.Field("model", r.model);
  json.Field("tp", r.tp);
  json.Key("per_rank_weight_bytes").BeginArray();
  for (int64_t b : r.per_rank_weight_bytes) json.Int(b);
  json.EndArray();
  json.Key("partition").BeginObject();
  json.Field("collectives_inserted", r.collectives_inserted);
  json.Field("local_shards", r.local_shards);
  json.Field("lowered_ops", r.lowered_ops);
  json.Field("removed_nodes", r.removed_nodes);
  json.Field("ops_per_rank", r.ops_per_rank);
  json.EndObject();
  json.Key("compile_seconds").BeginObject();
  for (const auto& [stage, seconds] : r.compile_seconds) json.Field(stage, seconds);
  json.EndObject();
  json.EndObject();
  return json.Finish();
}

std::string DimsPhrase(const Report& r) {
  std::vector<std::string> dims;
  for (const auto& [name, size] : r.dims) dims.push_back(absl::StrCat(name, "=", size));
  return absl::StrCat(dims.empty() ? "" : absl::StrCat(absl::StrJoin(dims, ", "), " and "),
                      dims.empty() ? "every" : "any other", " symbolic dim = ", r.default_dim_size,
                      r.data_sized_dim_size ? absl::StrCat(", every dim the data sizes (?) = ",
                                                           *r.data_sized_dim_size)
                                            : "");
}

namespace {

// Bytes in the unit that shows them: `512 B`, `1.5 KiB`, `832.0 MiB`, `1.25 GiB` (a
// small collective was "0.0 MiB"); `sign`: +/- always shown.
std::string HumanBytes(double bytes, bool sign = false) {
  const double a = std::abs(bytes);
  const char* s = sign ? (bytes < 0 ? "-" : "+") : (bytes < 0 ? "-" : "");
  if (a < 1024) return absl::StrFormat("%s%.0f B", s, a);
  if (a < 1048576) return absl::StrFormat("%s%.1f KiB", s, a / 1024);
  if (a < 1073741824) return absl::StrFormat("%s%.2f MiB", s, a / 1048576);
  return absl::StrFormat("%s%.2f GiB", s, a / 1073741824);
}

}  // namespace

std::string ReportSummary(const Report& r, const std::string& out_dir) {
  std::string out = absl::StrFormat("tp-compile: %s → %s (tp=%d%s%s)\n", r.model, out_dir, r.tp,
                                    r.sequence_parallel ? ", sequence parallel" : "",
                                    r.dtype != "f32" ? absl::StrCat(", ", r.dtype) : "");
  absl::StrAppend(
      &out, absl::StrFormat(
                "  weights per rank: %s of %s (%.3f x total/N)\n",
                HumanBytes(r.weight_bytes_per_rank), HumanBytes(r.weight_bytes_total),
                r.weight_bytes_per_rank / (r.weight_bytes_total / static_cast<double>(r.tp))));
  // The bytes depend on the symbolic dims: say which sizes they were computed at.
  absl::StrAppend(&out, "  collectives per forward, at ", DimsPhrase(r),
                  r.dims.empty() ? " (set them with --dim)" : "", ":");
  if (r.collectives_per_forward.empty()) absl::StrAppend(&out, " none");
  for (const CollectiveSummary& s : r.collectives_per_forward) {
    absl::StrAppend(&out, absl::StrFormat(" %d %s (%s)", s.count, s.kind, HumanBytes(s.bytes)));
  }
  absl::StrAppend(&out, "\n");
  if (r.slack && r.slack->time_us_saved > 0) {
    const shard::SlackTrade& t = *r.slack;
    absl::StrAppend(
        &out, absl::StrFormat("  weight slack %.3g%%: %s of weights per rank (%+.1f%%) "
                              "bought %.2f us less modelled step time per forward",
                              100 * t.slack, HumanBytes(t.weight_bytes_added, /*sign=*/true),
                              100 * t.weight_bytes_added / t.memory_plan_bytes, t.time_us_saved));
    if (t.collectives_saved > 0) {
      absl::StrAppend(&out, " (", t.collectives_saved, " fewer collectives)");
    }
    absl::StrAppend(&out, "\n");
  }
  if (!r.rewrites.empty()) {
    absl::StrAppend(
        &out, "  rewritten before solving (report.json lists each): ", r.rewrites.size(), "\n");
    for (size_t i = 0; i < r.rewrites.size() && i < 3; ++i) {
      absl::StrAppend(&out, "    ", r.rewrites[i], "\n");
    }
  }
  if (!r.fallback_ops.empty()) {
    std::map<std::string, int> ops;
    for (const auto& f : r.fallback_ops) ++ops[f.second];
    absl::StrAppend(&out, "  ops with no sharding rule (replicated):");
    for (const auto& [op, count] : ops) absl::StrAppend(&out, " ", op, " x", count);
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(
      &out, absl::StrFormat("  per rank: %d ops; inserted %d collectives, %d local shards, "
                            "%d lowered ops\n",
                            r.ops_per_rank, r.collectives_inserted, r.local_shards, r.lowered_ops));
  auto time = [&](const char* stage) {
    auto it = r.compile_seconds.find(stage);
    return it == r.compile_seconds.end() ? 0.0 : it->second;
  };
  absl::StrAppend(
      &out, absl::StrFormat("  time: import %.3f s, shard %.3f s, partition %.3f s, plan %.3f s\n",
                            time("import"), time("shard"), time("partition"), time("plan")));
  return out;
}

}  // namespace tpc::compile
