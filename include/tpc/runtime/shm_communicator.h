// The same-machine communicator: ranks are processes of one machine and the collectives
// run through one shared-memory segment (POSIX shm), with no thread of its own. Gloo's
// TCP transport needs an event-loop thread per process, which, when every rank has one
// core (tp-run --cpus), waits for a context switch on every message; here a rank copies
// its block into its own slot of the segment, publishes a step counter, and reads the
// other ranks' slots once their counters have reached the step.
//
// Protocol: every collective is a sequence of steps, numbered alike on every rank. In
// step k a rank stages at most ShmOptions::chunk_bytes in half k % 2 of its slot, stores
// k in its counter (release), waits until every counter is >= k (acquire) and reads the
// others' halves. Two halves are enough: a rank writes half k % 2 again at step k + 2,
// after every rank has published k + 1, which each does only once it has read step k.
// Each step also publishes what the rank is doing (collective, count, dtype, reduction):
// ranks that call different collectives get an error naming both, never mixed bytes.
//
// Reductions are bit-identical to the in-process and the Gloo communicators' (the same
// element-wise code, sources in rank order 0, 1, ..., N-1).
//
// Waiting: a rank spins briefly, then sleeps on a futex of the counter it waits for (the
// writer wakes it when anyone sleeps). While it sleeps it checks, every few milliseconds,
// the group's abort word, its deadline (ShmOptions::timeout) and whether the ranks it waits
// for still live: each rank holds an open-file-description lock on its own byte of the
// segment's file, which the kernel drops when the process dies, so a killed rank is named
// within milliseconds. A failure breaks the communicator and writes the segment's abort
// word, so that the peers fail promptly too, and every later call returns the same error.
//
// The segment is unlinked as soon as every rank has mapped it: nothing is left in
// /dev/shm, even when ranks are killed. While the ranks connect, every rank that knows the
// segment's name removes it when it leaves early: on an error, by _exit through
// UnlinkConnectingSegment (tp-run's watchdog), or stopped by SIGTERM, SIGINT or SIGHUP
// (a handler installed for the connection only, then the signal's default action); rank
// 0 killed outright leaves it to tp-run's launcher (the names start with its pid).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/kv_store.h"

namespace tpc::runtime {

struct ShmOptions {
  // Bounds the connection and every collective.
  std::chrono::milliseconds timeout{30000};
  // The rendezvous keys are "<key_prefix>/...": one prefix per group sharing a store.
  std::string key_prefix = "shm";
  // Bytes a rank stages per step; larger collectives go in chunks of this size. The
  // segment holds 2 * chunk_bytes per rank.
  int64_t chunk_bytes = int64_t{1} << 20;
};

// Rank 0 creates the segment and publishes its name through `store`; the others map it.
// Errors, alike on every rank:
//  - FailedPrecondition when some rank cannot map rank 0's segment (another machine,
//    another user, /dev/shm full), naming the first such rank and why: the caller may
//    then connect through Gloo instead;
//  - DeadlineExceeded naming the ranks that did not come within options.timeout.
// The store must outlive the communicator (Abort writes kAbortKey to it).
absl::StatusOr<std::unique_ptr<Communicator>> ConnectShm(KeyValueStore& store, int rank, int size,
                                                         const ShmOptions& options);

// Removes the segment this process is connecting through, if any (async-signal-safe: for
// a rank about to _exit while connecting).
void UnlinkConnectingSegment();

// The prefix of the segment names a rank process `pid` creates ("/dev/shm/tpc-<pid>-"):
// what a launcher removes after a rank 0 that was killed while connecting.
std::string SegmentPathPrefix(int pid);

}  // namespace tpc::runtime
