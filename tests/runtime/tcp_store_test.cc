// The TCP key-value store: round trips, server-side waits and their timeouts, counting
// across clients, and the failures a bootstrap meets (a port in use, no server yet, the
// server gone, a client speaking garbage).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/tcp_store.h"

namespace tpc::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::unique_ptr<TcpStoreServer> StartServer() {
  auto server = TcpStoreServer::Listen("127.0.0.1", 0);
  REQUIRE(server.ok());
  return std::move(server).value();
}

std::unique_ptr<TcpStore> ConnectTo(const TcpStoreServer& server) {
  auto store = TcpStore::Connect("127.0.0.1", server.port(), milliseconds(2000));
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  return std::move(store).value();
}

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// A plain blocking socket connected to the server, for speaking garbage to it.
int RawConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

void RawSend(int fd, const std::string& bytes) {
  REQUIRE(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// Whether the server closed `fd` within 2 s.
bool ClosedByServer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 2000) <= 0) return false;
  char byte;
  return recv(fd, &byte, 1, 0) <= 0;
}

std::string Frame(const std::string& payload) {
  std::string out;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + payload;
}

TEST_CASE("TcpStore: set/get round trip with binary values, Check, Set replaces",
          "[runtime][tcp_store]") {
  auto server = StartServer();
  CHECK(server->port() > 0);
  auto a = ConnectTo(*server);
  auto b = ConnectTo(*server);
  const std::string binary("a\0b\xff\n\0", 6);
  const std::string big(3 << 20, '\x7f');

  auto unset = a->Check("k");
  REQUIRE(unset.ok());
  CHECK_FALSE(*unset);
  REQUIRE(a->Set("k", binary).ok());
  REQUIRE(a->Set(std::string("\0key", 4), big).ok());
  REQUIRE(a->Set("empty", "").ok());
  auto set = b->Check("k");
  REQUIRE(set.ok());
  CHECK(*set);

  auto got = b->Get("k", milliseconds(100));
  REQUIRE(got.ok());
  CHECK(*got == binary);
  got = b->Get(std::string("\0key", 4), milliseconds(100));
  REQUIRE(got.ok());
  CHECK(*got == big);
  got = b->Get("empty", milliseconds(100));
  REQUIRE(got.ok());
  CHECK(got->empty());

  REQUIRE(b->Set("k", "second").ok());
  got = a->Get("k", milliseconds(100));
  REQUIRE(got.ok());
  CHECK(*got == "second");
  CHECK(a->local_address() == "127.0.0.1");
}

TEST_CASE("TcpStore: Get waits for a Set from another client", "[runtime][tcp_store]") {
  auto server = StartServer();
  auto waiter = ConnectTo(*server);
  auto setter = ConnectTo(*server);
  const Clock::time_point start = Clock::now();
  absl::Status set;  // Catch2's assertions are not thread-safe: check on this thread
  std::thread later([&setter, &set] {
    std::this_thread::sleep_for(milliseconds(150));
    set = setter->Set("addr", "10.0.0.2:1234");
  });
  auto got = waiter->Get("addr", milliseconds(1500));
  later.join();
  CHECK(set.ok());
  REQUIRE(got.ok());
  CHECK(*got == "10.0.0.2:1234");
  CHECK(MsSince(start) >= 140);
  CHECK(waiter->Wait({"addr"}, milliseconds(100)).ok());
  CHECK(waiter->Wait({}, milliseconds(0)).ok());
}

TEST_CASE("TcpStore: threads sharing one client each get their own replies",
          "[runtime][tcp_store]") {
  auto server = StartServer();
  auto shared = ConnectTo(*server);
  constexpr int kThreads = 4, kRequests = 50;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&shared, &mismatches, t] {
      for (int i = 0; i < kRequests; ++i) {
        const std::string key = "t" + std::to_string(t) + "." + std::to_string(i);
        const std::string value(static_cast<size_t>(i * 97 + t), static_cast<char>('a' + t));
        auto got = shared->Set(key, value).ok() ? shared->Get(key, milliseconds(100))
                                                : absl::StatusOr<std::string>();
        if (!got.ok() || *got != value) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(kThreads, 0));
}

TEST_CASE("TcpStore: Wait and Get time out naming the missing keys", "[runtime][tcp_store]") {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  REQUIRE(store->Set("rank0", "up").ok());

  Clock::time_point start = Clock::now();
  absl::Status status = store->Wait({"rank0", "rank1"}, milliseconds(200));
  int64_t ms = MsSince(start);
  CHECK(status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(status.message()), Catch::Contains("'rank1'"));
  CHECK_THAT(std::string(status.message()), !Catch::Contains("'rank0'"));
  CHECK_THAT(std::string(status.message()), Catch::Contains("200 ms"));
  CHECK(ms >= 190);
  CHECK(ms < 1200);

  start = Clock::now();
  auto got = store->Get("nccl_id", milliseconds(100));
  ms = MsSince(start);
  CHECK(got.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(got.status().message()), Catch::Contains("'nccl_id'"));
  CHECK(ms >= 90);
  CHECK(ms < 1100);

  got = store->Get("nothing", milliseconds(0));
  CHECK(got.status().code() == absl::StatusCode::kDeadlineExceeded);

  // A timeout is an answer, not a failure: the client goes on working.
  REQUIRE(store->Set("rank1", "up").ok());
  CHECK(store->Wait({"rank0", "rank1"}, milliseconds(100)).ok());
}

