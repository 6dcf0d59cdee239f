// The TCP key-value store's client: one connection, one request at a time, every reply
// bounded in time. The wire format is in tcp_store_wire.h.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tcp_store_wire.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

using namespace tcp_wire;  // NOLINT(build/namespaces): the wire format's own file pair

namespace {

// How many missing keys a timeout message names.
constexpr size_t kMaxKeysNamed = 16;

// The IP address in `addr` as text; an IPv4-mapped IPv6 address as IPv4.
std::string AddressText(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    }
  }
  return text;
}

// Whether `a` and `b` are the same address and port.
bool SameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(&a);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
    return x->sin6_port == y->sin6_port &&
           std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
  }
  return false;
}

// Connects the non-blocking socket `fd` to `ai`, waiting at most until `deadline` (and at
// least a moment, so a zero timeout still gets one try). 0 or the errno it failed with.
int ConnectBy(int fd, const addrinfo& ai, Clock::time_point deadline) {
  if (connect(fd, ai.ai_addr, ai.ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  const Clock::time_point until = std::max(deadline, Clock::now() + milliseconds(20));
  while (true) {
    pollfd p{fd, POLLOUT, 0};
    const int n = poll(&p, 1, PollMs(until, Clock::now()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) {
      if (Clock::now() < until) continue;
      return ETIMEDOUT;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
  }
}

std::string QuotedKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kMaxKeysNamed; ++i) {
    absl::StrAppend(&out, i ? ", '" : "'", absl::CHexEscape(keys[i]), "'");
  }
  if (keys.size() > kMaxKeysNamed) absl::StrAppend(&out, ", ... (", keys.size(), " in all)");
  return out;
}

int64_t ClampWaitMs(milliseconds timeout) {
  return std::clamp<int64_t>(timeout.count(), 0, kMaxWaitMs);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, int port,
                                                            milliseconds timeout) {
  std::string where = absl::StrCat(host, ":", port);
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rendezvous store's port ", port, " is not in [1, 65535]"));
  }
  const Clock::time_point deadline = Clock::now() + milliseconds(ClampWaitMs(timeout));
  const std::string service = std::to_string(port);
  std::string last_error = "not tried";
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* addrs = nullptr;
    // Resolved on every try: the store's host name may not resolve until its pod is up.
    const int rc =
        getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &addrs);
    if (rc != 0) last_error = absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc));
    for (addrinfo* ai = rc == 0 ? addrs : nullptr; ai != nullptr; ai = ai->ai_next) {
      const int fd =
          socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        last_error = ErrnoText(errno);
        continue;
      }
      // Bounded per address, so one that drops packets leaves time for the next.
      int err = ConnectBy(fd, *ai, std::min(deadline, Clock::now() + milliseconds(5000)));
      sockaddr_storage local{}, peer{};
      socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
      if (err == 0 && (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
                       getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)) {
        err = errno;
      }
      // Connecting to a local port nothing listens on, from an ephemeral port that happens
      // to be the same one, connects the socket to itself (TCP simultaneous open).
      if (err == 0 && SameEndpoint(local, peer)) err = ECONNREFUSED;
      if (err == 0) {
        freeaddrinfo(addrs);
        SetNoDelay(fd);
        return std::unique_ptr<TcpStore>(new TcpStore(fd, std::move(where), AddressText(local)));
      }
      close(fd);
      last_error = ErrnoText(err);
    }
    if (rc == 0) freeaddrinfo(addrs);
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    // Nothing listens yet (rank 0 starts late, or restarts): try again shortly.
    std::this_thread::sleep_for(std::min<Clock::duration>(milliseconds(75), deadline - now));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("cannot reach the rendezvous store at ", where, " after ",
                   static_cast<double>(timeout.count()) / 1000.0,
                   " s (is rank 0 running? MASTER_ADDR/MASTER_PORT): ", last_error));
}

TcpStore::TcpStore(int fd, std::string where, std::string local_address)
    : where_(std::move(where)), local_address_(std::move(local_address)), fd_(fd) {}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::string> TcpStore::Call(const std::string& request, milliseconds reply_within) {
  if (request.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a request of ", request.size(),
                     " bytes is more than the rendezvous store takes (", kMaxFrameBytes, ")"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  const Clock::time_point deadline = Clock::now() + reply_within;
  // Every failure from here on leaves the stream at an unknown point: fail for good.
  auto fail = [this](absl::Status status) {
    close(fd_);
    fd_ = -1;
    failed_ = status;
    return status;
  };
  auto lost = [this](int err) {
    std::string message =
        absl::StrCat("lost the rendezvous store at ", where_, " (rank 0 or the launcher exited)");
    if (err != 0 && err != ECONNRESET && err != EPIPE) {
      absl::StrAppend(&message, ": ", ErrnoText(err));
    }
    return absl::UnavailableError(message);
  };
  auto silent = [this, reply_within] {
    return absl::UnavailableError(
        absl::StrCat("the rendezvous store at ", where_, " did not answer within ",
                     static_cast<double>(reply_within.count()) / 1000.0, " s"));
  };
  // Waits for `events` on fd_ until the deadline: false if it passed.
  auto ready = [this, deadline](short events) {
    while (true) {
      pollfd p{fd_, events, 0};
      const Clock::time_point now = Clock::now();
      if (poll(&p, 1, PollMs(deadline, now)) > 0) return true;
      if (Clock::now() >= deadline) return false;
    }
  };

  std::string frame;
  frame.reserve(request.size() + 4);
  PutU32(&frame, static_cast<uint32_t>(request.size()));
  frame.append(request);
  for (size_t sent = 0; sent < frame.size();) {
    const ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!ready(POLLOUT)) return fail(silent());
    } else if (!(n < 0 && errno == EINTR)) {
      return fail(lost(errno));
    }
  }

  // The reply: its length, then its payload.
  std::string reply(4, '\0');
  bool have_length = false;
  for (size_t got = 0; got < reply.size();) {
    const ssize_t n = recv(fd_, reply.data() + got, reply.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return fail(lost(0));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!ready(POLLIN)) return fail(silent());
    } else if (errno != EINTR) {
      return fail(lost(errno));
    }
    if (got == reply.size() && !have_length) {
      const size_t len = LoadU32(reply.data());
      if (len == 0 || len > kMaxFrameBytes) {
        return fail(absl::InternalError(absl::StrCat("the rendezvous store at ", where_,
                                                     " sent a malformed reply (", len, " bytes)")));
      }
      have_length = true;
      reply.assign(len, '\0');
      got = 0;
    }
  }
  return reply;
}

