// Helpers shared by the tests: paths of the source tree and committed models.
#pragma once

#include <map>
#include <memory>
#include <optional>
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

// Running a command as a user does: exit code and stdout+stderr together.
struct CommandResult {
  int exit_code = -1;  // -1 when it did not exit (a signal ended it)
  int signal = 0;      // the signal that ended it; 0 when it exited
  std::string output;
};
// The shell command `command` (its stderr joined to its stdout).
CommandResult RunCommand(const std::string& command);
// Environment variable `name` set to `value` (nullptr: unset) for the scope, and as it was
// again after; commands started meanwhile inherit it.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;
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

// `g` with its shapes inferred, exported to `path` (the test fails when either fails);
// returns `path`.
std::string SaveModel(ir::Graph& g, const std::string& path);
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
