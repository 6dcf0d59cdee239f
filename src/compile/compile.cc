#include "tpc/compile/compile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/model_file.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/plan/precision.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/shard/styles.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/cli.h"
#include "tpc/util/sha256.h"
#include "tpc/util/staging_dir.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/suggest.h"
#include "tpc/util/write_error.h"

namespace tpc {
namespace {

using Clock = std::chrono::steady_clock;

// `--dim ?=SIZE`: the size of the dims only the data decides.
constexpr char kUnknownDimName[] = "?";

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

absl::StatusOr<ir::DType> ParseDType(const std::string& dtype) {
  if (dtype == "f32") return ir::DType::kF32;
  if (dtype == "f16") return ir::DType::kF16;
  if (dtype == "bf16") return ir::DType::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("--dtype ", dtype, ": expected f32, f16 or bf16"));
}

// The symbolic dims of the graph's inputs: what --dim, --divisible and --seq-dim name.
std::vector<std::string> InputSymbols(const ir::Graph& graph) {
  std::set<std::string> symbols;
  for (const ir::Value* v : graph.inputs()) {
    if (!v->type().shape) continue;
    for (const ir::Dim& dim : *v->type().shape) ir::CollectSymbols(dim, &symbols);
  }
  return {symbols.begin(), symbols.end()};
}

// The cost model's size of a dim only the data decides, when --dim ?=SIZE does not give
// it: the most elements the symbolic dims of one graph input span at the sizes given
// (batch·seq of token ids; a cached decoder's attention mask, batch·(past+seq)), at least
// the default dim size.
int64_t RowsOfLargestInput(const ir::Graph& graph, const shard::ShardOptions& options) {
  double most = static_cast<double>(options.default_dim_size);
  for (const ir::Value* v : graph.inputs()) {
    if (!v->type().shape) continue;
    double rows = 1;
    for (const ir::Dim& d : *v->type().shape) {
      if (!d.is_static()) rows *= shard::DimSize(d, options);
    }
    most = std::max(most, rows);
  }
  return static_cast<int64_t>(std::min(most, static_cast<double>(kMaxTensorElements)));
}

absl::StatusOr<shard::ShardOptions> ShardOptionsFor(const ir::Graph& graph,
                                                    const CompileOptions& o) {
  shard::ShardOptions out;
  if (o.tp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp must be a positive integer, got '", o.tp, "'"));
  }
  out.mesh = shard::Mesh::Tp(o.tp);
  auto objective = shard::ObjectiveFromName(o.objective);
  if (!objective) {
    return absl::InvalidArgumentError(
        absl::StrCat("--objective ", o.objective, ": expected balanced, memory or time"));
  }
  out.objective = *objective;
  if (o.weight_slack) {
    if (out.objective != shard::Objective::kBalanced) {
      return absl::InvalidArgumentError(
          absl::StrCat("--weight-slack applies to --objective balanced, not ", o.objective));
    }
    const double slack = *o.weight_slack;
    if (!(slack >= 0) || slack > 10) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--weight-slack ", slack, ": expected a fraction from 0 to 10 (0.05: 5% more)"));
    }
    out.weight_slack = slack;
  }
  if (o.seq_dim && !o.sequence_parallel && o.styles.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-dim ", *o.seq_dim,
                     " names the sequence dim of --sequence-parallel and of --styles' "
                     "'sequence': it goes with one of them"));
  }
  if (o.memory_budget) {
    if (out.objective != shard::Objective::kTime) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory-budget applies to --objective time, not ", o.objective,
                       " (the balanced objective's bound is --weight-slack)"));
    }
    TPC_ASSIGN_OR_RETURN(out.memory_budget_bytes,
                         cli::ParseByteSize("memory-budget", *o.memory_budget));
  }
  auto profile = shard::DeviceProfile::ByName(o.device_profile);
  if (!profile) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-profile ", o.device_profile, ": expected one of ",
                     absl::StrJoin(shard::DeviceProfile::Names(), ", ")));
  }
  out.profile = *profile;
  std::optional<int64_t> unknown_size;
  for (const auto& kv : o.dims) {
    if (kv.second < 1 || kv.second > kMaxTensorElements) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", kv.first, "=", kv.second,
                                                     ": expected NAME=SIZE with 0 < SIZE <= 2^48 (",
                                                     kMaxTensorElements, ")"));
    }
    if (kv.first == kUnknownDimName) {
      // As a named dim the model lacks: a typo or a wrong model, not a no-op.
      if (!graph.HasDataSizedDim()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--dim ", kUnknownDimName, "=", kv.second,
            ": the model has no dim sized by its data (NonZero's count, Compress's selection)"));
      }
      unknown_size = kv.second;
    } else {
      out.dim_sizes[kv.first] = kv.second;
    }
  }
  out.data_sized_dim_size = unknown_size.value_or(RowsOfLargestInput(graph, out));
  out.divisible.insert(o.divisible.begin(), o.divisible.end());
  out.sequence_parallel = o.sequence_parallel;
  out.seq_symbol = o.seq_dim.value_or("seq");
  // A dim the model does not have is a typo, not a no-op.
  const std::vector<std::string> known = InputSymbols(graph);
  auto check = [&](const std::string& flag, const std::string& name) -> absl::Status {
    if (std::find(known.begin(), known.end(), name) != known.end()) return absl::OkStatus();
    return absl::InvalidArgumentError(UnknownNameMessage(flag, "symbolic input dim", name, known));
  };
  for (const auto& kv : out.dim_sizes) TPC_RETURN_IF_ERROR(check("--dim", kv.first));
  for (const std::string& d : out.divisible) TPC_RETURN_IF_ERROR(check("--divisible", d));
  if (out.sequence_parallel || o.seq_dim) TPC_RETURN_IF_ERROR(check("--seq-dim", out.seq_symbol));
  // A dim declared divisible (or split by sequence parallelism) must be, at the size given.
  std::set<std::string> must_divide = out.divisible;
  if (out.sequence_parallel) must_divide.insert(out.seq_symbol);
  for (const std::string& name : must_divide) {
    auto it = out.dim_sizes.find(name);
    if (it != out.dim_sizes.end() && it->second % o.tp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dim ", name, "=", it->second, " is not divisible by --tp ", o.tp, ", but ", name,
          " must split across the ranks", out.sequence_parallel ? " (--sequence-parallel)" : ""));
    }
  }
  for (const std::string& a : o.input_placements) {
    TPC_ASSIGN_OR_RETURN(auto named, shard::ParseNamedPlacement(a, graph, true));
    for (const auto& np : named) out.input_placements[np.first] = np.second;
  }
  for (const std::string& a : o.output_placements) {
    TPC_ASSIGN_OR_RETURN(auto named, shard::ParseNamedPlacement(a, graph, false));
    for (const auto& np : named) out.output_placements[np.first] = np.second;
  }
  return out;
}

