#include "prewarm/util/sha256.h"

#include <openssl/evp.h>

#include <cstdint>

namespace prewarm {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(std::string_view data) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}

void Sha256::UpdateField(std::string_view data) {
  const uint64_t n = data.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  Update(std::string_view(reinterpret_cast<const char*>(len), 8));
  Update(data);
}

Sha256Digest Sha256::Digest() {
  Sha256Digest out{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out.data(), &n);
  return out;
}

Sha256Digest Sha256Of(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.Digest();
}

std::string ToHex(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned char c : digest) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace prewarm
