// The server's command line (--vllm-args): shell words, flags, JSON configs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "prewarm/limits/vllm_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)prewarm::ParseVllmArgs(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