// The options as tp-compile's flags, recorded in plan.json.
std::map<std::string, std::string> Recorded(const CompileOptions& o) {
  std::map<std::string, std::string> out;
  out["tp"] = absl::StrCat(o.tp);
  if (o.dtype != "f32") out["dtype"] = o.dtype;
  if (o.objective != "balanced") out["objective"] = o.objective;
  if (o.weight_slack) out["weight-slack"] = absl::StrCat(*o.weight_slack);
  if (o.memory_budget) out["memory-budget"] = *o.memory_budget;
  if (o.device_profile != "h100-nvlink") out["device-profile"] = o.device_profile;
  if (!o.styles.empty()) out["styles"] = o.styles_origin;
  if (o.seq_dim) out["seq-dim"] = *o.seq_dim;
  if (o.sequence_parallel) out["sequence-parallel"] = "true";
  std::vector<std::string> dims;
  for (const auto& kv : o.dims) dims.push_back(absl::StrCat(kv.first, "=", kv.second));
  if (!dims.empty()) out["dim"] = absl::StrJoin(dims, " ");
  if (!o.divisible.empty()) out["divisible"] = absl::StrJoin(o.divisible, " ");
  if (!o.input_placements.empty()) out["input-placement"] = absl::StrJoin(o.input_placements, " ");
  if (!o.output_placements.empty())
    out["output-placement"] = absl::StrJoin(o.output_placements, " ");
  return out;
}

