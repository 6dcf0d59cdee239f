#include "tpc/util/checked_math.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc {

absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims, const std::string& what) {
  // The product of the non-zero dims must be within the limit even when a 0 dim makes
  // the count 0: code that computes strides multiplies the other dims all the same.
  int64_t n = 1;
  bool over = false;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dim ", d, " in shape [", absl::StrJoin(dims, ", "), "]"));
    }
    if (d == 0) {
      empty = true;
    } else if (!over) {
      auto m = CheckedMul(n, d);
      over = !m || *m > kMaxTensorElements;
      if (!over) n = *m;
    }
  }
  if (over) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shape [", absl::StrJoin(dims, ", "), "] has more than 2^48 elements (",
        kMaxTensorElements, "), the most one tensor may have"));
  }
  return empty ? 0 : n;
}

absl::StatusOr<int64_t> ByteSize(int64_t elements, int64_t element_size, const std::string& what) {
  auto b = CheckedMul(elements, element_size);
  if (elements < 0 || element_size < 0 || !b || *b > kMaxTensorBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", elements, " elements of ",
                                                   element_size,
                                                   " bytes exceed 2^48 bytes, the most one "
                                                   "tensor may have"));
  }
  return *b;
}

}  // namespace tpc
