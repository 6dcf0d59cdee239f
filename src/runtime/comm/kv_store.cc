#include "tpc/runtime/kv_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tpc::runtime {

std::string EncodeRankStatus(int rank, const absl::Status& status) {
  return absl::StrCat(rank, "\n", static_cast<int>(status.code()), "\n",
                      std::string(status.message()));
}

absl::Status DecodeRankStatus(const std::string& text, int* rank) {
  *rank = -1;
  const size_t a = text.find('\n');
  const size_t b = a == std::string::npos ? a : text.find('\n', a + 1);
  int r = 0, code = 0;
  if (b == std::string::npos || !absl::SimpleAtoi(text.substr(0, a), &r) ||
      !absl::SimpleAtoi(text.substr(a + 1, b - a - 1), &code)) {
    return absl::UnknownError(text);  // not ours: the text is the reason
  }
  *rank = r;
  return absl::Status(static_cast<absl::StatusCode>(code), text.substr(b + 1));
}

std::string DescribeRankStatus(const std::string& text) {
  int rank = -1;
  const absl::Status s = DecodeRankStatus(text, &rank);
  if (rank < 0) return std::string(s.message());
  return std::string(RankFailed(rank, s).message());
}

absl::Status RankFailed(int rank, const absl::Status& status) {
  // (An OK status would drop the message: such a failure is unknown.)
  return absl::Status(status.ok() ? absl::StatusCode::kUnknown : status.code(),
                      absl::StrCat("rank ", rank, " failed: ", std::string(status.message())));
}

bool SetAbortOnce(KeyValueStore& store, int rank, const absl::Status& reason) {
  absl::StatusOr<bool> set = store.Check(kAbortKey);
  if (!set.ok() || *set) return false;
  // Add is atomic: one of the ranks that found the key unset gets 1. (A store that cannot
  // count is written anyway, as before the claims.)
  absl::StatusOr<int64_t> claims = store.Add("abort_claims", 1);
  if (claims.ok() && *claims != 1) return false;
  return store.Set(kAbortKey, EncodeRankStatus(rank, reason)).ok();
}

}  // namespace tpc::runtime
