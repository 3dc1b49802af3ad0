#include <cstring>

#include "nlohmann/json.hpp"
#include "prewarm/runtime/prewarm_runtime.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/util/json.h"
#include "prewarm/util/strings.h"

struct prewarm_runtime {
  std::unique_ptr<prewarm::Runtime> rt;
};

namespace {

int Fail(const absl::Status& s, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) {
    const size_t n = std::min(err_len - 1, s.message().size());
    std::memcpy(err, s.message().data(), n);
    err[n] = '\0';
  }
  switch (s.code()) {
    case absl::StatusCode::kFailedPrecondition:
      return PREWARM_ENOGPU;
    case absl::StatusCode::kInvalidArgument:
      return PREWARM_EINVAL;
    case absl::StatusCode::kNotFound:
      return PREWARM_EMISS;
    default:
      return PREWARM_EFAIL;
  }
}

}  // namespace

extern "C" int prewarm_runtime_open(const char* cache_dir, const char* model_config,
                                    int tensor_parallel_size, int strict, prewarm_runtime** out,
                                    char* err, size_t err_len) {
  if (cache_dir == nullptr || out == nullptr) {
    return Fail(absl::InvalidArgumentError("cache_dir and out must not be NULL"), err, err_len);
  }
  prewarm::RuntimeOptions o;
  o.cache_dir = cache_dir;
  o.model_config = model_config != nullptr ? model_config : "";
  o.tensor_parallel_size = tensor_parallel_size;
  o.strict = strict != 0;
  absl::StatusOr<std::unique_ptr<prewarm::Runtime>> rt = prewarm::Runtime::Open(o);
  if (!rt.ok()) return Fail(rt.status(), err, err_len);
  *out = new prewarm_runtime{*std::move(rt)};
  return PREWARM_OK;
}

extern "C" int prewarm_runtime_get(prewarm_runtime* rt, const char* launcher, const char* step_json,
                                   void** modules, size_t max_modules, size_t* count, char* err,
                                   size_t err_len) {
  if (rt == nullptr || launcher == nullptr || step_json == nullptr || count == nullptr) {
    return Fail(absl::InvalidArgumentError("NULL argument"), err, err_len);
  }
  const absl::StatusOr<nlohmann::json> j = prewarm::ParseJson(step_json);
  absl::StatusOr<prewarm::Step> step =
      j.ok() ? prewarm::StepFromJson(*j)
             : absl::StatusOr<prewarm::Step>(absl::InvalidArgumentError(
                   prewarm::StrCat("step_json: ", j.status().message())));
  if (!step.ok()) return Fail(step.status(), err, err_len);
  absl::StatusOr<std::vector<prewarm::LoadedKernel>> k = rt->rt->ForStep(launcher, *step);
  if (!k.ok()) return Fail(k.status(), err, err_len);
  *count = k->size();
  for (size_t i = 0; i < k->size() && i < max_modules; ++i) modules[i] = (*k)[i].module;
  return PREWARM_OK;
}

extern "C" void prewarm_runtime_get_stats(const prewarm_runtime* rt, prewarm_runtime_stats* out) {
  if (rt == nullptr || out == nullptr) return;
  const prewarm::RuntimeStats& s = rt->rt->stats();
  *out = {s.hits, s.misses, s.compiles, s.memory_hits, s.load_seconds, s.compile_seconds};
}

extern "C" void prewarm_runtime_close(prewarm_runtime* rt) { delete rt; }
