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

struct RankSessionOptions {
  // Joining, each agreement and each collective wait at most this long.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  // Ranks stopped by another rank's failure print nothing (tp-run's own workers: the
  // launcher's terminal shows the failing rank's error once).
  bool quiet_when_stopped = false;
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
  // succeeded, else the first failure in rank order, naming its rank (also put in
  // `failed_rank`, -1 when none or when ranks did not post within the timeout, which are
  // named).
  absl::Status Agree(const std::string& step, const absl::Status& mine, int* failed_rank = nullptr);

  // The CPU communicator between the ranks (Gloo over TCP, bound to the address this
  // machine reaches the store from).
  absl::StatusOr<std::unique_ptr<Communicator>> ConnectCpuCommunicator();

  // Tells every rank that this rank failed with `reason`; they stop. Rank 0, hosting the
  // store, waits (briefly) until the others have read it before it may exit.
  void Fail(const absl::Status& reason);

  // The failure of another rank (or of the launcher's view of one) when the store says
  // so within `wait`: after a collective failed, tells a rank stopped by a peer from the
  // rank that failed first-hand.
  std::optional<absl::Status> PeerFailure(std::chrono::milliseconds wait);
  // The other ranks whose heartbeat (their watchdog's, 10 a second) stood still for half
  // a second: killed, crashed or stopped. Takes that half second.
  std::vector<int> SilentRanks();

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

  World world_;
  RankSessionOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStore> store_;        // the main thread's connection
  std::unique_ptr<TcpStore> watch_store_;  // the watchdog's
  std::thread watchdog_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
};

}  // namespace tpc::runtime
