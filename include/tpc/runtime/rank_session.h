// One rank of a multi-process run (tp-run's workers, or tp-run started by torchrun,
// mpirun or srun): the connection to the rendezvous store (hosted by rank 0 unless tp-run's
// launcher hosts it), the agreement steps every rank passes together, the communicator,
// and the watchdog that stops this process when another rank fails.
//
// Failure protocol: a rank that fails first-hand calls Fail(), which sets the store's
// "abort" key to "RANK\nreason"; every rank's watchdog polls that key (10 times a second)
// and, when another rank set it, prints one line naming that rank (unless quiet) and exits
// with kExitPeerFailed, even while its main thread is blocked in a collective. A lost
// store (rank 0 gone) stops a rank the same way.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/kv_store.h"
#include "tpc/runtime/tcp_store.h"
#include "tpc/runtime/world.h"

namespace tpc::runtime {

// How the CPU communicator connects the ranks' processes.
enum class CpuTransport {
  kAuto,  // shared memory when every rank can map rank 0's segment (one machine), else Gloo
  kShm,   // shared memory (runtime/shm_communicator.h), one machine only
  kGloo,  // Gloo over TCP (runtime/gloo_communicator.h), any machines
};

// "auto", "shm", "gloo"; InvalidArgument otherwise.
absl::StatusOr<CpuTransport> ParseCpuTransport(const std::string& name);

struct RankSessionOptions {
  // Joining, each agreement and each collective wait at most this long.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  // Ranks stopped by another rank's failure print nothing (tp-run's own workers: the
  // launcher's terminal shows the failing rank's error once).
  bool quiet_when_stopped = false;
  // What makes this run this run (the plan's hash, the world size, the launcher's job
  // id): every rank must join with the same token, so that ranks of two runs that meet
  // at one store (one port) are refused, not mixed.
  std::string run_token;
  CpuTransport transport = CpuTransport::kAuto;
};

// What a failure of this rank means, once the store has been asked.
struct FailureVerdict {
  // Another rank (or the launcher) failed first and this rank stopped because of it:
  // `status` is that rank's reason and `origin` its rank (-1: the launcher).
  bool stopped_by_peer = false;
  int origin = -1;
  absl::Status status;
};

class RankSession {
 public:
  // Hosts the store (rank 0, unless the launcher does), connects, starts the watchdog and
  // waits until every rank has joined. Errors: port in use, store unreachable, ranks that
  // did not join within the timeout (named).
  static absl::StatusOr<std::unique_ptr<RankSession>> Join(const World& world,
                                                           RankSessionOptions options);
  ~RankSession();

  const World& world() const { return world_; }
  int rank() const { return world_.rank; }
  KeyValueStore& store();

  // Every rank posts the outcome of step `step` (`mine`); returns OK when every rank
  // succeeded, else the first failure in rank order as its peers report it ("rank R
  // failed: …", RankFailed, also when R is this rank: a rank reports its own failure from
  // `mine`), its rank also put in `failed_rank` (-1 when none or when ranks did not post
  // within the timeout, which are named).
  absl::Status Agree(const std::string& step, const absl::Status& mine, int* failed_rank = nullptr);

  // The CPU communicator between the ranks, by options.transport: shared memory, or
  // Gloo over TCP bound to the address this machine reaches the store from. Under kAuto
  // every rank picks the same: shared memory unless some rank cannot map the segment.
  absl::StatusOr<std::unique_ptr<Communicator>> ConnectCpuCommunicator();
  // "shm" or "gloo" once connected ("" before).
  const std::string& cpu_transport() const { return cpu_transport_; }

  // Tells every rank that this rank failed with `reason`; they stop. Rank 0, hosting the
  // store, waits (briefly) until the others have read it before it may exit. True when
  // this rank's reason is the one they read (of ranks failing at once, the first's).
  bool Fail(const absl::Status& reason);

  // After a collective or a store call failed with `failure`: stopped by a peer's
  // failure (the abort key is set within half a second), or first-hand, in which case
  // the ranks whose heartbeat (their watchdog's, 10 a second) stood still for half a
  // second are named: killed, crashed or stopped. Takes up to a second.
  FailureVerdict Judge(const absl::Status& failure);

  // This rank stops because rank `origin` failed: says so in the store and, when this
  // rank hosts it, waits (up to 2 s) until the others have said so too, since they read
  // the reason from it.
  void Stopped(int origin);

  // Posts `value` as this rank's `name`; Gather (any rank) waits for every rank's.
  absl::Status Post(const std::string& name, const std::string& value);
  absl::StatusOr<std::vector<std::string>> Gather(const std::string& name);

  // The last step: every rank says it is done; rank 0 waits for every rank so that its
  // store outlives their use of it. The watchdog is stopped first.
  absl::Status Finish();

 private:
  RankSession(World world, RankSessionOptions options)
      : world_(std::move(world)), options_(options) {}
  void Watch();
  absl::Status WaitForRanks(const std::string& prefix, const std::string& what);
  // This rank stops (rank `origin` failed; this one when it is the failure): says so in
  // `store` and, when this rank hosts it, waits up to 2 s until the other ranks that
  // joined have said so too, since they read the reason from it.
  void AnnounceStop(KeyValueStore& store, int origin);

  World world_;
  RankSessionOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStore> store_;        // the main thread's connection
  std::unique_ptr<TcpStore> watch_store_;  // the watchdog's
  std::thread watchdog_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::string cpu_transport_;
};

}  // namespace tpc::runtime
