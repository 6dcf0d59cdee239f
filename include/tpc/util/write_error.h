// The status of a failed file write, from errno: the same reasons and exit codes for
// every file tpc writes (rank files, weights, plan.json, reports, tensors, dumps).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace tpc {

// Writing `path` failed with errno `err` (0: unknown). A file that cannot be created
// (`opening`: no permission, a read-only file system, no such folder) is
// PermissionDenied, exit 2 (the user's path); a full disk, a quota or a file size limit
// is ResourceExhausted and any other failure DataLoss, exit 1. The message is
// "PATH: cannot write (REASON)".
absl::Status WriteError(const std::string& path, int err, bool opening);

}  // namespace tpc
