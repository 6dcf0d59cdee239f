// Helpers shared by the tests: paths of the source tree and committed models.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/runtime/tensor.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"

namespace tpc::testing {

// Absolute path of a file in the source tree, e.g. SourcePath("models/gpt2.onnx").
std::string SourcePath(const std::string& relative);
// A fresh empty temporary folder, removed when the test process ends.
std::string TempDir(const std::string& tag);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

// Running tp-compile as a user does: exit code and stdout+stderr together.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
// `tp-compile ARGS` (the binary ctest points TPC_TP_COMPILE at, else the build's).
CommandResult RunTpCompile(const std::string& args);
// The path of a tool: the binary ctest points TPC_TP_RUN / TPC_TP_COMPILE at, else the
// build's ("tp-run", "tp-compile").
std::string ToolPath(const std::string& tool);
// `tp-run ARGS` (TPC_TP_RUN, else the build's).
CommandResult RunTpRun(const std::string& args);
// True when `dir` holds no leftover temporary folder of tp-compile.
bool NoTemporaries(const std::string& dir);

// models/<name>.onnx, imported (the test fails when it does not import).
std::unique_ptr<ir::Graph> ImportCommitted(const std::string& name);
// Shard options for `n` ranks on the `tp` axis, with sequence parallelism when `sp`.
shard::ShardOptions TpOptions(int64_t n, bool sp = false);

// Shards and partitions `graph` in place (the test fails if either stage does) and
// returns the shard stage's result.
shard::ShardResult ShardAndPartition(ir::Graph& graph, const shard::ShardOptions& options);

// Runs `graphs` (one per rank) with the plan runner (2 threads) on `inputs`: every rank's
// outputs, or the run's error.
absl::StatusOr<std::vector<std::vector<runtime::Tensor>>> RunRanks(
    const std::vector<ir::Graph*>& graphs, const std::map<std::string, runtime::Tensor>& inputs);

// The committed models (models/<name>.onnx), in a fixed order.
extern const char* const kCommittedModels[16];

// Golden files: compares `text` with the file at `relative` (in the source tree) and
// returns "" when equal, else the first differing line. With TPC_UPDATE_GOLDENS=1 it
// rewrites the file instead and sets `*rewritten`.
std::string CheckGolden(const std::string& relative, const std::string& text, bool* rewritten);

}  // namespace tpc::testing
