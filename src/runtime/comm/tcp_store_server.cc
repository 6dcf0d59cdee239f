// The TCP key-value store's server: one thread's poll() loop over non-blocking sockets,
// with server-side waits (a list of waiters with deadlines). The wire format is in
// tcp_store_wire.h.
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
#include "tcp_store_wire.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

using namespace tcp_wire;  // NOLINT(build/namespaces): the wire format's own file pair

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

// A socket listening on `port` of every interface, IPv6 and IPv4 (mapped) alike; -1 and
// errno in *err where the machine has no IPv6 or the port is taken.
static int ListenDualStack(int port, int* err) {
  const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int zero = 0, one = 1;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_any;
  addr.sin6_port = htons(static_cast<uint16_t>(port));
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // (as below)
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
      listen(fd, SOMAXCONN) == 0) {
    return fd;
  }
  *err = errno;
  close(fd);
  return -1;
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Listen(const std::string& host,
                                                                       int port) {
  const std::string where = absl::StrCat(host.empty() ? "0.0.0.0" : host, ":", port);
  const std::string what = absl::StrCat("cannot host the rendezvous store on ", where);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the port is not in [0, 65535]"));
  }
  // "" and 0.0.0.0: every interface, IPv6 and IPv4 alike through one dual-stack socket
  // (ranks may name rank 0 by either address, MASTER_ADDR=::1 as well as 127.0.0.1),
  // else IPv4's alone where the machine has no IPv6.
  const bool any = host.empty() || host == "0.0.0.0";
  int fd = -1;
  int err = 0;
  const char* step = "";
  if (any) {
    fd = ListenDualStack(port, &err);
    if (fd < 0 && err == EADDRINUSE) {
      return absl::UnavailableError(
          absl::StrCat(what, ": the port is in use (", ErrnoText(err), ")"));
    }
  }
  addrinfo hints{};
  // (The IPv4 wildcard, whatever order the resolver lists the IPv4 and IPv6 ones in.)
  hints.ai_family = any ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      fd >= 0 ? 0 : getaddrinfo(any ? nullptr : host.c_str(), service.c_str(), &hints, &addrs);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", gai_strerror(rc)));
  }
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
  if (addrs != nullptr) freeaddrinfo(addrs);
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

}  // namespace tpc::runtime
