// Checked arithmetic for sizes: every element count and byte size that tpc computes from
// dims it did not choose (a model's initializers and declared shapes, --dim values, run-time
// inputs, shapes a kernel computes) goes through these, so an absurd size is an error
// rather than a signed overflow, a wrapped allocation or a `.npy` that claims 10^18 rows.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// The bytes of a tensor of `dims` with elements of `element_size` bytes (1: its element
// count); nullopt when a dim is negative, or the elements or the bytes are past the limits.
// The product of the non-zero dims counts even beside a 0 dim: strides multiply them.
// Builds no message, for the paths that run for every value or every op.
std::optional<int64_t> TensorBytes(absl::Span<const int64_t> dims, int64_t element_size);

// Why TensorBytes refuses `dims`: an InvalidArgument error naming `what`.
absl::Status TensorSizeError(absl::Span<const int64_t> dims, int64_t element_size,
                             absl::string_view what);

// TensorBytes, or the error naming `what`.
absl::StatusOr<int64_t> CheckedTensorBytes(absl::Span<const int64_t> dims, int64_t element_size,
                                           absl::string_view what);

}  // namespace tpc
