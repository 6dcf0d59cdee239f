#include "tpc/util/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tpc/util/status_macros.h"

namespace tpc {

// OpenSSL's SHA-256 (SHA-NI / AVX2 where the CPU has them): several GB/s, so hashing
// the weight files of a large plan costs little next to writing them.
Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  TPC_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(const void* data, size_t size) {
  TPC_CHECK(EVP_DigestUpdate(ctx_, data, size) == 1);
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  TPC_CHECK(EVP_DigestFinal_ex(ctx_, digest, &len) == 1);
  std::string out;
  char hex[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(hex, sizeof(hex), "%02x", digest[i]);
    out += hex;
  }
  return out;
}

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  Sha256 h;
  std::vector<char> buf(1 << 22);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.Update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  return h.HexDigest();
}

}  // namespace tpc
