// Little-endian integers in byte strings: the cache entry format (cache/entry.h) and the compile
// worker's frames (toolchain/worker.h) both write and read them with these.
#ifndef PREWARM_UTIL_BYTES_H_
#define PREWARM_UTIL_BYTES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace prewarm {

// Appends the low `bytes` bytes of `v` (1 to 8), least significant first.
inline void PutLittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// The `bytes`-byte little-endian integer at the start of `p` (which holds at least that many).
inline uint64_t GetLittleEndian(std::string_view p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[static_cast<size_t>(i)])) << (8 * i);
  }
  return v;
}

}  // namespace prewarm

#endif  // PREWARM_UTIL_BYTES_H_