absl::Status AfterStage(const CompileOptions& o, const std::string& stage, const ir::Graph& g) {
  return o.after_stage ? o.after_stage(stage, g) : absl::OkStatus();
}

}  // namespace

CompiledPlan::CompiledPlan(CompiledPlan&&) noexcept = default;
CompiledPlan& CompiledPlan::operator=(CompiledPlan&&) noexcept = default;
CompiledPlan::~CompiledPlan() = default;

absl::StatusOr<CompiledPlan> CompileLoaded(std::unique_ptr<ir::Graph> graph, std::string source,
                                           std::string source_sha256,
                                           const CompileOptions& options) {
  CompiledPlan plan;
  plan.source_path_ = source;
  plan.source_sha256_ = std::move(source_sha256);
  plan.recorded_options_ = Recorded(options);
  compile::Report& report = plan.report_;
  report.model = std::move(source);
  report.tpc_version = plan::Version();
  report.tp = options.tp;
  report.dtype = options.dtype;
  TPC_ASSIGN_OR_RETURN(const ir::DType dtype, ParseDType(options.dtype));
  // (The Python module passes its default as f32, not as given.)
  if (options.dtype_given || dtype != ir::DType::kF32) {
    TPC_RETURN_IF_ERROR(plan::CheckConvertible(*graph, dtype));
  }
  TPC_ASSIGN_OR_RETURN(const shard::ShardOptions shard_options, ShardOptionsFor(*graph, options));

  auto t = Clock::now();
  shard::Constraints constraints;
  if (!options.styles.empty()) {
    TPC_ASSIGN_OR_RETURN(constraints, shard::ParseStyles(options.styles, options.styles_origin,
                                                         *graph, shard_options));
  }
  for (const std::string& name : options.explain) {
    TPC_ASSIGN_OR_RETURN(std::string text,
                         shard::ExplainValue(*graph, shard_options, constraints, name));
    if (options.explained) options.explained(text);
    plan.explanations_.push_back(std::move(text));
  }
  TPC_ASSIGN_OR_RETURN(shard::ShardResult shard,
                       shard::ShardGraph(*graph, shard_options, constraints));
  report.compile_seconds["shard"] = Seconds(t);
  // Under the memory objective every weight that can split does; none did. (The
  // balanced objective's plan is the memory objective's unless the slack bought
  // something, and a slack of N-1 or more may replicate everything.)
  const bool memory_plan = shard_options.objective == shard::Objective::kMemory ||
                           (shard_options.objective == shard::Objective::kBalanced &&
                            (!shard.slack || shard.slack->time_us_saved <= 0));
  if (options.tp > 1 && memory_plan && shard.weight_bytes_total > 0 &&
      shard.weight_bytes_per_rank >= shard.weight_bytes_total) {
    // Say why rather than blame the sizes: weights of integers (or booleans) stay whole,
    // a weight smaller than N cannot split, and values of unknown rank (a graph input
    // declared without a shape, and all that follows from it) are not split.
    bool float_weight = false, large_weight = false, divisible_weight = false;
    for (const ir::Node* n : graph->nodes()) {
      if (n->kind() != ir::NodeKind::kConstant || !ir::IsFloating(n->tensor().dtype())) continue;
      float_weight = true;
      large_weight = large_weight || n->tensor().num_elements() >= options.tp;
      for (int64_t d : n->tensor().shape())
        divisible_weight = divisible_weight || d % options.tp == 0;
    }
    std::string unranked;
    for (const ir::Value* in : graph->inputs()) {
      if (!in->type().has_rank() && unranked.empty()) unranked = in->name();
    }
    const std::string why =
        !unranked.empty() && divisible_weight
            ? absl::StrCat("(graph input '", unranked,
                           "' is declared without a shape: tpc splits only values of known "
                           "rank; declare its dims in the model)")
        : !float_weight ? "(it has no float weights: tpc splits float weights only)"
        : !large_weight
            ? absl::StrCat("(every float weight has fewer than ", options.tp, " elements)")
            : "(try a --tp that divides the hidden size)";
    return absl::InvalidArgumentError(absl::StrCat("--tp ", options.tp, ": no weight of ",
                                                   report.model, " splits into ", options.tp,
                                                   " equal parts, so every rank would hold the "
                                                   "whole model ",
                                                   why));
  }
  TPC_RETURN_IF_ERROR(AfterStage(options, "shard", *graph));
  // Taken before partitioning rewrites the values the report names.
  compile::CollectShardReport(*graph, shard, shard_options, report);

  t = Clock::now();
  TPC_ASSIGN_OR_RETURN(partition::PartitionStats stats,
                       partition::PartitionGraph(*graph, shard, shard_options));
  TPC_RETURN_IF_ERROR(plan::ConvertFloatPrecision(*graph, dtype));
  TPC_RETURN_IF_ERROR(ir::VerifyGraph(*graph));
  report.compile_seconds["partition"] = Seconds(t);
  TPC_RETURN_IF_ERROR(AfterStage(options, "partition", *graph));
  report.collectives_inserted = stats.collectives;
  report.local_shards = stats.local_shards;
  report.lowered_ops = stats.lowered_ops;
  report.removed_nodes = stats.removed_nodes;
  for (ir::Node* n : graph->nodes()) report.ops_per_rank += n->is_call() ? 1 : 0;
  report.per_rank_weight_bytes.assign(static_cast<size_t>(options.tp),
                                      plan::RankWeightBytes(*graph, options.tp));
  plan.graph_ = std::move(graph);
  return plan;
}

