// The multi-process communicator: ranks are processes (on one host or several) and the
// collectives run over Gloo's TCP transport. Ranks find each other through the run's
// KeyValueStore (Gloo's full-mesh rendezvous: every rank publishes the addresses of its
// listening pairs and connects to the others').
//
// Reductions are bit-identical to the in-process communicator's: Gloo only moves bytes
// (all-to-all and all-gather), and every element is reduced locally in rank order 0, 1,
// ..., N-1 by the same code, so a run with processes equals a run with threads.
//
// Every collective and the connection are bounded by GlooOptions::timeout. A failed
// collective (timeout, a peer gone, Abort) breaks the communicator: it closes its
// connections, so that the peers fail promptly too, and every later call returns the
// same error. One collective at a time per communicator, as with the other backends.
//
// Gloo writes to its sockets with writev(2), so a peer that has gone raises SIGPIPE:
// ConnectGloo sets SIGPIPE to ignored, process-wide, unless the program has its own
// handler, and the write fails with EPIPE instead.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/kv_store.h"

namespace tpc::runtime {

struct GlooOptions {
  // The local IP (or host name) to bind Gloo's TCP device to; the peers connect to it.
  std::string address;
  // Bounds every collective and the connection setup.
  std::chrono::milliseconds timeout{30000};
  // The rendezvous keys are "<key_prefix>/...", so that several groups (or several
  // connections of one group) can share one store: each needs its own prefix.
  std::string key_prefix = "gloo";
};

// Connects rank `rank` of `size` to its peers through `store`, waiting up to
// options.timeout for them. An error names this rank and the peers not reached. The
// store must outlive the communicator (Abort writes kAbortKey to it).
absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(KeyValueStore& store, int rank, int size,
                                                          const GlooOptions& options);

}  // namespace tpc::runtime
