// SHA-256 of files and byte streams, for the hashes in plan manifests (OpenSSL's
// libcrypto does the work).
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace tpc {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Lowercase hex digest; the object is spent afterwards.
  std::string HexDigest();

 private:
  EVP_MD_CTX* ctx_;
};

// Digest of a whole file, read in chunks.
absl::StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace tpc
