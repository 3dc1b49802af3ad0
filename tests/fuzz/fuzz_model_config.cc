// A model's config.json: any bytes give a model or an InvalidArgument; a model that parses also
// gives a shape per rank or an error, never a crash or an overflow.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "prewarm/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<prewarm::ModelConfig> model = prewarm::ParseModelConfig(text, "fuzz");
  if (model.ok()) {
    for (int64_t tp : {1, 2, 8, 3}) (void)prewarm::ShapeForRank(*model, tp);
  }
  return 0;
}
