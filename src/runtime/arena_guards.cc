#include "tpc/runtime/arena_guards.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tpc::runtime {
namespace {

// Not 0 (what fresh memory often holds) nor 0xff (NaN, -1: what the emulated GPU's
// shared memory starts as): a byte no kernel is likely to write by chance.
constexpr uint8_t kPattern = 0xa7;

}  // namespace

int64_t ArenaGuardsFromEnvironment() {
  const char* v = std::getenv("TPC_ARENA_GUARDS");
  int64_t bytes = 0;
  if (v == nullptr || !absl::SimpleAtoi(v, &bytes) || bytes <= 0) return 0;
  return (std::min(kMaxArenaGuard, bytes) + 63) / 64 * 64;
}

void WriteGuards(Backend& backend, uint8_t* value, int64_t bytes, int64_t guard) {
  const auto n = static_cast<size_t>(guard);
  if (backend.host_memory()) {
    std::memset(value - guard, kPattern, n);
    std::memset(value + bytes, kPattern, n);
    return;
  }
  static const std::vector<uint8_t>* pattern =
      new std::vector<uint8_t>(static_cast<size_t>(kMaxArenaGuard), kPattern);
  backend.CopyFromHost(value - guard, pattern->data(), n);
  backend.CopyFromHost(value + bytes, pattern->data(), n);
}

absl::Status CheckGuards(Backend& backend, const uint8_t* value, int64_t bytes, int64_t guard,
                         const std::string& what) {
  const auto n = static_cast<size_t>(guard);
  const auto intact = [](const uint8_t* p, size_t k) {
    return std::all_of(p, p + k, [](uint8_t b) { return b == kPattern; });
  };
  // On the host, read in place (after every step, for every live value).
  if (backend.host_memory() && intact(value - guard, n) && intact(value + bytes, n)) {
    return absl::OkStatus();
  }
  std::vector<uint8_t> sides(2 * n);
  if (backend.host_memory()) {
    std::memcpy(sides.data(), value - guard, n);
    std::memcpy(sides.data() + n, value + bytes, n);
  } else {
    backend.CopyToHost(sides.data(), value - guard, n);
    backend.CopyToHost(sides.data() + n, value + bytes, n);
    // A failed device (or a wait cut short) copied nothing: its error, not the guards'.
    if (absl::Status s = backend.Synchronize(); !s.ok()) return s;
  }
  const auto changed =
      std::find_if(sides.begin(), sides.end(), [](uint8_t b) { return b != kPattern; });
  if (changed == sides.end()) return absl::OkStatus();
  const auto at = static_cast<int64_t>(changed - sides.begin());
  return absl::InternalError(
      at < guard
          ? absl::StrCat(what, ": memory ", guard - at, " byte(s) before the value (", bytes,
                         " bytes) changed: a kernel wrote outside it (TPC_ARENA_GUARDS)")
          : absl::StrCat(what, ": memory ", at - guard, " byte(s) past the end of the value (",
                         bytes, " bytes) changed: a kernel wrote outside it (TPC_ARENA_GUARDS)"));
}

}  // namespace tpc::runtime
