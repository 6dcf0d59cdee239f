#include "tpc/runtime/rank_session.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/runtime/gloo_communicator.h"
#include "tpc/runtime/launcher.h"
#include "tpc/runtime/shm_communicator.h"
#include "tpc/runtime/tcp_store.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

std::string Key(const std::string& prefix, int rank) { return absl::StrCat(prefix, "/", rank); }

absl::Status WithRank(int rank, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("rank ", rank, ": ", std::string(s.message())));
}

}  // namespace

absl::StatusOr<CpuTransport> ParseCpuTransport(const std::string& name) {
  if (name == "auto") return CpuTransport::kAuto;
  if (name == "shm") return CpuTransport::kShm;
  if (name == "gloo") return CpuTransport::kGloo;
  return absl::InvalidArgumentError(
      absl::StrCat("transport '", name, "': expected auto, shm or gloo"));
}

absl::StatusOr<std::unique_ptr<RankSession>> RankSession::Join(const World& world,
                                                               RankSessionOptions options) {
  auto session = std::unique_ptr<RankSession>(new RankSession(world, options));
  RankSession& s = *session;
  if (world.rank == 0 && !world.store_hosted) {
    auto server = TcpStoreServer::Listen("", world.master_port);
    if (!server.ok()) {
      return absl::Status(
          server.status().code(),
          absl::StrCat(
              "rank 0 cannot host the rendezvous store: ", std::string(server.status().message()),
              " (choose another port: MASTER_PORT or --master ADDR:PORT)"));
    }
    s.server_ = std::move(*server);
  }
  auto connect = [&]() {
    return TcpStore::Connect(world.master_host, world.master_port, options.timeout);
  };
  auto store = connect();
  if (!store.ok()) return WithRank(world.rank, store.status());
  s.store_ = std::move(*store);
  auto watch = connect();
  if (!watch.ok()) return WithRank(world.rank, watch.status());
  s.watch_store_ = std::move(*watch);
  const auto reply = std::min<std::chrono::milliseconds>(options.timeout, std::chrono::seconds(60));
  s.store_->set_reply_timeout(reply);
  s.watch_store_->set_reply_timeout(reply);

  // One process per rank, of one run: a second process joining as this rank, or a rank
  // of another run (another plan, world or job) at this store, is refused, and nothing
  // is aborted (that would stop the run that owns the store).
  const std::string where = absl::StrCat(world.master_host, ":", world.master_port);
  TPC_ASSIGN_OR_RETURN(const int64_t joins, s.store_->Add(Key("joins", world.rank), 1));
  if (joins > 1) {
    return absl::AlreadyExistsError(absl::StrCat(
        "rank ", world.rank, ": another process already joined the store at ", where, " as rank ",
        world.rank, ": two runs on one port? (give each run its own MASTER_PORT)"));
  }
  TPC_RETURN_IF_ERROR(s.store_->Set(Key("join", world.rank), options.run_token));
  s.watchdog_ = std::thread([&s] { s.Watch(); });
  // A rank that did not join is not aborted through the store: the ones that did time out
  // alike, and a store shared by mistake must not stop the run that owns it.
  if (absl::Status joined = s.WaitForRanks("join", "join"); !joined.ok()) {
    // The host's store must outlive the others' own timeouts, a moment later.
    s.AnnounceStop(*s.store_, world.rank);
    return joined;
  }
  for (int r = 0; r < world.size; ++r) {
    TPC_ASSIGN_OR_RETURN(const std::string token, s.store_->Get(Key("join", r), options.timeout));
    if (token != options.run_token) {
      s.stopping_ = true;
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", world.rank, ": rank ", r, " at the store ", where,
          " is of another run (another plan, world size or job): give each run its own "
          "MASTER_PORT, and every rank the same plan"));
    }
  }
  return session;
}

RankSession::~RankSession() {
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
}

KeyValueStore& RankSession::store() { return *store_; }

void RankSession::Watch() {
  while (!stopping_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (stopping_.load()) return;
    (void)watch_store_->Add(Key("heartbeat", world_.rank), 1);
    auto set = watch_store_->Check(kAbortKey);
    if (stopping_.load()) return;
    std::string message;
    if (!set.ok()) {
      if (failed_.load()) return;  // this rank failed and is on its way out
      message = absl::StrCat("lost the rendezvous store at ", world_.master_host, ":",
                             world_.master_port, " (rank 0 or the launcher stopped)");
    } else if (!*set) {
      continue;
    } else {
      auto value = watch_store_->Get(kAbortKey, std::chrono::seconds(1));
      int origin = -1;
      (void)DecodeRankStatus(value.ok() ? *value : "", &origin);
      if (origin == world_.rank || failed_.load()) return;  // this rank's own failure
      message = DescribeRankStatus(value.ok() ? *value : "");
      AnnounceStop(*watch_store_, origin);
    }
    if (!options_.quiet_when_stopped) {
      std::fprintf(stderr, "tp-run: rank %d: stopped: %s\n", world_.rank, message.c_str());
      std::fflush(stderr);
    }
    UnlinkConnectingSegment();  // (the segment of a connection this stop interrupts)
    _exit(kExitPeerFailed);
  }
}

absl::Status RankSession::WaitForRanks(const std::string& prefix, const std::string& what) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_.size; ++r) keys.push_back(Key(prefix, r));
  absl::Status s = store_->Wait(keys, options_.timeout);
  if (s.ok() || s.code() != absl::StatusCode::kDeadlineExceeded) return WithRank(world_.rank, s);
  std::vector<int> missing;
  for (int r = 0; r < world_.size; ++r) {
    auto set = store_->Check(keys[static_cast<size_t>(r)]);
    if (set.ok() && !*set) missing.push_back(r);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rank(s) ", absl::StrJoin(missing, ", "), " of ", world_.size, " (",
                   world_.size_source, ", ", world_.launcher, ") did not ", what, " within ",
                   absl::StrCat(options_.timeout.count() / 1000.0), " s"));
}

