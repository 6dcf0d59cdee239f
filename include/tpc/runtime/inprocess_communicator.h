// The in-process communicator: ranks are threads of one process and collectives work
// on the host buffers they share.
//
// Deterministic: every element of a reduction is combined in rank order 0, 1, ..., N-1,
// so each rank gets bit-identical results. A rank that fails (Abort) or does not arrive
// within the timeout makes every other rank's collective return an error naming it;
// no rank hangs.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "tpc/runtime/communicator.h"

namespace tpc::runtime {

class Rendezvous;

// A group of `size` communicators, one per rank (rank i is element i). The group owns
// the shared rendezvous; the communicators must not outlive the vector's elements.
std::vector<std::unique_ptr<Communicator>> MakeInProcessGroup(
    int size, std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace tpc::runtime
