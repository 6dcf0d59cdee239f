// A plan's inputs and outputs by placement: tp-run takes exactly the original model's
// full inputs and gives each rank its part (a block of the split dim for `S(d)`, its part
// of each of the b blocks for `S(d/b)`, its group's part for `S(d@g)`, the whole tensor
// for `R`), and assembles each rank's outputs back into full tensors (all-gathered along
// the dim for `S(d)`, all-reduced for `P`, as they are for `R`).
// The placements come from plan.json; the same code serves ranks as threads and as
// processes, since the assembly goes through the communicator.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/sharding.h"
#include "tpc/ir/tensor_type.h"
#include "tpc/proto/plan.pb.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime {

// The placement of every graph input and output of a plan, by name.
struct IoPlacements {
  std::map<std::string, ir::Placement> inputs, outputs;
  int ranks = 1;
};

// From plan.json. Errors on a placement tp-run cannot slice or assemble.
absl::StatusOr<IoPlacements> IoPlacementsFromPlan(const proto::Plan& plan);

// The placement of `name` (R when the plan does not list it).
ir::Placement PlacementOf(const std::map<std::string, ir::Placement>& placements,
                          const std::string& name);

// The full type (the original model's) of a rank's input or output: the split dim of an
// `S(d)` or `S(d/b)` value times the number of ranks, of an `S(d@g)` value times g.
ir::TensorType FullType(const ir::TensorType& rank_type, const ir::Placement& p, int ranks);
std::vector<IoSpec> FullSpecs(const std::vector<IoSpec>& rank_specs,
                              const std::map<std::string, ir::Placement>& placements, int ranks);

// Rank `rank`'s part of the full input `full`: an error naming the input, the dim and its
// value when the split dim is not a multiple of the parts (`ranks`, or g for S(d@g)) times
// the blocks (b for S(d/b)). `R` returns `full` itself (no copy).
absl::StatusOr<Tensor> SliceForRank(const std::string& name, const Tensor& full,
                                    const ir::Placement& p, int rank, int ranks);

// Every input sliced for `rank`.
absl::StatusOr<std::map<std::string, Tensor>> InputsForRank(
    const std::map<std::string, Tensor>& full, const IoPlacements& io, int rank);

// The full output from this rank's part. A collective: every rank calls it for the same
// outputs in the same order. `R` returns `local` itself.
absl::StatusOr<Tensor> AssembleOutput(const std::string& name, const Tensor& local,
                                      const ir::Placement& p, Communicator& comm);

}  // namespace tpc::runtime
