// Running a plan: every rank's graph (`DIR/rank{i}.onnx`) on its own thread of this
// process, with the in-process communicator between them.
#pragma once

#include <functional>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/fusion.h"
#include "tpc/runtime/placement_io.h"

namespace tpc::runtime {

struct LoadPlanOptions {
  // Check every rank's files against the SHA-256 in plan.json (sizes are always checked).
  // Off (tp-run --no-verify) for plans that are trusted and large.
  bool verify_hashes = true;
};

// Reads DIR/plan.json and imports the rank files it lists (rank0.onnx, ...), each with its
// weights mapped, after checking them against the manifest. Errors name the folder,
// file or rank.
absl::StatusOr<std::vector<std::unique_ptr<ir::Graph>>> LoadPlan(const std::string& dir,
                                                                 LoadPlanOptions options = {});

// Rank `rank`'s graph of the plan in DIR whose manifest (plan::ReadManifest) is
// `manifest`: only that rank's files are checked and mapped, so a process per rank holds
// its own weights only.
absl::StatusOr<std::unique_ptr<ir::Graph>> LoadPlanRank(const std::string& dir,
                                                        const proto::Plan& manifest, int rank,
                                                        LoadPlanOptions options = {});

struct PlanRunnerOptions {
  // Threads in total; each rank gets an equal share (at least 1). 0: DefaultThreadCount().
  int threads = 0;
  // The ranks' backend (runtime/backends.h): cpu, or cuda with every rank on GPU `device`.
  std::string backend = "cpu";
  int device = 0;
  int64_t gpu_memory = 0;  // cuda: each rank's most device memory (BackendSpec::memory_limit)
  ExecutorOptions executor;
  // How long a rank waits in a collective before the run fails.
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
  // How the full inputs are sliced for each rank and the outputs assembled (plan.json's
  // placements; none: every input and output whole on every rank).
  IoPlacements io;
  // Fuse each rank's graph for its backend before it runs (runtime/fusion.h); off for
  // comparisons (tp-run --no-fuse).
  bool fuse = true;
};

class PlanRunner {
 public:
  // `graphs` must outlive the runner; they are fused in place (options.fuse).
  static absl::StatusOr<std::unique_ptr<PlanRunner>> Create(const std::vector<ir::Graph*>& graphs,
                                                            PlanRunnerOptions options = {});

  int num_ranks() const { return static_cast<int>(executors_.size()); }
  Executor& executor(int rank) { return *executors_[static_cast<size_t>(rank)]; }

  // Runs every rank on its part of the full inputs (sliced by the input placements and
  // checked on every rank before anything runs); returns each rank's outputs, assembled
  // into full tensors by the output placements. A failing rank stops the others; the
  // error names it.
  absl::StatusOr<std::vector<std::vector<Tensor>>> Run(const std::map<std::string, Tensor>& inputs);

  // Runs `fn` for every rank on its own thread (with the rank's executor and a
  // communicator on host memory, for host tensors); a rank whose `fn` fails aborts the
  // others' collectives. The first
  // rank's own failure is returned, named by its rank (over the ones it aborted).
  using RankFn = std::function<absl::Status(int rank, Executor& executor, Communicator& comm)>;
  absl::Status RunOnRanks(const RankFn& fn);

 private:
  std::vector<std::unique_ptr<Communicator>> comms_;       // the executors'
  std::vector<std::unique_ptr<Communicator>> host_comms_;  // RankFn's, when comms_ are a GPU's
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<Executor>> executors_;
  IoPlacements io_;
};

}  // namespace tpc::runtime
