// SHA-256 (FIPS 180-4), for the file hashes in plan manifests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tpc {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  // Lowercase hex digest; the object is spent afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// Digest of a whole file, read in chunks.
absl::StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace tpc
