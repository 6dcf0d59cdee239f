// tp-run's own launcher: on one machine, `tp-run PLAN` starts one worker process per
// rank (this executable again, told its rank by TPC_RANK / TPC_WORLD_SIZE / TPC_MASTER),
// hosts the rendezvous store they bootstrap through, and watches them.
//
// The workers form a process group of their own and get SIGKILL when the launcher dies
// (PR_SET_PDEATHSIG), so none outlives it; Ctrl-C (SIGINT, SIGTERM, SIGHUP) on the
// launcher stops the whole group. A worker killed by a signal is reported by rank and
// signal and every other worker is told through the store to stop; a worker that has not
// stopped 3 s after a failure (hung, or stopped by SIGSTOP) is killed.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpc::runtime {

// The exit status of a worker that stopped because another rank failed: the launcher
// reports the rank that failed first-hand, not the ones it took down.
inline constexpr int kExitPeerFailed = 3;

struct LaunchOptions {
  int ranks = 1;
  // The workers' argv (argv[0] included); the executable is this one (/proc/self/exe).
  std::vector<std::string> args;
};

// Runs the workers to completion and returns tp-run's exit status: 0 when every worker
// succeeded, else the status of the first worker that failed first-hand (1 for a worker
// killed by a signal, 130 after Ctrl-C). Errors only when the workers cannot be started.
absl::StatusOr<int> LaunchWorkers(const LaunchOptions& options);

}  // namespace tpc::runtime