absl::StatusOr<CompiledPlan> Compile(const std::string& model_path, const CompileOptions& options) {
  // Refuse a bad option before reading a large model.
  TPC_RETURN_IF_ERROR(ParseDType(options.dtype).status());
  auto t = Clock::now();
  TPC_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> graph, onnx::ImportModel(model_path));
  const double import_seconds = Seconds(t);
  TPC_RETURN_IF_ERROR(AfterStage(options, "import", *graph));
  TPC_ASSIGN_OR_RETURN(std::string hash, Sha256File(model_path));
  TPC_ASSIGN_OR_RETURN(CompiledPlan plan,
                       CompileLoaded(std::move(graph), model_path, std::move(hash), options));
  plan.report_.compile_seconds["import"] = import_seconds;
  return plan;
}

absl::StatusOr<CompiledPlan> CompileBytes(std::shared_ptr<const MappedFile> bytes,
                                          const std::string& name, const std::string& model_dir,
                                          const CompileOptions& options) {
  TPC_RETURN_IF_ERROR(ParseDType(options.dtype).status());
  auto t = Clock::now();
  TPC_ASSIGN_OR_RETURN(onnx::ModelFile model, onnx::ReadModelBytes(bytes, name));
  TPC_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> graph, onnx::ImportModelFile(model, model_dir));
  const double import_seconds = Seconds(t);
  TPC_RETURN_IF_ERROR(AfterStage(options, "import", *graph));
  Sha256 hash;
  hash.Update(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  TPC_ASSIGN_OR_RETURN(CompiledPlan plan,
                       CompileLoaded(std::move(graph), name, hash.HexDigest(), options));
  plan.report_.compile_seconds["import"] = import_seconds;
  return plan;
}

