// The TCP key-value store: the server's poll() loop and the client.
//
// Wire format. Every message, either way, is a frame: a u32 payload length, then the
// payload; integers are little-endian, a string is a u32 length and its bytes. A request's
// payload is a command byte and its fields:
//   SET   key value
//   GET   u32 1, key, u64 timeout_ms
//   WAIT  u32 n, n keys, u64 timeout_ms
//   ADD   key, u64 delta (an int64)
//   CHECK key
// A reply's payload is a status byte and its fields: OK (GET: the value; ADD: the u64 new
// value; CHECK: a u8), TIMED_OUT (u32 n, the n keys still missing) or ERROR (a message).
// The protocol is strictly one request, then its reply: a client sends nothing while it
// waits. The server drops a connection that sends a frame it cannot parse or one longer
// than kMaxFrameBytes, before reading it, so no length from the wire is trusted with an
// allocation.
#include "tpc/runtime/tcp_store.h"

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
#include "tpc/util/status_macros.h"

namespace tpc::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

enum Command : uint8_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4, kCheck = 5 };
enum ReplyStatus : uint8_t { kOk = 0, kTimedOut = 1, kError = 2 };

// A value and room for its key and the framing.
constexpr size_t kMaxFrameBytes = static_cast<size_t>(kTcpStoreMaxValueBytes) + (1 << 20);
// Waits are clamped to 30 days, which keeps every deadline far from overflowing the clock.
constexpr int64_t kMaxWaitMs = int64_t{30} * 24 * 3600 * 1000;
// How much longer than a wait's own timeout a client waits for the server's reply to it.
constexpr milliseconds kReplySlack(5000);
// The most a connection's read takes per poll() round, so one client sending a large
// value does not starve the others.
constexpr size_t kReadChunk = 256 << 10;
// How many missing keys a timeout message names.
constexpr size_t kMaxKeysNamed = 16;

std::string ErrnoText(int err) { return std::strerror(err); }

void PutU8(std::string* s, uint8_t v) { s->push_back(static_cast<char>(v)); }
void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
// Callers check that the request stays under kMaxFrameBytes, which bounds `b` far below
// 4 GiB; a longer `b` would be refused by that check, not sent truncated.
void PutBytes(std::string* s, const std::string& b) {
  PutU32(s, static_cast<uint32_t>(b.size()));
  s->append(b);
}
uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Reads fields off a payload; each read fails, rather than reading past the end, when
// the payload is too short for it.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  bool U8(uint8_t* v) {
    if (data_.empty()) return false;
    *v = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t* v) {
    if (data_.size() < 4) return false;
    *v = LoadU32(data_.data());
    data_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    uint32_t lo = 0, hi = 0;
    if (data_.size() < 8 || !U32(&lo) || !U32(&hi)) return false;
    *v = (static_cast<uint64_t>(hi) << 32) | lo;
    return true;
  }
  bool Bytes(std::string* v) {
    uint32_t n = 0;
    if (!U32(&n) || n > data_.size()) return false;
    v->assign(data_.data(), n);
    data_.remove_prefix(n);
    return true;
  }
  bool done() const { return data_.empty(); }

 private:
  absl::string_view data_;
};

void SetNoDelay(int fd) {
  // Requests and replies are small and strictly alternate: Nagle would hold each one back
  // waiting for an ACK.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The milliseconds poll() should wait to reach `deadline`, rounded up (so a wait does not
// end a hair early and spin) and at least 0.
int PollMs(Clock::time_point deadline, Clock::time_point now) {
  if (deadline <= now) return 0;
  const int64_t ms = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60000));
}

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

// ---- Server ----

