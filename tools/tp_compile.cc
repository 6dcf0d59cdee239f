// tp-compile: an ONNX model → one plan per tensor-parallel rank.
//
//   import → shard (rules + solver) → partition (collectives, per-rank shapes) → plan
//
// Writes DIR/rank{i}.onnx + DIR/rank{i}.weights for every rank, DIR/plan.json (the
// manifest) and DIR/report.json, all or nothing (a temporary folder renamed into
// place), and prints a short summary.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tpc/ir/printer.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/plan/precision.h"
#include "tpc/shard/report.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/shard/styles.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/cli.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/json_writer.h"
#include "tpc/util/staging_dir.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/suggest.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

tpc::cli::Parser MakeParser() {
  tpc::cli::Parser p(
      "tp-compile", "MODEL.onnx -o DIR [--tp N] [options]",
      "Compiles an ONNX model into tensor-parallel plans: DIR/rank{i}.onnx with each rank's\n"
      "weights in DIR/rank{i}.weights, the manifest DIR/plan.json and DIR/report.json.\n"
      "Every tensor's split is chosen by a cost model and an exact solver (no annotations\n"
      "needed); DIR is written all or nothing.");
  p.Add({"output", "DIR", "output folder for the plans (required)", "", false});
  p.Add({"tp", "N", "number of tensor-parallel ranks", "1", false});
  p.Add({"dtype", "TYPE",
         "f32, f16 or bf16: the plans' float type (weights converted as they are sliced; f32 "
         "inputs and outputs keep their type, cast at the boundary)",
         "f32", false});
  p.Add({"objective", "KIND",
         "balanced: weight bytes per rank within --weight-slack of the least, then the shortest "
         "modelled step; memory: weight bytes per rank first, then collective time; "
         "time: modelled step time (compute + collectives)",
         "balanced", false});
  p.Add({"weight-slack", "FRACTION",
         "with --objective balanced: how many more weight bytes per rank than the memory "
         "objective's plan a plan may hold for a shorter modelled step (0.05: 5%)",
         "0.05", false});
  p.Add({"memory-budget", "BYTES",
         "with --objective time: most weight bytes per rank (123456, 512MiB, 1GB)", "", false});
  p.Add({"device-profile", "NAME", "h100-nvlink, a100-nvlink or pcie4", "h100-nvlink", false});
  p.Add({"dim", "NAME=SIZE",
         "size of a symbolic dim for the cost model (unset dims: 512); a "
         "size N divides also makes the dim divisible",
         "", true});
  p.Add({"divisible", "NAME", "assume the symbolic dim NAME divides by N", "", true});
  p.Add({"sequence-parallel", "",
         "keep activations between blocks split on the sequence "
         "(dim 'seq'; all-gather before / reduce-scatter after blocks)",
         "", false});
  p.Add({"seq-dim", "NAME", "name of the sequence dim for --sequence-parallel", "seq", false});
  p.Add({"styles", "FILE",
         "user constraints: lines 'PATTERN: colwise|rowwise|replicate|"
         "sequence|PLACEMENT' (see README)",
         "", false});
  p.Add({"input-placement", "NAME=P",
         "placement of a graph input (R, S(d), S(-1)); NAME may be a glob "
         "('past_*=S(1)')",
         "R", true});
  p.Add({"output-placement", "NAME=P",
         "placement of a graph output (NAME may be a glob); S(-1) on logits "
         "skips the final gather",
         "R", true});
  p.Add({"explain", "NAME", "print why value NAME got its placement", "", true});
  p.Add({"dump-ir", "FILE",
         "where --dump-ir-after writes ('-' for stdout); alone, dumps "
         "the IR after sharding",
         "-", false});
  p.Add({"dump-ir-after", "STAGE", "dump the IR after import, shard or partition", "", true});
  p.Add({"force", "", "replace DIR if it exists and is not empty", "", false});
  p.Add({"quiet", "", "print nothing but errors", "", false});
  return p;
}

