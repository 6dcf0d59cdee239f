#include "tpc/util/checked_math.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc {
namespace {

// The product of the non-zero dims, or nullopt when a dim is negative or the product is
// past kMaxTensorElements.
std::optional<int64_t> NonZeroProduct(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) continue;
    auto m = CheckedMul(n, d);
    if (!m || *m > kMaxTensorElements) return std::nullopt;
    n = *m;
  }
  return n;
}

bool HasZero(absl::Span<const int64_t> dims) {
  for (int64_t d : dims) {
    if (d == 0) return true;
  }
  return false;
}

}  // namespace

std::optional<int64_t> TensorBytes(absl::Span<const int64_t> dims, int64_t element_size) {
  auto n = NonZeroProduct(dims);
  if (!n || element_size < 0) return std::nullopt;
  auto bytes = CheckedMul(*n, element_size);
  if (!bytes || *bytes > kMaxTensorBytes) return std::nullopt;
  return HasZero(dims) ? 0 : *bytes;
}

absl::Status TensorSizeError(absl::Span<const int64_t> dims, int64_t element_size,
                             absl::string_view what) {
  const std::string shape = absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dim ", d, " in shape ", shape));
    }
  }
  if (!NonZeroProduct(dims)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape ", shape, " has more than 2^48 elements (", kMaxTensorElements,
                     "), the most one tensor may have"));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", shape, " of ", element_size,
                                                 "-byte elements holds more than 2^48 bytes, "
                                                 "the most one tensor may have"));
}

absl::StatusOr<int64_t> CheckedTensorBytes(absl::Span<const int64_t> dims, int64_t element_size,
                                           absl::string_view what) {
  auto bytes = TensorBytes(dims, element_size);
  if (!bytes) return TensorSizeError(dims, element_size, what);
  return *bytes;
}

}  // namespace tpc
