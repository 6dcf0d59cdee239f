// The in-process communicator: ranks are threads of one process and collectives work
// on the buffers they share: host memory, or device memory of one GPU (GroupMemory).
//
// Deterministic: every element of a reduction is combined in rank order 0, 1, ..., N-1,
// so each rank gets bit-identical results. A rank that fails (Abort) or does not arrive
// within the timeout makes every other rank's collective return an error naming it;
// no rank hangs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "tpc/runtime/communicator.h"

namespace tpc::runtime {

class Rendezvous;

// How one rank reads and writes the posted buffers: host memory (the default), or the
// device memory of a GPU all ranks share (cuda/cuda.h: MakeDeviceGroupMemory).
class GroupMemory {
 public:
  virtual ~GroupMemory() = default;
  // Before this rank posts its buffers: the work queued on them is done.
  virtual absl::Status Ready() { return absl::OkStatus(); }
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  // For i in [begin, end): every dst[i] = op over k of srcs[k][i] in rank order (f16/bf16
  // in f32, rounded once; avg = the sum / n), as runtime/comm/reduce.h.
  virtual absl::Status Reduce(ir::DType dtype, const std::vector<const uint8_t*>& srcs,
                              const std::vector<uint8_t*>& dsts, int64_t begin, int64_t end,
                              ReduceOp op) = 0;
  // Before this rank leaves a collective: its copies and reductions are done.
  virtual absl::Status Done() { return absl::OkStatus(); }
};

// A group of `size` communicators, one per rank (rank i is element i). The group owns
// the shared rendezvous; the communicators must not outlive the vector's elements.
// `memory` (one per rank, or empty: host memory) says where the buffers are.
std::vector<std::unique_ptr<Communicator>> MakeInProcessGroup(
    int size, std::chrono::milliseconds timeout = std::chrono::seconds(120),
    std::vector<std::unique_ptr<GroupMemory>> memory = {});

}  // namespace tpc::runtime
