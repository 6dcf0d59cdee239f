#include "tcp_store_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace tpc::runtime::tcp_wire {

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

void SetNoDelay(int fd) {
  // Requests and replies are small and strictly alternate: Nagle would hold each one back
  // waiting for an ACK.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int PollMs(Clock::time_point deadline, Clock::time_point now) {
  if (deadline <= now) return 0;
  const int64_t ms = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60000));
}

}  // namespace tpc::runtime::tcp_wire