absl::Status WriteText(const std::string& target, const std::string& text, bool append) {
  if (target == "-") {
    std::cout << text;
    std::cout.flush();
    return absl::OkStatus();
  }
  std::ofstream out(target, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  if (!out || !(out << text) || !out.flush()) {
    return absl::PermissionDeniedError(absl::StrCat(target, ": cannot write the IR dump"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PositiveInt(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be a positive integer, got '", text, "'"));
  }
  return v;
}

class Compiler {
 public:
  explicit Compiler(const tpc::cli::Args& args) : args_(args) {}

  absl::Status Run() {
    if (args_.positional().size() != 1) {
      return absl::InvalidArgumentError("expected exactly one MODEL.onnx (see --help)");
    }
    model_path_ = args_.positional()[0];
    const std::string out_dir = args_.get("output");
    if (out_dir.empty()) return absl::InvalidArgumentError("missing -o DIR (see --help)");
    TPC_ASSIGN_OR_RETURN(tp_, PositiveInt("tp", args_.get("tp", "1")));
    TPC_RETURN_IF_ERROR(ParseDumpStages());
    quiet_ = args_.has("quiet");

    // Refuse a bad output folder before any work.
    TPC_ASSIGN_OR_RETURN(tpc::StagingDir staging,
                         tpc::StagingDir::Create(out_dir, args_.has("force")));
    for (const std::string& note : staging.removed()) std::cerr << "tp-compile: " << note << "\n";

    auto t = Clock::now();
    TPC_ASSIGN_OR_RETURN(graph_, tpc::onnx::ImportModel(model_path_));
    times_["import"] = Seconds(t);
    TPC_RETURN_IF_ERROR(Dump("import"));

    TPC_RETURN_IF_ERROR(ShardOptionsFromArgs());
    t = Clock::now();
    TPC_ASSIGN_OR_RETURN(tpc::shard::Constraints constraints, ConstraintsFromArgs());
    for (const std::string& name : args_.all("explain")) {
      TPC_ASSIGN_OR_RETURN(std::string text,
                           tpc::shard::ExplainValue(*graph_, options_, constraints, name));
      std::cout << text;
    }
    TPC_ASSIGN_OR_RETURN(shard_, tpc::shard::ShardGraph(*graph_, options_, constraints));
    times_["shard"] = Seconds(t);
    // Under the memory objective every weight that can split does; none did. (The
    // balanced objective's plan is the memory objective's unless the slack bought
    // something, and a slack of N-1 or more may replicate everything.)
    const bool memory_plan = options_.objective == tpc::shard::Objective::kMemory ||
                             (options_.objective == tpc::shard::Objective::kBalanced &&
                              (!shard_.slack || shard_.slack->time_us_saved <= 0));
    if (tp_ > 1 && memory_plan && shard_.weight_bytes_total > 0 &&
        shard_.weight_bytes_per_rank >= shard_.weight_bytes_total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tp ", tp_, ": no weight of ", model_path_, " splits into ", tp_,
          " equal parts, so every rank would hold the whole model (try a --tp that divides the "
          "hidden size)"));
    }
    TPC_RETURN_IF_ERROR(Dump("shard"));
    // The report starts with the shard stage's fields, taken before partitioning
    // rewrites the values they name.
    report_.BeginObject();
    tpc::shard::WriteShardReport(*graph_, shard_, options_, report_);
    shard_summary_ = tpc::shard::ShardSummary(shard_, options_);  // before partition changes nodes

    t = Clock::now();
    TPC_ASSIGN_OR_RETURN(partition_, tpc::partition::PartitionGraph(*graph_, shard_, options_));
    TPC_RETURN_IF_ERROR(tpc::plan::ConvertFloatPrecision(*graph_, dtype_));
    TPC_RETURN_IF_ERROR(tpc::ir::VerifyGraph(*graph_));
    times_["partition"] = Seconds(t);
    TPC_RETURN_IF_ERROR(Dump("partition"));

    t = Clock::now();
    tpc::plan::PlanOptions po;
    po.tp = tp_;
    po.source_model = model_path_;
    po.options = RecordedOptions();
    if (!quiet_ && ::isatty(2)) po.progress = Progress;
    TPC_ASSIGN_OR_RETURN(ranks_, tpc::plan::WriteRankFiles(*graph_, staging.path(), po));
    if (po.progress) std::fprintf(stderr, "\n");
    TPC_RETURN_IF_ERROR(tpc::plan::WriteManifest(*graph_, ranks_, staging.path(), po));
    times_["plan"] = Seconds(t);
    TPC_RETURN_IF_ERROR(WriteReport(staging.File("report.json")));
    TPC_RETURN_IF_ERROR(staging.Commit());
    if (!quiet_) PrintSummary(out_dir);
    return absl::OkStatus();
  }

 private:
  static void Progress(int64_t done, int64_t total) {
    if (total < (int64_t{64} << 20)) return;  // small models: no bar
    std::fprintf(stderr, "\rtp-compile: writing weights %3d%% (%.2f / %.2f GiB)",
                 static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)),
                 static_cast<double>(done) / (1 << 30), static_cast<double>(total) / (1 << 30));
  }

  absl::Status ParseDumpStages() {
    for (const std::string& s : args_.all("dump-ir-after")) {
      if (s != "import" && s != "shard" && s != "partition") {
        return absl::InvalidArgumentError(
            absl::StrCat("--dump-ir-after ", s, ": expected import, shard or partition"));
      }
      dump_after_.push_back(s);
    }
    if (dump_after_.empty() && args_.has("dump-ir")) dump_after_.push_back("shard");
    return absl::OkStatus();
  }

  absl::Status Dump(const std::string& stage) {
    if (std::find(dump_after_.begin(), dump_after_.end(), stage) == dump_after_.end())
      return absl::OkStatus();
    std::string text = tpc::ir::PrintGraph(*graph_);
    if (dump_after_.size() > 1) text = absl::StrCat("# IR after ", stage, "\n", text);
    const bool append = dumped_;
    dumped_ = true;
    return WriteText(args_.get("dump-ir", "-"), text, append);
  }

  absl::Status ShardOptionsFromArgs() {
    options_.mesh = tpc::shard::Mesh::Tp(tp_);
    const std::string dtype = args_.get("dtype", "f32");
    if (dtype == "f16") dtype_ = tpc::ir::DType::kF16;
    if (dtype == "bf16") dtype_ = tpc::ir::DType::kBF16;
    if (dtype != "f32" && dtype != "f16" && dtype != "bf16") {
      return absl::InvalidArgumentError(
          absl::StrCat("--dtype ", dtype, ": expected f32, f16 or bf16"));
    }
    const std::string objective = args_.get("objective", "balanced");
    auto parsed = tpc::shard::ObjectiveFromName(objective);
    if (!parsed) {
      return absl::InvalidArgumentError(
          absl::StrCat("--objective ", objective, ": expected balanced, memory or time"));
    }
    options_.objective = *parsed;
    if (args_.has("weight-slack")) {
      if (options_.objective != tpc::shard::Objective::kBalanced) {
        return absl::InvalidArgumentError(
            absl::StrCat("--weight-slack applies to --objective balanced, not ", objective));
      }
      const std::string text = args_.get("weight-slack");
      double slack = 0;
      if (!absl::SimpleAtod(text, &slack) || !(slack >= 0) || slack > 10) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--weight-slack ", text, ": expected a fraction from 0 to 10 (0.05: 5% more)"));
      }
      options_.weight_slack = slack;
    }
    if (args_.has("memory-budget")) {
      if (options_.objective != tpc::shard::Objective::kTime) {
        return absl::InvalidArgumentError(
            absl::StrCat("--memory-budget applies to --objective time, not ", objective,
                         " (the balanced objective's bound is --weight-slack)"));
      }
      TPC_ASSIGN_OR_RETURN(int64_t budget,
                           tpc::cli::ParseByteSize("memory-budget", args_.get("memory-budget")));
      options_.memory_budget_bytes = budget;
    }
    const std::string profile = args_.get("device-profile", "h100-nvlink");
    auto p = tpc::shard::DeviceProfile::ByName(profile);
    if (!p) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device-profile ", profile, ": expected one of ",
                       absl::StrJoin(tpc::shard::DeviceProfile::Names(), ", ")));
    }
    options_.profile = *p;
    for (const std::string& d : args_.all("dim")) {
      const auto eq = d.find('=');
      int64_t size = 0;
      if (eq == std::string::npos || !absl::SimpleAtoi(d.substr(eq + 1), &size) || size < 1 ||
          size > tpc::kMaxTensorElements) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dim ", d, ": expected NAME=SIZE with 0 < SIZE <= 2^48 (",
                         tpc::kMaxTensorElements, ")"));
      }
      options_.dim_sizes[d.substr(0, eq)] = size;
    }
    for (const std::string& d : args_.all("divisible")) options_.divisible.insert(d);
    options_.sequence_parallel = args_.has("sequence-parallel");
    options_.seq_symbol = args_.get("seq-dim", "seq");
    // A dim the model does not have is a typo, not a no-op.
    {
      std::set<std::string> symbols;
      for (const tpc::ir::Value* v : graph_->inputs()) {
        if (!v->type().shape) continue;
        for (const tpc::ir::Dim& dim : *v->type().shape) tpc::ir::CollectSymbols(dim, &symbols);
      }
      const std::vector<std::string> known(symbols.begin(), symbols.end());
      auto check = [&](const std::string& flag, const std::string& name) -> absl::Status {
        if (symbols.count(name)) return absl::OkStatus();
        return absl::InvalidArgumentError(
            tpc::UnknownNameMessage(flag, "symbolic input dim", name, known));
      };
      for (const auto& kv : options_.dim_sizes) TPC_RETURN_IF_ERROR(check("--dim", kv.first));
      for (const std::string& d : options_.divisible) TPC_RETURN_IF_ERROR(check("--divisible", d));
      if (options_.sequence_parallel || args_.has("seq-dim"))
        TPC_RETURN_IF_ERROR(check("--seq-dim", options_.seq_symbol));
    }
    // A dim declared divisible (or split by sequence parallelism) must be, at the size given.
    std::set<std::string> must_divide = options_.divisible;
    if (options_.sequence_parallel) must_divide.insert(options_.seq_symbol);
    for (const std::string& name : must_divide) {
      auto it = options_.dim_sizes.find(name);
      if (it != options_.dim_sizes.end() && it->second % tp_ != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dim ", name, "=", it->second, " is not divisible by --tp ", tp_,
                         ", but ", name, " must split across the ranks",
                         options_.sequence_parallel ? " (--sequence-parallel)" : ""));
      }
    }
    for (const std::string& a : args_.all("input-placement")) {
      TPC_ASSIGN_OR_RETURN(auto named, tpc::shard::ParseNamedPlacement(a, *graph_, true));
      for (const auto& np : named) options_.input_placements[np.first] = np.second;
    }
    for (const std::string& a : args_.all("output-placement")) {
      TPC_ASSIGN_OR_RETURN(auto named, tpc::shard::ParseNamedPlacement(a, *graph_, false));
      for (const auto& np : named) options_.output_placements[np.first] = np.second;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<tpc::shard::Constraints> ConstraintsFromArgs() {
    if (!args_.has("styles")) return tpc::shard::Constraints{};
    return tpc::shard::LoadStyles(args_.get("styles"), *graph_, options_);
  }

  std::map<std::string, std::string> RecordedOptions() const {
    std::map<std::string, std::string> out;
    for (const char* key : {"objective", "weight-slack", "memory-budget", "device-profile",
                            "styles", "seq-dim", "dtype"}) {
      if (args_.has(key)) out[key] = args_.get(key);
    }
    for (const char* key : {"dim", "divisible", "input-placement", "output-placement"}) {
      if (args_.has(key)) out[key] = absl::StrJoin(args_.all(key), " ");
    }
    if (args_.has("sequence-parallel")) out["sequence-parallel"] = "true";
    out["tp"] = absl::StrCat(tp_);
    return out;
  }

  absl::Status WriteReport(const std::string& path) {
    report_.Field("tpc_version", std::string(tpc::plan::Version()));
    report_.Field("model", model_path_);
    report_.Field("tp", tp_);
    report_.Key("per_rank_weight_bytes").BeginArray();
    for (const auto& r : ranks_) report_.Int(r.weight_bytes);
    report_.EndArray();
    report_.Key("partition").BeginObject();
    report_.Field("collectives_inserted", static_cast<int64_t>(partition_.collectives));
    report_.Field("local_shards", static_cast<int64_t>(partition_.local_shards));
    report_.Field("lowered_ops", static_cast<int64_t>(partition_.lowered_ops));
    report_.Field("removed_nodes", static_cast<int64_t>(partition_.removed_nodes));
    report_.EndObject();
    report_.Key("compile_seconds").BeginObject();
    for (const auto& [stage, seconds] : times_) report_.Field(stage, seconds);
    report_.EndObject();
    report_.EndObject();
    const std::string text = report_.Finish();
    std::ofstream out(path, std::ios::trunc);
    if (!out || !(out << text) || !out.flush()) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
    }
    return absl::OkStatus();
  }

  void PrintSummary(const std::string& out_dir) {
    int64_t calls = 0;
    for (tpc::ir::Node* n : graph_->nodes()) calls += n->is_call() ? 1 : 0;
    std::cout << absl::StrFormat("tp-compile: %s → %s (tp=%d%s)\n", model_path_, out_dir, tp_,
                                 options_.sequence_parallel ? ", sequence parallel" : "");
    std::cout << shard_summary_;
    std::cout << absl::StrFormat(
        "  per rank: %d ops; inserted %d collectives, %d local shards, %d lowered ops\n", calls,
        partition_.collectives, partition_.local_shards, partition_.lowered_ops);
    std::cout << absl::StrFormat(
        "  time: import %.3f s, shard %.3f s, partition %.3f s, plan %.3f s\n", times_["import"],
        times_["shard"], times_["partition"], times_["plan"]);
  }

  const tpc::cli::Args& args_;
  std::string model_path_;
  int64_t tp_ = 1;
  bool quiet_ = false;
  std::vector<std::string> dump_after_;
  bool dumped_ = false;
  std::unique_ptr<tpc::ir::Graph> graph_;
  tpc::shard::ShardOptions options_;
  tpc::shard::ShardResult shard_;
  tpc::partition::PartitionStats partition_;
  tpc::ir::DType dtype_ = tpc::ir::DType::kF32;
  std::vector<tpc::plan::RankFiles> ranks_;
  tpc::JsonWriter report_;
  std::string shard_summary_;
  std::map<std::string, double> times_;
};

}  // namespace

int main(int argc, char** argv) {
  tpc::cli::Parser parser = MakeParser();
  auto args = parser.Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "tp-compile: error: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (args->help()) {
    std::cout << parser.Usage();
    return 0;
  }
  Compiler compiler(*args);
  // The last boundary: an exception no stage caught is an error, never an abort.
  absl::Status status = tpc::CatchExceptions("tp-compile", [&] { return compiler.Run(); });
  if (!status.ok()) {
    std::fprintf(stderr, "tp-compile: error: %s\n", std::string(status.message()).c_str());
    return tpc::cli::ExitCodeFor(status);
  }
  return 0;
}
