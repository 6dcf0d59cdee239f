// Guard bytes around the values of the executor's arena (ExecutorOptions::guard_bytes): a
// debugging aid for kernels. The arena is one allocation, so AddressSanitizer and the
// emulated GPU's redzones see nothing of a kernel that writes past its output into the next
// value; with guards, each planned value sits between two runs of a known pattern, written
// when its step allocates it and compared after every step that writes or reads it (on
// the host, after every step, for every value alive in the arena). What they see: a write
// within the guard's bytes of either end of a value, named as the step's that made it (on
// a device, where only the step's own values are checked, a write into another value's
// guard shows when a later step reads that value, named as the reader's); a write into
// another value's bytes, not at all.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "tpc/runtime/backend.h"

namespace tpc::runtime {

// The largest guard (each side).
inline constexpr int64_t kMaxArenaGuard = int64_t{1} << 20;

// The guard of each side, in bytes, that TPC_ARENA_GUARDS asks for (rounded up to 64, so
// that values keep their alignment; at most kMaxArenaGuard); 0 when it is unset, empty or 0.
int64_t ArenaGuardsFromEnvironment();

// Fills the `guard` bytes before `value` and after its `bytes` with the pattern (in
// `backend`'s memory: uploads on a device, queued before the kernel that writes it).
void WriteGuards(Backend& backend, uint8_t* value, int64_t bytes, int64_t guard);

// OK when the guards of `value` still hold the pattern (on a device, a download, which
// waits for the work queued before it, and the backend's own error first when the device
// failed); otherwise an Internal error naming `what` (the step and the value) and where
// the first changed byte is.
absl::Status CheckGuards(Backend& backend, const uint8_t* value, int64_t bytes, int64_t guard,
                         const std::string& what);

}  // namespace tpc::runtime
