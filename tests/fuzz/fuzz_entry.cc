// A cache entry as another tenant of the volume may leave it: the full decode and the serving
// sidecar's header check, against an expected key and arch and against none.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "prewarm/cache/entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)prewarm::DecodeEntry(bytes, "", "");
  (void)prewarm::DecodeEntry(bytes, "arch=gfx942,topk=2048", "gfx942");
  (void)prewarm::CheckEntryHeader(bytes.substr(0, 4096), size, "", "");
  (void)prewarm::CheckEntryHeader(bytes.substr(0, 64), size * 2 + 7, "k", "gfx950");
  return 0;
}
