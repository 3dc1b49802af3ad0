// One line of a replay trace: JSON (depth-limited), then a step.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "prewarm/launchers/step.h"
#include "prewarm/util/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<nlohmann::json> j =
      prewarm::ParseJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (j.ok()) (void)prewarm::StepFromJson(*j);
  return 0;
}
