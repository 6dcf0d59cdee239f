#include "tpc/util/write_error.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tpc {

absl::Status WriteError(const std::string& path, int err, bool opening) {
  const std::string why =
      absl::StrCat(path, ": cannot write (", err != 0 ? std::strerror(err) : "reason unknown", ")");
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return absl::ResourceExhaustedError(why);
  if (opening) return absl::PermissionDeniedError(why);
  return absl::DataLossError(why);
}

}  // namespace tpc
