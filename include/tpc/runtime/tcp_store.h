// The TCP key-value store a multi-process run bootstraps through, in the model of
// PyTorch's TCPStore: rank 0 (or the tp-run launcher) hosts a TcpStoreServer, every rank
// connects a TcpStore client to it (MASTER_ADDR:MASTER_PORT).
//
// The server is one background thread with a poll() loop over non-blocking sockets.
// Waiting happens on the server: a Get or Wait is answered when its keys are set, or with
// the keys still missing when its deadline passes, so a client never polls. A client
// bounds every reply it waits for by its own clock as well, and a lost connection (the
// host exited) is an Unavailable error that sticks, never a hang or a SIGPIPE.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tpc/runtime/kv_store.h"

namespace tpc::runtime {

// The largest value the store holds; a client refuses a larger one before sending it and
// the server refuses one that gets there anyway.
inline constexpr int64_t kTcpStoreMaxValueBytes = int64_t{64} << 20;

class TcpStoreServer {
 public:
  // Listens on host:port (host "" or "0.0.0.0": every interface; port 0: an ephemeral
  // port, see port()) and serves until destroyed. A port another process listens on is
  // an Unavailable error naming host:port.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Listen(const std::string& host, int port);

  // Stops serving and closes every connection: clients see Unavailable.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port it listens on (the one the kernel chose for port 0).
  int port() const { return port_; }

 private:
  class EventLoop;
  TcpStoreServer(std::unique_ptr<EventLoop> loop, int port);

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  int port_;
};

// A client of a TcpStoreServer. Thread-safe: requests from several threads take turns on
// the one connection, so a thread waiting in Get or Wait holds up the client's other
// threads until it returns (give a thread that must not wait its own client).
class TcpStore final : public KeyValueStore {
 public:
  // Connects to host:port (a host name or an IP literal), retrying while nothing listens
  // there yet (rank 0 may start last) until `timeout`; then DeadlineExceeded.
  static absl::StatusOr<std::unique_ptr<TcpStore>> Connect(const std::string& host, int port,
                                                           std::chrono::milliseconds timeout);

  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  // The IP address of this end of the connection ("127.0.0.1", "10.0.0.2"): the local
  // interface that routes to the store's host, which the other ranks can reach this one
  // on (Gloo binds to it).
  std::string local_address() const { return local_address_; }

  // How long a request that does not wait (Set, Add, Check) waits for its reply before
  // the store counts as lost (default 60 s): a run's --timeout, so that a stopped store
  // host is noticed within it.
  void set_reply_timeout(std::chrono::milliseconds timeout) { reply_timeout_ = timeout; }

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::string& key) override;

 private:
  TcpStore(int fd, std::string where, std::string local_address);

  // Sends one request (a payload, framed here) and returns the reply's payload, waiting
  // for it at most `reply_within`. Any failure of the connection fails the client for
  // good: a late reply would answer the next request.
  absl::StatusOr<std::string> Call(const std::string& request,
                                   std::chrono::milliseconds reply_within);
  // The error a waiting request's timed-out reply turns into.
  absl::Status TimedOut(const std::string& reply, std::chrono::milliseconds timeout) const;

  const std::string where_;  // "host:port", for messages
  const std::string local_address_;
  std::mutex mu_;
  int fd_;               // guarded by mu_; -1 once failed
  absl::Status failed_;  // guarded by mu_; why the client failed, if it did
  std::chrono::milliseconds reply_timeout_{60000};
};

}  // namespace tpc::runtime
