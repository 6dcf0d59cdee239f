// Where tp-run's outputs go and what they are checked against: --output-dir and
// --check-against, checked before anything runs and written once the run is done.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/runtime/placement_io.h"
#include "tpc/runtime/tensor.h"
#include "tpc/util/cli.h"

namespace tpc::tp_run {

// Before anything runs: --output-dir can be made or written, --check-against is a file
// (not found out after a long --repeat), and names the model the plan was compiled from, or
// the comparison means little: a warning, since a re-export may differ only in bytes.
absl::Status CheckBeforeRun(const tpc::cli::Args& args, const std::string& plan_dir);

// Writes output_K.pb and output_K.npy of every output into `dir`, and removes the
// output_K files of an earlier run of more outputs (they would pass for this run's).
// Returns how many it removed.
absl::StatusOr<int> WriteOutputs(const std::string& dir,
                                 const std::vector<tpc::runtime::IoSpec>& specs,
                                 const std::vector<tpc::runtime::Tensor>& outputs);

}  // namespace tpc::tp_run