// The server's state and its loop; only the loop's thread touches anything but stop_.
class TcpStoreServer::EventLoop {
 public:
  EventLoop(int listen_fd, int wake_read, int wake_write)
      : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write) {}

  ~EventLoop() {
    for (auto& entry : conns_) {
      if (entry.second.fd >= 0) close(entry.second.fd);
    }
    close(listen_fd_);
    close(wake_read_);
    close(wake_write_);
  }

  // Serves until Stop().
  void Run();

  // Makes Run() return; from any thread.
  void Stop() {
    stop_.store(true);
    const char byte = 0;
    // The pipe is non-blocking; if it is full, the loop is awake already.
    ssize_t ignored = write(wake_write_, &byte, 1);
    (void)ignored;
  }

 private:
  struct Conn {
    int fd = -1;      // -1 once dropped
    std::string in;   // received, not yet handled
    std::string out;  // to send, from out_pos on
    size_t out_pos = 0;
    bool waiting = false;  // its GET or WAIT is in waiters_
  };
  struct Waiter {
    uint64_t conn = 0;
    Command command = kWait;
    std::vector<std::string> keys;
    size_t next = 0;  // keys[0, next) are known to be set; keys are never unset
    Clock::time_point deadline;
  };

  void Accept();
  void Read(Conn& c);
  void Flush(Conn& c);
  // Handles the complete requests in c.in, until one waits.
  void Process(uint64_t id, Conn& c);
  // Handles one request; false if it is malformed (the caller drops the connection).
  bool Handle(uint64_t id, Conn& c, absl::string_view payload);
  void Reply(Conn& c, const std::string& payload);
  void ReplyError(Conn& c, const std::string& message);
  // Replies to `w` if all its keys are set.
  bool TryFinish(Waiter& w, Conn& c);
  // Replies to the waiters a SET or ADD completed.
  void WakeWaiters();
  void ExpireWaiters(Clock::time_point now);
  void Drop(Conn& c);
  Conn* Find(uint64_t id) {
    auto it = conns_.find(id);
    return it == conns_.end() || it->second.fd < 0 ? nullptr : &it->second;
  }

  const int listen_fd_, wake_read_, wake_write_;
  std::atomic<bool> stop_{false};
  // Ordered by id, with stable addresses: handling one connection's request may reply to
  // another's wait, and ids (unlike fds) are never reused by a later connection.
  std::map<uint64_t, Conn> conns_;
  uint64_t next_id_ = 0;
  std::vector<Waiter> waiters_;
  // Connections whose wait ended and that may hold further requests to handle.
  std::vector<uint64_t> runnable_;
  absl::flat_hash_map<std::string, std::string> data_;
  // Out of fds, accept() fails at once while the listening socket stays readable: pause
  // accepting for a moment rather than spin.
  Clock::time_point accept_paused_until_;
  std::vector<char> scratch_ = std::vector<char>(kReadChunk);
};

void TcpStoreServer::EventLoop::Run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop_.load()) {
    Clock::time_point now = Clock::now();
    const bool accepting = now >= accept_paused_until_;
    fds.clear();
    ids.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});  // poll() skips fd -1
    for (auto& entry : conns_) {
      const Conn& c = entry.second;
      const short events = POLLIN | (c.out_pos < c.out.size() ? POLLOUT : 0);
      fds.push_back({c.fd, events, 0});
      ids.push_back(entry.first);
    }
    int timeout_ms = accepting ? -1 : PollMs(accept_paused_until_, now);
    for (const Waiter& w : waiters_) {
      const int ms = PollMs(w.deadline, now);
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      // EINTR, or ENOMEM: try again (without spinning on the latter).
      if (errno != EINTR) std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    if (fds[0].revents != 0) {
      char drain[64];
      while (read(wake_read_, drain, sizeof(drain)) > 0) {
      }
    }
    if (stop_.load()) break;
    if (fds[1].revents != 0) Accept();
    for (size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      Conn* c = Find(ids[i]);
      if (c == nullptr) continue;
      if (revents & POLLOUT) Flush(*c);
      if (c->fd >= 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
        Read(*c);
        if (c->fd >= 0) Process(ids[i], *c);
      }
    }
    ExpireWaiters(Clock::now());
    // Connections whose wait ended handle what they sent meanwhile; that may end more
    // waits.
    while (!runnable_.empty()) {
      const uint64_t id = runnable_.back();
      runnable_.pop_back();
      if (Conn* c = Find(id)) Process(id, *c);
    }
    // Forget dropped connections and their waits.
    std::erase_if(waiters_, [this](const Waiter& w) { return Find(w.conn) == nullptr; });
    std::erase_if(conns_, [](const auto& entry) { return entry.second.fd < 0; });
  }
}

void TcpStoreServer::EventLoop::Accept() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      SetNoDelay(fd);
      conns_[next_id_++].fd = fd;
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      accept_paused_until_ = Clock::now() + milliseconds(100);
    }
    return;  // EAGAIN: accepted all there were
  }
}

