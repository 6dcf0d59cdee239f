// tp-compile: an ONNX model → one plan per tensor-parallel rank.
//
//   import → shard (rules + solver) → partition (collectives, per-rank shapes) → plan
//
// Writes DIR/rank{i}.onnx + DIR/rank{i}.weights for every rank, DIR/plan.json (the
// manifest), DIR/report.json and DIR/report.html, all or nothing (a temporary folder
// renamed into place), and prints a short summary. The work is tpc::Compile's.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tpc/compile/compile.h"
#include "tpc/ir/printer.h"
#include "tpc/onnx/model_file.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/cli.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/staging_dir.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/write_error.h"

namespace {

tpc::cli::Parser MakeParser() {
  tpc::cli::Parser p(
      "tp-compile", "MODEL.onnx -o DIR [--tp N] [options]",
      "Compiles an ONNX model into tensor-parallel plans: DIR/rank{i}.onnx with each rank's\n"
      "weights in DIR/rank{i}.weights, the manifest DIR/plan.json, DIR/report.json and\n"
      "the same report as a page, DIR/report.html.\n"
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
         "size N divides also makes the dim divisible; ?=SIZE sizes the dims only the data "
         "decides (NonZero's count; default: the elements of the largest input's symbolic dims)",
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
         "placement of a graph input (R, S(d), S(-1), S(d/b) in b blocks, S(d@g) in g groups); "
         "NAME may be a glob "
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
  p.Add({"force", "", "replace DIR if it is a plan (a folder of other files is kept)", "", false});
  p.Add({"quiet", "", "print nothing but errors", "", false});
  p.Add({"version", "", "print tpc's version and exit", "", false});
  return p;
}

absl::Status WriteText(const std::string& target, const std::string& text, bool append) {
  if (target == "-") {
    std::cout << text;
    std::cout.flush();
    return absl::OkStatus();
  }
  std::ofstream out(target, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  if (!out) return tpc::WriteError(target, errno, /*opening=*/true);
  if (!(out << text) || !out.flush()) return tpc::WriteError(target, errno, false);
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

void Progress(int64_t done, int64_t total) {
  if (total < (int64_t{64} << 20)) return;  // small models: no bar
  std::fprintf(stderr, "\rtp-compile: writing weights %3d%% (%.2f / %.2f GiB)",
               static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)),
               static_cast<double>(done) / (1 << 30), static_cast<double>(total) / (1 << 30));
}

// The flags as tpc::CompileOptions (whose errors name the flags).
absl::StatusOr<tpc::CompileOptions> OptionsFromArgs(const tpc::cli::Args& args) {
  tpc::CompileOptions o;
  TPC_ASSIGN_OR_RETURN(o.tp, PositiveInt("tp", args.get("tp", "1")));
  o.dtype = args.get("dtype", "f32");
  o.dtype_given = args.has("dtype");
  o.objective = args.get("objective", "balanced");
  if (args.has("weight-slack")) {
    const std::string text = args.get("weight-slack");
    double slack = 0;
    if (!absl::SimpleAtod(text, &slack)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--weight-slack ", text, ": expected a fraction from 0 to 10 (0.05: 5% more)"));
    }
    o.weight_slack = slack;
  }
  if (args.has("memory-budget")) o.memory_budget = args.get("memory-budget");
  o.device_profile = args.get("device-profile", "h100-nvlink");
  for (const std::string& d : args.all("dim")) {
    const auto eq = d.find('=');
    int64_t size = 0;
    if (eq == std::string::npos || !absl::SimpleAtoi(d.substr(eq + 1), &size) || size < 1 ||
        size > tpc::kMaxTensorElements) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", d,
                                                     ": expected NAME=SIZE with 0 < SIZE <= 2^48 (",
                                                     tpc::kMaxTensorElements, ")"));
    }
    o.dims[d.substr(0, eq)] = size;
  }
  o.divisible = args.all("divisible");
  o.sequence_parallel = args.has("sequence-parallel");
  if (args.has("seq-dim")) o.seq_dim = args.get("seq-dim");
  if (args.has("styles")) {
    const std::string path = args.get("styles");
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--styles ", path, ": a folder, not a file"));
    }
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("--styles ", path, ": cannot read the file"));
    std::stringstream text;
    text << in.rdbuf();
    o.styles = text.str();
    o.styles_origin = path;
  }
  o.input_placements = args.all("input-placement");
  o.output_placements = args.all("output-placement");
  o.explain = args.all("explain");
  o.explained = [](const std::string& text) { std::cout << text; };
  return o;
}

// True when `inside` is `folder` or lies under it (both canonical).
bool Within(const std::filesystem::path& inside, const std::filesystem::path& folder) {
  auto f = folder.begin();
  auto i = inside.begin();
  for (; f != folder.end(); ++f, ++i) {
    if (i == inside.end() || *i != *f) return false;
  }
  return true;
}

