// tp-run --generate: the prompt, the loop on one rank (runtime/generate.h) with the
// plan's placements, and the report (ids, tokens/s, --check-against the unsharded loop).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "tp_run_report.h"
#include "tpc/proto/plan.pb.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/generate.h"
#include "tpc/runtime/placement_io.h"
#include "tpc/util/cli.h"

namespace tpc::tp_run {

namespace rt = tpc::runtime;

// The prompt of --generate: --prompt "1 2 3; 4 5 6" (rows of equal length) or
// --input-ids FILE, as int64 [batch, length].
absl::StatusOr<rt::Tensor> Prompt(const tpc::cli::Args& args);

// A plan that splits the sequence between blocks cannot take the decode steps' single
// token: refused before anything runs.
absl::Status CheckGeneratable(const tpc::proto::Plan& manifest);

// One rank's generation loop (`comm` null: the unsharded model, no placements).
absl::StatusOr<rt::GenerateResult> GenerateOnRank(rt::Executor& ex, rt::Communicator* comm,
                                                  const rt::IoPlacements& io, int rank, int n,
                                                  const rt::Tensor& prompt, int64_t steps);

// What the report compares with --check-against.
struct GenerationCheck {
  int64_t generate = 0;  // tokens per row
  Tolerance tolerance;
  int64_t threads = 0;  // of the unsharded run
};

// Prints the ids and the speed; with --check-against runs the same loop on the unsharded
// model (ids equal, last logits within tolerance). Returns the exit status.
absl::StatusOr<int> ReportGeneration(const tpc::cli::Args& args, const GenerationCheck& s,
                                     int ranks, const rt::Tensor& prompt,
                                     const rt::GenerateResult& r);

}  // namespace tpc::tp_run