TEST_CASE("TcpStore: Add counts across 8 concurrent clients", "[runtime][tcp_store]") {
  auto server = StartServer();
  constexpr int kClients = 8, kAdds = 50;
  std::vector<std::vector<int64_t>> seen(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&server, &seen, i] {
      auto store = TcpStore::Connect("127.0.0.1", server->port(), milliseconds(2000));
      if (!store.ok()) return;
      for (int k = 0; k < kAdds; ++k) {
        auto v = (*store)->Add("count", 1);
        if (v.ok()) seen[static_cast<size_t>(i)].push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kClients * kAdds);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int64_t>(i) + 1;
  CHECK(all == expected);  // every Add saw a distinct count: none lost, none doubled

  auto store = ConnectTo(*server);
  auto v = store->Add("count", -400);
  REQUIRE(v.ok());
  CHECK(*v == 0);
  auto text = store->Get("count", milliseconds(100));
  REQUIRE(text.ok());
  CHECK(*text == "0");
  v = store->Add("fresh", 5);
  REQUIRE(v.ok());
  CHECK(*v == 5);

  // An Add wakes a waiter like a Set does.
  auto other = ConnectTo(*server);
  absl::Status waited;
  std::thread waiter([&other, &waited] { waited = other->Wait({"counted"}, milliseconds(1500)); });
  std::this_thread::sleep_for(milliseconds(50));
  const absl::Status added = store->Add("counted", 1).status();
  waiter.join();
  CHECK(added.ok());
  CHECK(waited.ok());

  REQUIRE(store->Set("text", "abc").ok());
  v = store->Add("text", 1);
  CHECK(v.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(v.status().message()), Catch::Contains("not an integer"));
  REQUIRE(store->Set("max", "9223372036854775807").ok());
  CHECK_FALSE(store->Add("max", 1).ok());
  CHECK(store->Check("text").ok());  // errors from the server leave the client working
}

TEST_CASE("TcpStore: an ephemeral port, and a port in use", "[runtime][tcp_store]") {
  auto server = StartServer();
  REQUIRE(server->port() > 0);
  auto second = TcpStoreServer::Listen("127.0.0.1", server->port());
  REQUIRE_FALSE(second.ok());
  const std::string message(second.status().message());
  CHECK_THAT(message, Catch::Contains(std::to_string(server->port())));
  CHECK_THAT(message, Catch::Contains("in use"));
  // Every interface: the port is taken there too.
  CHECK_FALSE(TcpStoreServer::Listen("", server->port()).ok());
  CHECK_FALSE(TcpStoreServer::Listen("127.0.0.1", 70000).ok());

  auto any = TcpStoreServer::Listen("0.0.0.0", 0);
  REQUIRE(any.ok());
  auto store = TcpStore::Connect("localhost", (*any)->port(), milliseconds(2000));
  REQUIRE(store.ok());
  CHECK((*store)->Set("k", "v").ok());
}

TEST_CASE("TcpStore: Connect retries until the server listens, and gives up at its timeout",
          "[runtime][tcp_store]") {
  int port = 0;
  {
    auto server = StartServer();
    port = server->port();
  }
  // Nothing listens on `port` now.
  Clock::time_point start = Clock::now();
  auto store = TcpStore::Connect("127.0.0.1", port, milliseconds(300));
  const int64_t ms = MsSince(start);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == absl::StatusCode::kDeadlineExceeded);
  const std::string message(store.status().message());
  CHECK_THAT(message, Catch::Contains("cannot reach the rendezvous store at 127.0.0.1:" +
                                      std::to_string(port)));
  CHECK_THAT(message, Catch::Contains("MASTER_ADDR"));
  CHECK(ms >= 290);
  CHECK(ms < 1300);

  // Rank 0 comes up late: the client keeps trying.
  std::unique_ptr<TcpStoreServer> late;
  std::thread host([&late, port] {
    std::this_thread::sleep_for(milliseconds(200));
    auto server = TcpStoreServer::Listen("127.0.0.1", port);
    if (server.ok()) late = std::move(server).value();
  });
  store = TcpStore::Connect("127.0.0.1", port, milliseconds(1500));
  host.join();
  if (late == nullptr) return;  // someone else took the port meanwhile: nothing to check
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  CHECK((*store)->Set("k", "v").ok());
}