void TcpStoreServer::EventLoop::Read(Conn& c) {
  size_t total = 0;
  while (total < kReadChunk) {
    const ssize_t n = recv(c.fd, scratch_.data(), scratch_.size(), 0);
    if (n > 0) {
      c.in.append(scratch_.data(), static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Drop(c);  // the client closed its end, or the connection failed
    return;
  }
}

void TcpStoreServer::EventLoop::Flush(Conn& c) {
  while (c.out_pos < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT goes on
    Drop(c);
    return;
  }
  c.out.clear();
  c.out_pos = 0;
}

void TcpStoreServer::EventLoop::Process(uint64_t id, Conn& c) {
  size_t pos = 0;
  while (c.fd >= 0 && !c.waiting && c.in.size() - pos >= 4) {
    const size_t len = LoadU32(c.in.data() + pos);
    if (len == 0 || len > kMaxFrameBytes) {
      Drop(c);  // not our client, or a broken one
      return;
    }
    if (c.in.size() - pos - 4 < len) break;
    const absl::string_view payload(c.in.data() + pos + 4, len);
    pos += 4 + len;
    if (!Handle(id, c, payload)) {
      Drop(c);
      return;
    }
  }
  if (c.fd < 0) return;
  c.in.erase(0, pos);
  // What is left is part of one frame, unless the client sent on while it waits, which
  // our client never does; bound what such a client can make us hold.
  if (c.in.size() > kMaxFrameBytes + 4) Drop(c);
}

bool TcpStoreServer::EventLoop::Handle(uint64_t id, Conn& c, absl::string_view payload) {
  Reader r(payload);
  uint8_t command = 0;
  if (!r.U8(&command)) return false;
  std::string key;
  switch (command) {
    case kSet: {
      std::string value;
      if (!r.Bytes(&key) || !r.Bytes(&value) || !r.done()) return false;
      if (value.size() > static_cast<size_t>(kTcpStoreMaxValueBytes)) {
        ReplyError(c,
                   absl::StrCat("the value of key '", absl::CHexEscape(key), "' is ", value.size(),
                                " bytes; the store takes at most ", kTcpStoreMaxValueBytes));
        return true;
      }
      data_[key] = std::move(value);
      std::string reply;
      PutU8(&reply, kOk);
      Reply(c, reply);
      WakeWaiters();
      return true;
    }
    case kGet:
    case kWait: {
      Waiter w;
      w.conn = id;
      w.command = static_cast<Command>(command);
      uint32_t n = 0;
      if (!r.U32(&n)) return false;
      if (command == kGet && n != 1) return false;
      // No reserve(n): n is from the wire. Each key read checks the payload's length.
      for (uint32_t i = 0; i < n; ++i) {
        if (!r.Bytes(&key)) return false;
        w.keys.push_back(std::move(key));
      }
      uint64_t timeout_ms = 0;
      if (!r.U64(&timeout_ms) || !r.done()) return false;
      w.deadline =
          Clock::now() + milliseconds(std::min<uint64_t>(timeout_ms, uint64_t{kMaxWaitMs}));
      if (!TryFinish(w, c)) {
        c.waiting = true;
        waiters_.push_back(std::move(w));
      }
      return true;
    }
    case kAdd: {
      uint64_t delta = 0;
      if (!r.Bytes(&key) || !r.U64(&delta) || !r.done()) return false;
      int64_t value = 0;
      auto it = data_.find(key);
      if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
        ReplyError(c, absl::StrCat("cannot add to key '", absl::CHexEscape(key),
                                   "': its value is not an integer"));
        return true;
      }
      if (__builtin_add_overflow(value, static_cast<int64_t>(delta), &value)) {
        ReplyError(c, absl::StrCat("adding to key '", absl::CHexEscape(key), "' overflows int64"));
        return true;
      }
      data_[key] = absl::StrCat(value);
      std::string reply;
      PutU8(&reply, kOk);
      PutU64(&reply, static_cast<uint64_t>(value));
      Reply(c, reply);
      WakeWaiters();
      return true;
    }
    case kCheck: {
      if (!r.Bytes(&key) || !r.done()) return false;
      std::string reply;
      PutU8(&reply, kOk);
      PutU8(&reply, data_.contains(key) ? 1 : 0);
      Reply(c, reply);
      return true;
    }
    default:
      return false;
  }
}

void TcpStoreServer::EventLoop::Reply(Conn& c, const std::string& payload) {
  PutU32(&c.out, static_cast<uint32_t>(payload.size()));
  c.out.append(payload);
  Flush(c);
}

void TcpStoreServer::EventLoop::ReplyError(Conn& c, const std::string& message) {
  std::string reply;
  PutU8(&reply, kError);
  PutBytes(&reply, message);
  Reply(c, reply);
}

bool TcpStoreServer::EventLoop::TryFinish(Waiter& w, Conn& c) {
  while (w.next < w.keys.size() && data_.contains(w.keys[w.next])) ++w.next;
  if (w.next < w.keys.size()) return false;
  std::string reply;
  PutU8(&reply, kOk);
  if (w.command == kGet) PutBytes(&reply, data_.at(w.keys[0]));
  Reply(c, reply);
  return true;
}

void TcpStoreServer::EventLoop::WakeWaiters() {
  std::erase_if(waiters_, [this](Waiter& w) {
    Conn* c = Find(w.conn);
    if (c == nullptr) return true;
    if (!TryFinish(w, *c)) return false;
    c->waiting = false;
    runnable_.push_back(w.conn);
    return true;
  });
}

void TcpStoreServer::EventLoop::ExpireWaiters(Clock::time_point now) {
  std::erase_if(waiters_, [this, now](Waiter& w) {
    Conn* c = Find(w.conn);
    if (c == nullptr) return true;
    if (w.deadline > now) return false;
    std::string reply;
    PutU8(&reply, kTimedOut);
    std::vector<const std::string*> missing;
    for (size_t i = w.next; i < w.keys.size(); ++i) {
      if (!data_.contains(w.keys[i])) missing.push_back(&w.keys[i]);
    }
    PutU32(&reply, static_cast<uint32_t>(missing.size()));
    for (const std::string* key : missing) PutBytes(&reply, *key);
    Reply(*c, reply);
    c->waiting = false;
    runnable_.push_back(w.conn);
    return true;
  });
}

void TcpStoreServer::EventLoop::Drop(Conn& c) {
  if (c.fd < 0) return;
  close(c.fd);
  c.fd = -1;
  c.waiting = false;
  c.in = std::string();
  c.out = std::string();
  c.out_pos = 0;
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Listen(const std::string& host,
                                                                       int port) {
  const std::string where = absl::StrCat(host.empty() ? "0.0.0.0" : host, ":", port);
  const std::string what = absl::StrCat("cannot host the rendezvous store on ", where);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the port is not in [0, 65535]"));
  }
  addrinfo hints{};
  // "" and 0.0.0.0 are IPv4's every interface, whatever order the resolver lists the
  // IPv4 and IPv6 wildcards in.
  const bool any = host.empty() || host == "0.0.0.0";
  hints.ai_family = any ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(any ? nullptr : host.c_str(), service.c_str(), &hints, &addrs);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  int err = 0;
  const char* step = "";
  for (addrinfo* ai = addrs; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      step = "socket";
      continue;
    }
    // SO_REUSEADDR lets a restarted rank 0 listen again while its old connections sit in
    // TIME_WAIT; on Linux it still refuses a port another socket listens on. (Not
    // SO_REUSEPORT, which would share the port with another store.)
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      step = "bind";
    } else if (listen(fd, SOMAXCONN) != 0) {
      err = errno;
      step = "listen";
    } else {
      break;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(addrs);
  if (fd < 0) {
    if (err == EADDRINUSE) {
      return absl::UnavailableError(
          absl::StrCat(what, ": the port is in use (", ErrnoText(err), ")"));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", step, ": ", ErrnoText(err)));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  int actual_port = port;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) {
    actual_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  }
  int wake[2];
  if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    err = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(what, ": pipe: ", ErrnoText(err)));
  }
  std::unique_ptr<TcpStoreServer> server(
      new TcpStoreServer(std::make_unique<EventLoop>(fd, wake[0], wake[1]), actual_port));
  try {
    EventLoop* loop = server->loop_.get();
    server->thread_ = std::thread([loop] { loop->Run(); });
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot start a thread: ", e.what()));
  }
  return server;
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<EventLoop> loop, int port)
    : loop_(std::move(loop)), port_(port) {}

TcpStoreServer::~TcpStoreServer() {
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
  // ~EventLoop closes every connection: each client's next read sees the end.
}

// ---- Client ----

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
