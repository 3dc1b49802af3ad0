// SHA-256 through OpenSSL's libcrypto. Thread-safe.
#ifndef PREWARM_UTIL_SHA256_H_
#define PREWARM_UTIL_SHA256_H_

#include <array>
#include <string>
#include <string_view>

namespace prewarm {

using Sha256Digest = std::array<unsigned char, 32>;

// Incremental hashing: Update() any number of times, then Digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view data);
  // Hashes a length prefix first, so ("ab","c") and ("a","bc") differ.
  void UpdateField(std::string_view data);
  Sha256Digest Digest();

 private:
  void* ctx_;  // EVP_MD_CTX
};

Sha256Digest Sha256Of(std::string_view data);
std::string ToHex(const Sha256Digest& digest);

}  // namespace prewarm

#endif  // PREWARM_UTIL_SHA256_H_