namespace {

// The fields after an OK status byte, or the error the reply stands for. A TIMED_OUT
// reply is returned as OK with `*timed_out` set, for the caller to phrase.
absl::StatusOr<Reader> OpenReply(const std::string& reply, const std::string& where,
                                 bool* timed_out) {
  Reader r(reply);
  uint8_t status = 0;
  r.U8(&status);
  if (timed_out != nullptr) *timed_out = status == kTimedOut;
  if (status == kOk || (status == kTimedOut && timed_out != nullptr)) return r;
  std::string message;
  if (status == kError && r.Bytes(&message)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rendezvous store at ", where, ": ", message));
  }
  return absl::InternalError(
      absl::StrCat("the rendezvous store at ", where, " sent a malformed reply"));
}

absl::Status Malformed(const std::string& where) {
  return absl::InternalError(
      absl::StrCat("the rendezvous store at ", where, " sent a malformed reply"));
}

}  // namespace

absl::Status TcpStore::TimedOut(const std::string& reply, milliseconds timeout) const {
  Reader r(reply);
  uint8_t status = 0;
  uint32_t n = 0;
  if (!r.U8(&status) || !r.U32(&n)) return Malformed(where_);
  std::vector<std::string> missing;
  for (uint32_t i = 0; i < n; ++i) {
    std::string key;
    if (!r.Bytes(&key)) return Malformed(where_);
    missing.push_back(std::move(key));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("timed out after ", timeout.count(), " ms waiting for ",
                   missing.size() == 1 ? "key " : absl::StrCat(missing.size(), " keys "),
                   QuotedKeys(missing), " in the rendezvous store at ", where_));
}

absl::Status TcpStore::Set(const std::string& key, const std::string& value) {
  if (value.size() > static_cast<size_t>(kTcpStoreMaxValueBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the value of key '", absl::CHexEscape(key), "' is ", value.size(),
                     " bytes; the rendezvous store takes at most ", kTcpStoreMaxValueBytes));
  }
  std::string request;
  PutU8(&request, kSet);
  PutBytes(&request, key);
  PutBytes(&request, value);
  TPC_ASSIGN_OR_RETURN(std::string reply, Call(request, reply_timeout_));
  TPC_ASSIGN_OR_RETURN(Reader r, OpenReply(reply, where_, nullptr));
  return r.done() ? absl::OkStatus() : Malformed(where_);
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key, milliseconds timeout) {
  const int64_t ms = ClampWaitMs(timeout);
  std::string request;
  PutU8(&request, kGet);
  PutU32(&request, 1);
  PutBytes(&request, key);
  PutU64(&request, static_cast<uint64_t>(ms));
  TPC_ASSIGN_OR_RETURN(std::string reply, Call(request, milliseconds(ms) + kReplySlack));
  bool timed_out = false;
  TPC_ASSIGN_OR_RETURN(Reader r, OpenReply(reply, where_, &timed_out));
  if (timed_out) return TimedOut(reply, timeout);
  std::string value;
  if (!r.Bytes(&value) || !r.done()) return Malformed(where_);
  return value;
}

absl::Status TcpStore::Wait(const std::vector<std::string>& keys, milliseconds timeout) {
  const int64_t ms = ClampWaitMs(timeout);
  std::string request;
  PutU8(&request, kWait);
  PutU32(&request, static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) PutBytes(&request, key);
  PutU64(&request, static_cast<uint64_t>(ms));
  TPC_ASSIGN_OR_RETURN(std::string reply, Call(request, milliseconds(ms) + kReplySlack));
  bool timed_out = false;
  TPC_ASSIGN_OR_RETURN(Reader r, OpenReply(reply, where_, &timed_out));
  if (timed_out) return TimedOut(reply, timeout);
  return r.done() ? absl::OkStatus() : Malformed(where_);
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  std::string request;
  PutU8(&request, kAdd);
  PutBytes(&request, key);
  PutU64(&request, static_cast<uint64_t>(delta));
  TPC_ASSIGN_OR_RETURN(std::string reply, Call(request, reply_timeout_));
  TPC_ASSIGN_OR_RETURN(Reader r, OpenReply(reply, where_, nullptr));
  uint64_t value = 0;
  if (!r.U64(&value) || !r.done()) return Malformed(where_);
  return static_cast<int64_t>(value);
}

absl::StatusOr<bool> TcpStore::Check(const std::string& key) {
  std::string request;
  PutU8(&request, kCheck);
  PutBytes(&request, key);
  TPC_ASSIGN_OR_RETURN(std::string reply, Call(request, reply_timeout_));
  TPC_ASSIGN_OR_RETURN(Reader r, OpenReply(reply, where_, nullptr));
  uint8_t set = 0;
  if (!r.U8(&set) || !r.done()) return Malformed(where_);
  return set != 0;
}

}  // namespace tpc::runtime
