// tp-run's reports: the timing report under --repeat (the runs' times and stages, rank 0's
// device figures: allocations, waits for the device, CUDA graphs; the --profile table),
// and the comparisons of the outputs with expected ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tpc/plan/precision.h"
#include "tpc/runtime/executor.h"
#include "tpc/util/cli.h"

namespace tpc::tp_run {

// `bytes` as "1.50 MiB".
std::string MiB(int64_t bytes);

// Prints the report of `times` (seconds a run), `compute` (rank 0's, before outputs went
// to the host), the load and first-run seconds, and rank 0's last `stats`.
void PrintTimes(const tpc::cli::Args& args, std::vector<double> times, std::vector<double> compute,
                double load_s, double first_s, const tpc::runtime::RunStats& stats);

// The tolerance of the comparisons: --rtol and --atol, each by default the one documented
// for the precision of the plan in `plan_dir` (its manifest's "dtype" option;
// tpc::plan::DocumentedTolerance; an unreadable manifest: f32's, the plan's error comes
// when it loads).
// Without either option and without a plan precision, an f16 or bf16 output (a model
// made in half precision) is compared with that type's documented tolerance (ForOutput).
struct Tolerance : tpc::plan::Tolerance {
  std::string of;  // "the defaults of an f16 plan" when a default came from the precision
  bool by_output_type = false;
};
absl::StatusOr<Tolerance> ReadTolerance(const tpc::cli::Args& args, const std::string& plan_dir);
// The tolerance of an output of type `dtype` under `t`.
Tolerance ForOutput(const Tolerance& t, tpc::ir::DType dtype);
// ", the defaults of an f16 plan" after the figures, or nothing.
std::string ToleranceNote(const Tolerance& t);

// Prints one comparison table of `outputs` (rank 0's; `others`: the other ranks', each
// compared too) against `expected` under `title`; true when every output is within `t`.
bool PrintComparison(const std::string& title, const std::vector<tpc::runtime::IoSpec>& specs,
                     const std::vector<tpc::runtime::Tensor>& outputs,
                     const std::vector<std::vector<tpc::runtime::Tensor>>& others,
                     const std::vector<tpc::runtime::Tensor>& expected, const Tolerance& t);

}  // namespace tpc::tp_run
