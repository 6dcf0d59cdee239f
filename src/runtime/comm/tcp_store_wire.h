// The TCP key-value store's wire format, shared by its server (tcp_store_server.cc) and
// its client (tcp_store.cc).
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
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tpc/runtime/tcp_store.h"

namespace tpc::runtime::tcp_wire {

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

std::string ErrnoText(int err);

void PutU8(std::string* s, uint8_t v);
void PutU32(std::string* s, uint32_t v);
void PutU64(std::string* s, uint64_t v);
void PutBytes(std::string* s, const std::string& b);
uint32_t LoadU32(const char* p);

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

// TCP_NODELAY: requests and replies are small and strictly alternate.
void SetNoDelay(int fd);
// The milliseconds poll() should wait to reach `deadline`, rounded up (so a wait does not
// end a hair early and spin), at least 0 and at most a minute.
int PollMs(Clock::time_point deadline, Clock::time_point now);

}  // namespace tpc::runtime::tcp_wire
