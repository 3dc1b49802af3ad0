// The cache entry file format. An entry describes itself, so a reader can reject anything it
// did not expect without trusting the file name.
//
//   entry     := magic version producer key arch payload checksum
//   magic     := "PREWARM\0"                      8 bytes
//   version   := u32                              kEntryFormatVersion
//   producer  := u32 length, bytes                "prewarm 0.1.0 (hiprtc libamdhip64.so.5.2.21153)"
//   key       := u32 length, bytes                the canonical key string
//   arch      := u32 length, bytes                "gfx942"
//   payload   := u64 length, bytes                the code object (ELF or cubin)
//   checksum  := 32 bytes                         SHA-256 of every byte before it
// Integers are little-endian. Nothing may follow the checksum.
#ifndef PREWARM_CACHE_ENTRY_H_
#define PREWARM_CACHE_ENTRY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace prewarm {

inline constexpr uint32_t kEntryFormatVersion = 1;

struct Entry {
  std::string producer;
  std::string key;
  std::string arch;
  std::string payload;
};

std::string EncodeEntry(const Entry& entry);

// Why a file is not a usable entry (a metric label, so a fixed set).
enum class RejectReason {
  kBadMagic,
  kUnknownVersion,
  kTruncated,
  kBadChecksum,
  kWrongKey,
  kWrongArch,
  kUnreadable,
  // The entry's place (or its launcher directory) holds a symlink, FIFO, directory, socket or
  // device: refused without following or opening it for a read that could block.
  kNotAFile,
  // The checksum holds but the payload is not a code object the store's check accepts
  // (CacheStore's PayloadCheck: one that cannot be read, or exceeds the reader's bounds).
  kBadCodeObject,
};
inline constexpr int kNumRejectReasons = 9;
std::string_view RejectReasonName(RejectReason reason);

struct DecodeResult {
  bool ok = false;
  RejectReason reason = RejectReason::kBadMagic;
  std::string detail;  // for people: "checksum mismatch", "key is 'x', expected 'y'"
  Entry entry;
};

// Decodes and checks `bytes`; an expected key or arch that is non-empty must match.
DecodeResult DecodeEntry(std::string_view bytes, std::string_view expected_key,
                         std::string_view expected_arch);

// The cheap check of a serving sidecar: the header of an entry (its first bytes, at least up to
// the payload length) and the file's size, without reading the payload or its checksum.
// Catches truncation, a wrong magic, version, key or arch; `prewarm verify` checks the rest.
DecodeResult CheckEntryHeader(std::string_view prefix, uint64_t file_size,
                              std::string_view expected_key, std::string_view expected_arch);

}  // namespace prewarm

#endif  // PREWARM_CACHE_ENTRY_H_
