// Checked arithmetic for sizes: every element count and byte size that tpc computes from
// dims it did not choose (a model's initializers and declared shapes, --dim values, run-time
// inputs, shapes a kernel computes) goes through these, so an absurd size is an error
// rather than a signed overflow, a wrapped allocation or a `.npy` that claims 10^18 rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tpc {

// The most elements (and bytes) one tensor may have: 2^48, 256 TiB of bytes. Far above any
// device's memory, far below where int64 products of a few such sizes overflow.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 48;
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;

// a·b and a+b, or nullopt when the result does not fit in an int64.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The element count of `dims`: an InvalidArgument error naming `what` when a dim is
// negative or the count exceeds kMaxTensorElements.
absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims, const std::string& what);

// elements · element_size, with the same limit on bytes.
absl::StatusOr<int64_t> ByteSize(int64_t elements, int64_t element_size, const std::string& what);

}  // namespace tpc