absl::Status RankSession::Agree(const std::string& step, const absl::Status& mine,
                                int* failed_rank) {
  if (failed_rank != nullptr) *failed_rank = -1;
  // A rank that failed on its own stops after the agreement, saying why when it is the
  // first to fail. The watchdog must not stop it before that, silently, when a peer that
  // failed too is quicker to announce it: no rank would then say why.
  if (!mine.ok()) failed_ = true;
  TPC_RETURN_IF_ERROR(store_->Set(Key(step, world_.rank), EncodeRankStatus(world_.rank, mine)));
  TPC_RETURN_IF_ERROR(WaitForRanks(step, absl::StrCat("reach '", step, "'")));
  for (int r = 0; r < world_.size; ++r) {
    TPC_ASSIGN_OR_RETURN(std::string v, store_->Get(Key(step, r), options_.timeout));
    int origin = -1;
    absl::Status s = DecodeRankStatus(v, &origin);
    if (!s.ok()) {
      if (failed_rank != nullptr) *failed_rank = r;
      return RankFailed(r, s);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> RankSession::ConnectCpuCommunicator() {
  if (options_.transport != CpuTransport::kGloo) {
    ShmOptions shm;
    shm.timeout = options_.timeout;
    auto connected = ConnectShm(*store_, world_.rank, world_.size, shm);
    // Some rank cannot map the segment (another machine): every rank learns it alike.
    const bool elsewhere =
        !connected.ok() && connected.status().code() == absl::StatusCode::kFailedPrecondition;
    if (connected.ok() || !elsewhere || options_.transport == CpuTransport::kShm) {
      if (connected.ok()) cpu_transport_ = "shm";
      return connected;
    }
  }
  GlooOptions gloo;
  gloo.address = store_->local_address();
  gloo.timeout = options_.timeout;
  auto connected = ConnectGloo(*store_, world_.rank, world_.size, gloo);
  if (connected.ok()) cpu_transport_ = "gloo";
  return connected;
}

bool RankSession::Fail(const absl::Status& reason) {
  failed_ = true;
  if (!store_) return false;
  const bool first = SetAbortOnce(*store_, world_.rank, reason);
  AnnounceStop(*store_, world_.rank);
  return first;
}

void RankSession::AnnounceStop(KeyValueStore& store, int origin) {
  (void)store.Set(Key("stopped", world_.rank), "");
  if (server_ == nullptr) return;
  std::vector<std::string> keys;
  for (int r = 0; r < world_.size; ++r) {
    if (r == world_.rank || r == origin) continue;
    auto joined = store.Check(Key("join", r));
    if (joined.ok() && *joined) keys.push_back(Key("stopped", r));
  }
  (void)store.Wait(keys, std::chrono::seconds(2));
}

FailureVerdict RankSession::Judge(const absl::Status& failure) {
  FailureVerdict v;
  v.status = failure;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  do {
    auto set = store_->Check(kAbortKey);
    if (!set.ok()) break;
    if (*set) {
      auto value = store_->Get(kAbortKey, std::chrono::seconds(1));
      int origin = -1;
      absl::Status reason = DecodeRankStatus(value.ok() ? *value : "", &origin);
      if (origin == world_.rank) return v;
      v.stopped_by_peer = true;
      v.origin = origin;
      v.status = absl::AbortedError(value.ok() ? DescribeRankStatus(*value)
                                               : std::string(reason.message()));
      return v;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);

  // First-hand: name the ranks that went silent. Every rank's watchdog counts its
  // heartbeat 10 times a second; a count that does not move for half a second is a rank
  // that is gone (killed, crashed) or stopped.
  auto read = [&] {
    std::vector<int64_t> counts;
    for (int r = 0; r < world_.size; ++r) {
      auto c = store_->Add(Key("heartbeat", r), 0);
      counts.push_back(c.ok() ? *c : -1);
    }
    return counts;
  };
  const std::vector<int64_t> before = read();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<int64_t> after = read();
  std::vector<int> silent;
  for (int r = 0; r < world_.size; ++r) {
    const size_t k = static_cast<size_t>(r);
    if (r != world_.rank && after[k] >= 0 && after[k] == before[k]) silent.push_back(r);
  }
  if (!silent.empty()) {
    v.status = absl::Status(failure.code(),
                            absl::StrCat("rank(s) ", absl::StrJoin(silent, ", "),
                                         " stopped responding (killed, crashed or stopped); here: ",
                                         std::string(failure.message())));
  }
  return v;
}

void RankSession::Stopped(int origin) {
  failed_ = true;  // the watchdog must not report this stop again
  AnnounceStop(*store_, origin);
}

absl::Status RankSession::Post(const std::string& name, const std::string& value) {
  return store_->Set(Key(name, world_.rank), value);
}

absl::StatusOr<std::vector<std::string>> RankSession::Gather(const std::string& name) {
  TPC_RETURN_IF_ERROR(WaitForRanks(name, absl::StrCat("post '", name, "'")));
  std::vector<std::string> out;
  for (int r = 0; r < world_.size; ++r) {
    TPC_ASSIGN_OR_RETURN(std::string v, store_->Get(Key(name, r), options_.timeout));
    out.push_back(std::move(v));
  }
  return out;
}

absl::Status RankSession::Finish() {
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  TPC_RETURN_IF_ERROR(store_->Set(Key("done", world_.rank), ""));
  if (server_ != nullptr) return WaitForRanks("done", "finish");
  return absl::OkStatus();
}

}  // namespace tpc::runtime
