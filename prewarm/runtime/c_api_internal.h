// What the C ABI's files (c_api.cc: the loader and the MLA launchers; c_api_msa.cc: MiniMax-M3's
// msa_* launchers) share: the handle, the error plumbing and the argument checks. Internal to
// libprewarm_runtime.so; callers use prewarm_runtime.h.
#ifndef PREWARM_RUNTIME_C_API_INTERNAL_H_
#define PREWARM_RUNTIME_C_API_INTERNAL_H_

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "prewarm/launchers/step.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/prewarm_runtime.h"
#include "prewarm/runtime/runtime.h"

struct prewarm_runtime {
  std::unique_ptr<prewarm::Runtime> rt;
};

namespace prewarm::capi {

// Runs `body`, turning its status (and any exception: none may cross the C boundary) into a
// return code (FailedPrecondition: PREWARM_ENOGPU, InvalidArgument: PREWARM_EINVAL, NotFound:
// PREWARM_EMISS, Unavailable: PREWARM_ENOCOMPILER, else PREWARM_EFAIL) and message.
int Guard(char* err, size_t err_len, const std::function<absl::Status()>& body);

inline DevicePtr Ptr(const void* p) { return reinterpret_cast<DevicePtr>(p); }

// InvalidArgument naming the first NULL among the required pointers.
absl::Status Required(std::initializer_list<std::pair<const char*, const void*>> pointers);

// InvalidArgument "launcher: name is v; it must be >= 0" for a negative v.
absl::Status NonNegative(std::string_view launcher, std::string_view name, long long v);

// InvalidArgument "launcher: name is v; it must be finite and > 0" for a zero, negative or
// non-finite scale: the kernels divide by the global scales and the softmax scale multiplies every
// score, so such a one would fill the caches or outputs with NaN or wrong values without an error.
absl::Status Positive(std::string_view launcher, std::string_view name, float v);

// One launch of `launcher` on `stream`: rt and args checked, then `body` with the stream set (on
// a runtime without a GPU `body` runs unchanged: it checks, then ForCall answers the no-GPU
// error). Every message starts with the launcher's name.
int Launch(prewarm_runtime* rt, std::string_view launcher, const void* args, void* stream,
           char* err, size_t err_len, const std::function<absl::Status(Runtime&)>& body);

// A split-K or strips launch needs its workspace; a NULL one would be a device fault.
absl::Status WorkspaceGiven(std::string_view launcher, size_t bytes, const void* ws,
                            std::string_view name);

// The key-deciding statistics of one call: a prefill request of context `ctx` in a step of
// prefill work `work` and `rows` prefill rows (0 where the launcher's key does not read them);
// `rows` decode rows whose largest context is `max_ctx`.
StepStats PrefillStats(long long ctx, long long work, long long rows = 0);
StepStats DecodeStats(int rows, long long max_ctx);

// prewarm_runtime_workspace for the msa_* launchers (c_api_msa.cc): bytes[0] and bytes[1] of
// `launcher`'s key for `rows` rows (and, msa_topk_prefill, context `ctx`); rows > 0.
absl::Status MsaWorkspace(const KernelCache& kc, const std::string& launcher, int rows,
                          long long ctx, size_t bytes[2]);

}  // namespace prewarm::capi

#endif  // PREWARM_RUNTIME_C_API_INTERNAL_H_