// What a compile would lose, refused before any work: -o replaces its folder whole, so it
// may not hold a file the compile reads (the model, its external data, the styles file:
// where the path names it, and where a link leads), and neither may --dump-ir name one
// or lie inside -o; -o is new, empty or a plan (a folder with plan.json, which --force
// replaces), never a folder of other files.
absl::Status CheckOutputPaths(const std::string& model, const std::string& out, bool force,
                              const std::string& dump, const std::string& styles) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::absolute(out, ec), ec);
  if (ec) return absl::OkStatus();  // StagingDir says what is wrong with it
  // (what, where the path names it, where it leads)
  struct Read {
    std::string what;
    fs::path named, real;
  };
  std::vector<Read> reads;
  auto add = [&](const std::string& what, const fs::path& p) {
    std::error_code e;
    const fs::path abs = fs::absolute(p, e);
    const fs::path named = fs::weakly_canonical(abs.parent_path(), e) / abs.filename();
    const fs::path real = fs::weakly_canonical(abs, e);
    if (!e) reads.push_back({what, named, real});
  };
  add(absl::StrCat("the model ", model), model);
  if (auto file = tpc::onnx::ReadModelFile(model); file.ok()) {
    std::set<std::string> seen;
    for (const auto& t : file->proto.graph().initializer()) {
      for (const auto& kv : t.external_data()) {
        if (kv.key() != "location" || !seen.insert(kv.value()).second) continue;
        add(absl::StrCat("the model's external data ", kv.value()),
            fs::path(model).parent_path() / kv.value());
      }
    }
  }
  if (!styles.empty()) add(absl::StrCat("the styles file ", styles), styles);
  for (const Read& r : reads) {
    if (Within(r.named, dir) || Within(r.real, dir)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-o ", out, " holds ", r.what,
          ", and the plan replaces that folder whole: choose another -o (a new folder)"));
    }
  }
  if (!dump.empty() && dump != "-") {
    const fs::path target = fs::weakly_canonical(fs::absolute(dump, ec), ec);
    for (const Read& r : reads) {
      if (!ec && (target == r.named || target == r.real)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dump-ir ", dump, " is ", r.what, ": choose another file"));
      }
    }
    if (!ec && Within(target, dir)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dump-ir ", dump, " is inside -o ", out,
                       ", which the plan replaces whole: write the dump elsewhere"));
    }
  }
  return tpc::CheckPlanFolder(out, force, model, absl::StrCat("-o ", out));
}

class Compiler {
 public:
  explicit Compiler(const tpc::cli::Args& args) : args_(args) {}

  absl::Status Run() {
    if (args_.positional().size() != 1) {
      return absl::InvalidArgumentError("expected exactly one MODEL.onnx (see --help)");
    }
    const std::string model_path = args_.positional()[0];
    if (model_path.empty()) return absl::InvalidArgumentError("the MODEL.onnx argument is empty");
    const std::string out_dir = args_.get("output");
    if (out_dir.empty()) return absl::InvalidArgumentError("missing -o DIR (see --help)");
    TPC_RETURN_IF_ERROR(ParseDumpStages());
    const bool quiet = args_.has("quiet");
    TPC_ASSIGN_OR_RETURN(tpc::CompileOptions options, OptionsFromArgs(args_));
    options.after_stage = [this](const std::string& stage, const tpc::ir::Graph& graph) {
      return Dump(stage, graph);
    };
    // Refuse a bad output folder before any work (Save checks it again).
    TPC_RETURN_IF_ERROR(CheckOutputPaths(model_path, out_dir, args_.has("force"),
                                         args_.get("dump-ir"), args_.get("styles")));
    {
      TPC_ASSIGN_OR_RETURN(tpc::StagingDir probe,
                           tpc::StagingDir::Create(out_dir, args_.has("force")));
      for (const std::string& note : probe.removed()) std::cerr << "tp-compile: " << note << "\n";
    }
    TPC_ASSIGN_OR_RETURN(tpc::CompiledPlan plan, tpc::Compile(model_path, options));
    tpc::SaveOptions save;
    save.force = args_.has("force");
    if (!quiet && ::isatty(2)) save.progress = Progress;
    save.notes = [](const std::string& note) { std::cerr << "tp-compile: " << note << "\n"; };
    TPC_RETURN_IF_ERROR(plan.Save(out_dir, save));
    if (save.progress && plan.report().weight_bytes_total >= (int64_t{64} << 20))
      std::fprintf(stderr, "\n");
    if (!quiet) std::cout << tpc::compile::ReportSummary(plan.report(), out_dir);
    return absl::OkStatus();
  }

 private:
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

  absl::Status Dump(const std::string& stage, const tpc::ir::Graph& graph) {
    if (std::find(dump_after_.begin(), dump_after_.end(), stage) == dump_after_.end())
      return absl::OkStatus();
    std::string text = tpc::ir::PrintGraph(graph);
    if (dump_after_.size() > 1) text = absl::StrCat("# IR after ", stage, "\n", text);
    const bool append = dumped_;
    dumped_ = true;
    return WriteText(args_.get("dump-ir", "-"), text, append);
  }

  const tpc::cli::Args& args_;
  std::vector<std::string> dump_after_;
  bool dumped_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  tpc::cli::Parser parser = MakeParser();
  auto args = parser.Parse(argc, argv);
  if (auto done = tpc::cli::Prologue(parser, args, tpc::plan::Version())) return *done;
  Compiler compiler(*args);
  // The last boundary: an exception no stage caught is an error, never an abort.
  absl::Status status = tpc::CatchExceptions("tp-compile", [&] { return compiler.Run(); });
  if (!status.ok()) {
    std::fprintf(stderr, "tp-compile: error: %s\n", std::string(status.message()).c_str());
    return tpc::cli::ExitCodeFor(status);
  }
  return 0;
}