TEST_CASE("TcpStore: the server going away fails a waiting client promptly, for good",
          "[runtime][tcp_store]") {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  REQUIRE(store->Set("k", "v").ok());
  absl::Status waited;
  int64_t ms = 0;
  std::thread waiter([&store, &waited, &ms] {
    const Clock::time_point start = Clock::now();
    waited = store->Wait({"never"}, milliseconds(10000));
    ms = MsSince(start);
  });
  std::this_thread::sleep_for(milliseconds(100));
  server.reset();
  waiter.join();
  CHECK(waited.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(waited.message()), Catch::Contains("lost the rendezvous store"));
  CHECK(ms < 1500);
  // It stays failed, and fails at once.
  const Clock::time_point start = Clock::now();
  CHECK(store->Set("k", "w").code() == absl::StatusCode::kUnavailable);
  CHECK(store->Check("k").status().code() == absl::StatusCode::kUnavailable);
  CHECK(MsSince(start) < 100);
}

TEST_CASE("TcpStore: garbage, oversized and abandoned requests do not kill the server",
          "[runtime][tcp_store]") {
  auto server = StartServer();
  auto store = ConnectTo(*server);
  REQUIRE(store->Set("k", "v").ok());

  // A frame claiming 4 GiB: dropped before anything is allocated for it.
  int fd = RawConnect(server->port());
  RawSend(fd, std::string("\xff\xff\xff\xff", 4));
  CHECK(ClosedByServer(fd));
  close(fd);
  // An unknown command.
  fd = RawConnect(server->port());
  RawSend(fd, Frame("\x77junk"));
  CHECK(ClosedByServer(fd));
  close(fd);
  // A GET whose key length runs past the frame.
  fd = RawConnect(server->port());
  RawSend(fd, Frame(std::string("\x02\x01\0\0\0\xff\xff\0\0k", 10)));
  CHECK(ClosedByServer(fd));
  close(fd);
  // Half a frame, then gone.
  fd = RawConnect(server->port());
  RawSend(fd, std::string("\x10\0\0\0\x01", 5));
  close(fd);
  // A wait, then gone: the server forgets the waiter.
  fd = RawConnect(server->port());
  RawSend(fd, Frame(std::string("\x03\x01\0\0\0\x04\0\0\0gone\x10\x27\0\0\0\0\0\0", 21)));
  std::this_thread::sleep_for(milliseconds(20));
  close(fd);
  std::this_thread::sleep_for(milliseconds(20));
  REQUIRE(store->Set("gone", "set after its waiter left").ok());

  // A value over the limit is refused by the client, which goes on working.
  const absl::Status too_big = store->Set("big", std::string(kTcpStoreMaxValueBytes + 1, 'x'));
  CHECK(too_big.code() == absl::StatusCode::kInvalidArgument);

  auto got = store->Get("k", milliseconds(100));
  REQUIRE(got.ok());
  CHECK(*got == "v");
  auto late = ConnectTo(*server);
  got = late->Get("gone", milliseconds(100));
  REQUIRE(got.ok());
  CHECK(*got == "set after its waiter left");
}

TEST_CASE("TcpStore: many clients wait on one barrier", "[runtime][tcp_store]") {
  auto server = StartServer();
  constexpr int kClients = 200;
  std::vector<std::unique_ptr<TcpStore>> stores;
  for (int i = 0; i < kClients; ++i) stores.push_back(ConnectTo(*server));
  // Every client but the last waits (in its own thread) for the barrier key; the last
  // client's Add completes the count, then it sets the key.
  std::vector<std::thread> threads;
  std::vector<int> ok(kClients, 0);
  for (int i = 0; i + 1 < kClients; ++i) {
    threads.emplace_back([&stores, &ok, i] {
      auto& s = *stores[static_cast<size_t>(i)];
      ok[static_cast<size_t>(i)] =
          s.Add("arrived", 1).ok() && s.Wait({"go"}, milliseconds(1500)).ok();
    });
  }
  auto& last = *stores.back();
  int64_t arrived = 0;
  const Clock::time_point start = Clock::now();
  while (arrived < kClients - 1 && MsSince(start) < 1500) {
    auto v = last.Add("arrived", 0);
    if (!v.ok()) break;  // no REQUIRE while the threads run: it would leave them unjoined
    arrived = *v;
    if (arrived < kClients - 1) std::this_thread::sleep_for(milliseconds(5));
  }
  const absl::Status go = last.Set("go", "");
  for (auto& t : threads) t.join();
  CHECK(arrived == kClients - 1);
  CHECK(go.ok());
  CHECK(std::count(ok.begin(), ok.end(), 1) == kClients - 1);
}

}  // namespace
}  // namespace tpc::runtime

TEST_CASE("A rank's failure reads the same from the abort key and from RankFailed",
          "[runtime][tcp_store]") {
  const absl::Status bad = absl::InvalidArgumentError("input_ids: bad.pb is not a tensor");
  const absl::Status peer = tpc::runtime::RankFailed(1, bad);
  CHECK(peer.code() == absl::StatusCode::kInvalidArgument);
  CHECK(peer.message() == "rank 1 failed: input_ids: bad.pb is not a tensor");
  CHECK(tpc::runtime::DescribeRankStatus(tpc::runtime::EncodeRankStatus(1, bad)) == peer.message());
  // An OK status (never a failure) keeps its words and is not OK.
  const absl::Status odd = tpc::runtime::RankFailed(2, absl::OkStatus());
  CHECK(!odd.ok());
  CHECK(odd.message() == "rank 2 failed: ");
}
