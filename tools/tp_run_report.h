// tp-run's timing report under --repeat: the runs' times and stages, rank 0's device
// figures (allocations, waits for the device, CUDA graphs), and the --profile table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpc/runtime/executor.h"
#include "tpc/util/cli.h"

namespace tpc::tp_run {

// `bytes` as "1.50 MiB".
std::string MiB(int64_t bytes);

// Prints the report of `times` (seconds a run), `compute` (rank 0's, before outputs went
// to the host), the load and first-run seconds, and rank 0's last `stats`.
void PrintTimes(const tpc::cli::Args& args, std::vector<double> times, std::vector<double> compute,
                double load_s, double first_s, const tpc::runtime::RunStats& stats);

}  // namespace tpc::tp_run