absl::Status CheckPlanFolder(const std::string& dir, bool force, const std::string& model,
                             const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) return absl::OkStatus();  // StagingDir says what is wrong with it
  auto within = [&folder](const fs::path& p) {
    auto f = folder.begin();
    auto i = p.begin();
    for (; f != folder.end(); ++f, ++i) {
      if (i == p.end() || *i != *f) return false;
    }
    return true;
  };
  if (!model.empty() && fs::is_regular_file(model, ec)) {
    const fs::path abs = fs::absolute(model, ec);
    const fs::path named = fs::weakly_canonical(abs.parent_path(), ec) / abs.filename();
    if (within(named) || within(fs::weakly_canonical(abs, ec))) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " holds the model ", model,
          ", and the plan replaces that folder whole: choose another folder (a new one)"));
    }
  }
  if (fs::is_directory(folder, ec) && !fs::is_empty(folder, ec) &&
      !fs::exists(folder / "plan.json", ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat(flag,
                     " is not empty and is not a plan (it has no plan.json): a plan goes to a new "
                     "folder, or replaces a plan when forced; choose another folder",
                     force ? " (force does not replace a folder of other files)" : ""));
  }
  return absl::OkStatus();
}

absl::Status CompiledPlan::Save(const std::string& dir, const SaveOptions& options) {
  TPC_RETURN_IF_ERROR(CheckPlanFolder(dir, options.force, source_path_, dir));
  TPC_ASSIGN_OR_RETURN(StagingDir staging, StagingDir::Create(dir, options.force));
  if (options.notes) {
    for (const std::string& note : staging.removed()) options.notes(note);
  }
  auto t = Clock::now();
  plan::PlanOptions po;
  po.tp = report_.tp;
  // The model's absolute path, which still names it once the plan is moved (a model given
  // as bytes keeps its name).
  std::error_code ec;
  const std::filesystem::path source = std::filesystem::absolute(source_path_, ec);
  po.source_model = !ec && std::filesystem::is_regular_file(source, ec)
                        ? source.lexically_normal().string()
                        : source_path_;
  po.source_sha256 = source_sha256_;
  po.options = recorded_options_;
  po.progress = options.progress;
  const absl::Status written = [&]() -> absl::Status {
    TPC_ASSIGN_OR_RETURN(std::vector<plan::RankFiles> ranks,
                         plan::WriteRankFiles(*graph_, staging.path(), po));
    TPC_RETURN_IF_ERROR(plan::WriteManifest(*graph_, ranks, staging.path(), po));
    report_.compile_seconds["plan"] = Seconds(t);
    for (const auto& [name, text] :
         {std::pair<std::string, std::string>{"report.json", compile::ReportJson(report_)},
          {"report.html", compile::ReportHtml(report_)}}) {
      std::ofstream out(staging.File(name), std::ios::trunc | std::ios::binary);
      if (!out) return WriteError(staging.File(name), errno, /*opening=*/true);
      if (!(out << text) || !out.flush()) return WriteError(staging.File(name), errno, false);
    }
    return absl::OkStatus();
  }();
  if (!written.ok()) {
    // Named by the files the plan would have (the temporary folder goes with the error).
    return absl::Status(
        written.code(),
        absl::StrCat(absl::StrReplaceAll(written.message(), {{staging.path(), staging.target()}}),
                     " (nothing was written)"));
  }
  return staging.Commit();
}

absl::StatusOr<::onnx::ModelProto> CompiledPlan::RankModel(int64_t rank) const {
  if (rank < 0 || rank >= report_.tp) {
    return absl::OutOfRangeError(
        absl::StrCat("rank ", rank, ": the plan has ranks 0 to ", report_.tp - 1));
  }
  plan::PlanOptions po;
  po.tp = report_.tp;
  po.source_model = source_path_;
  po.source_sha256 = source_sha256_;
  return plan::RankModelProto(*graph_, rank, po);
}

}  // namespace tpc
