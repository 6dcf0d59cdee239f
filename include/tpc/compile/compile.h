// The whole pipeline as one call: an ONNX model → a tensor-parallel plan in memory,
// with its report. tp-compile, the tests and the Python module all go through here.
//
//   import → shard (rules + solver) → partition (collectives, per-rank shapes) → plan
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "tpc/compile/report.h"
#include "tpc/ir/graph.h"
#include "tpc/util/mapped_file.h"

namespace tpc {

// What tp-compile's flags say; errors name the flag (`--dim batch=x: ...`), so the
// command line and the Python module report the same.
struct CompileOptions {
  int64_t tp = 1;
  std::string dtype = "f32";  // f32, f16, bf16
  bool dtype_given = false;   // --dtype was given: a model it cannot convert is refused
  std::string objective = "balanced";
  std::optional<double> weight_slack;        // --objective balanced only
  std::optional<std::string> memory_budget;  // --objective time only: "512MiB", "1GB"
  std::string device_profile = "h100-nvlink";
  std::map<std::string, int64_t> dims;  // sizes of symbolic input dims
  std::vector<std::string> divisible;   // symbolic dims assumed divisible by tp
  bool sequence_parallel = false;
  std::optional<std::string> seq_dim;  // default "seq"
  // A styles file's text (`PATTERN: STYLE` lines), named `styles_origin` in errors.
  std::string styles;
  std::string styles_origin = "styles";
  std::vector<std::string> input_placements;   // "NAME=P", NAME may be a glob
  std::vector<std::string> output_placements;  // "NAME=P"
  // Values to explain; each explanation goes to `explained` (before the solver runs,
  // so a failing compilation still explains) and into the result.
  std::vector<std::string> explain;
  std::function<void(const std::string& text)> explained;
  // Called after "import", "shard" and "partition" with the graph (IR dumps).
  std::function<absl::Status(const std::string& stage, const ir::Graph& graph)> after_stage;
};

// A folder a plan may be saved to: new, empty, or a plan (a folder with plan.json; one
// that is not empty needs `force`), never a folder of other files, and never one that
// holds `model` (where its path names it, or where a link leads). An error names `dir`
// as `flag` does ("-o plan", "save('plan')").
absl::Status CheckPlanFolder(const std::string& dir, bool force, const std::string& model,
                             const std::string& flag);

struct SaveOptions {
  bool force = false;  // replace a plan folder that is not empty (CheckPlanFolder)
  // Called as weight bytes are written (bytes so far, total).
  std::function<void(int64_t done, int64_t total)> progress;
  // Called with each note about the folder (what a forced save removed).
  std::function<void(const std::string& note)> notes;
};

// A compiled plan in memory: the partitioned graph (one SPMD program, each rank's
// constants sliced when written) and its report.
class CompiledPlan {
 public:
  CompiledPlan(CompiledPlan&&) noexcept;
  CompiledPlan& operator=(CompiledPlan&&) noexcept;
  ~CompiledPlan();

  int64_t tp() const { return report_.tp; }
  const compile::Report& report() const { return report_; }
  const ir::Graph& graph() const { return *graph_; }
  const std::vector<std::string>& explanations() const { return explanations_; }

  // Writes DIR/rank{i}.onnx + rank{i}.weights, plan.json, report.json and
  // report.html, all or nothing (a temporary folder renamed into place).
  absl::Status Save(const std::string& dir, const SaveOptions& options = {});

  // Rank `rank`'s model with its weight slice inline (small models; a model over
  // protobuf's 2 GiB is an error that says to Save instead).
  absl::StatusOr<::onnx::ModelProto> RankModel(int64_t rank) const;

 private:
  friend absl::StatusOr<CompiledPlan> CompileLoaded(std::unique_ptr<ir::Graph>, std::string,
                                                    std::string, const CompileOptions&);
  friend absl::StatusOr<CompiledPlan> Compile(const std::string&, const CompileOptions&);
  friend absl::StatusOr<CompiledPlan> CompileBytes(std::shared_ptr<const MappedFile>,
                                                   const std::string&, const std::string&,
                                                   const CompileOptions&);
  CompiledPlan() = default;
  std::unique_ptr<ir::Graph> graph_;
  compile::Report report_;
  std::map<std::string, std::string> recorded_options_;  // into plan.json
  std::string source_path_;                              // the model file ("" for bytes)
  std::string source_sha256_;
  std::vector<std::string> explanations_;
};

// Compiles the ONNX file at `model_path` (external data beside it). The plan keeps
// views of the file's weights; the file must stay unchanged until the plan is saved.
absl::StatusOr<CompiledPlan> Compile(const std::string& model_path, const CompileOptions& options);

// Compiles a serialized ModelProto held in `bytes` (kept alive by the plan), named
// `name` in errors; external data is looked up in `model_dir`.
absl::StatusOr<CompiledPlan> CompileBytes(std::shared_ptr<const MappedFile> bytes,
                                          const std::string& name, const std::string& model_dir,
                                          const CompileOptions& options);

// The graph already imported (tests): `source` names it in the report and manifest;
// `source_sha256` is the model's hash ("" when unknown).
absl::StatusOr<CompiledPlan> CompileLoaded(std::unique_ptr<ir::Graph> graph, std::string source,
                                           std::string source_sha256,
                                           const CompileOptions& options);

}  // namespace tpc
