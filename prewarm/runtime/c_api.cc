#include <cmath>
#include <cstring>
#include <exception>
#include <functional>

#include "nlohmann/json.hpp"
#include "prewarm/launchers/launcher.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/runtime/c_api_internal.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/runtime/prewarm_runtime.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/util/json.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm::capi {
namespace {

void Message(std::string_view text, char* err, size_t err_len) {
  if (err == nullptr || err_len == 0) return;
  const size_t n = std::min(err_len - 1, text.size());
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

int Fail(const absl::Status& s, char* err, size_t err_len) {
  Message(std::string_view(s.message().data(), s.message().size()), err, err_len);
  switch (s.code()) {
    case absl::StatusCode::kFailedPrecondition:
      return PREWARM_ENOGPU;
    case absl::StatusCode::kInvalidArgument:
      return PREWARM_EINVAL;
    case absl::StatusCode::kNotFound:
      return PREWARM_EMISS;
    case absl::StatusCode::kUnavailable:
      return PREWARM_ENOCOMPILER;
    default:
      return PREWARM_EFAIL;
  }
}

}  // namespace

int Guard(char* err, size_t err_len, const std::function<absl::Status()>& body) {
  try {
    const absl::Status s = body();
    if (s.ok()) {
      Message("", err, err_len);
      return PREWARM_OK;
    }
    return Fail(s, err, err_len);
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(StrCat("prewarm runtime: ", e.what())), err, err_len);
  } catch (...) {
    return Fail(absl::InternalError("prewarm runtime: unknown exception"), err, err_len);
  }
}

absl::Status Required(std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, p] : pointers) {
    if (p == nullptr) return absl::InvalidArgumentError(StrCat(name, " must not be NULL"));
  }
  return absl::OkStatus();
}

absl::Status NonNegative(std::string_view launcher, std::string_view name, long long v) {
  if (v >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(launcher, ": ", name, " is ", v, "; it must be >= 0"));
}

absl::Status Positive(std::string_view launcher, std::string_view name, float v) {
  if (std::isfinite(v) && v > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(launcher, ": ", name, " is ", v, "; it must be finite and > 0"));
}

int Launch(prewarm_runtime* rt, std::string_view launcher, const void* args, void* stream,
           char* err, size_t err_len, const std::function<absl::Status(Runtime&)>& body) {
  return Guard(err, err_len, [&]() -> absl::Status {
    absl::Status s = Required({{"rt", rt}, {"args", args}});
    if (s.ok() && !rt->rt->has_gpu()) {
      s = body(*rt->rt);  // checks, then the no-GPU error
    } else if (s.ok()) {
      rt->rt->gpu().SetStream(stream);
      s = body(*rt->rt);
      rt->rt->gpu().SetStream(nullptr);
    }
    if (s.ok() || std::string_view(s.message().data(), s.message().size()).starts_with(launcher)) {
      return s;
    }
    return absl::Status(s.code(), StrCat(launcher, ": ", s.message()));
  });
}

absl::Status WorkspaceGiven(std::string_view launcher, size_t bytes, const void* ws,
                            std::string_view name) {
  if (bytes == 0 || ws != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(launcher, ": this call's kernel needs a workspace of ",
                                           bytes, " bytes in ", name,
                                           " (prewarm_runtime_workspace); it is NULL"));
}

StepStats PrefillStats(long long ctx, long long work, long long rows) {
  StepStats st;
  st.prefill_ctx = {ctx};
  st.prefill_work = work;
  st.total_tokens = rows;
  return st;
}

StepStats DecodeStats(int rows, long long max_ctx) {
  StepStats st;
  st.decode_tokens = rows;
  st.max_decode_ctx = max_ctx;
  return st;
}

}  // namespace prewarm::capi

namespace {

using prewarm::StrCat;
using prewarm::capi::DecodeStats;
using prewarm::capi::Guard;
using prewarm::capi::Launch;
using prewarm::capi::Message;
using prewarm::capi::NonNegative;
using prewarm::capi::Positive;
using prewarm::capi::PrefillStats;
using prewarm::capi::Ptr;
using prewarm::capi::Required;
using prewarm::capi::WorkspaceGiven;

prewarm::SparseArgs SparseArgsOf(const prewarm_sparse_args& a) {
  return {Ptr(a.q_latent), Ptr(a.q_rope), Ptr(a.topk),     Ptr(a.row_req), Ptr(a.block_table),
          a.max_blocks,    a.block_size,  Ptr(a.kv_cache), a.g_kv,         a.scale,
          Ptr(a.out),      Ptr(a.lse),    a.rows,          Ptr(a.ws_o),    Ptr(a.ws_lse)};
}

prewarm::IndexArgs IndexArgsOf(const prewarm_index_args& a) {
  return {Ptr(a.q),     Ptr(a.w),     Ptr(a.row_req),     Ptr(a.visible), Ptr(a.block_table),
          a.max_blocks, a.block_size, Ptr(a.index_cache), a.g_idx,        Ptr(a.out),
          a.stride,     a.rows};
}

prewarm::TopkArgs TopkArgsOf(const prewarm_topk_args& a) {
  return {Ptr(a.scores), Ptr(a.visible), a.stride,     a.rows,
          Ptr(a.out),    Ptr(a.ws_key),  Ptr(a.ws_idx)};
}

}  // namespace

extern "C" int prewarm_runtime_open_with(const prewarm_runtime_options* options,
                                         prewarm_runtime** out, char* err, size_t err_len) {
  return Guard(err, err_len, [&]() -> absl::Status {
    RETURN_IF_ERROR(Required({{"options", options}, {"out", out}}));
    RETURN_IF_ERROR(Required({{"options->cache_dir", options->cache_dir}}));
    if (options->tensor_parallel_size < 0) {
      return absl::InvalidArgumentError(StrCat("tensor_parallel_size ",
                                               options->tensor_parallel_size,
                                               ": must be >= 1 (or 0 for the manifest's)"));
    }
    prewarm::RuntimeOptions o;
    o.cache_dir = options->cache_dir;
    o.model_config = options->model_config != nullptr ? options->model_config : "";
    o.tensor_parallel_size = options->tensor_parallel_size;
    o.kv_cache_dtype = options->kv_cache_dtype != nullptr ? options->kv_cache_dtype : "";
    o.arch = options->arch != nullptr ? options->arch : "";
    o.strict = options->strict != 0;
    o.device = options->device;
    ASSIGN_OR_RETURN(std::unique_ptr<prewarm::Runtime> rt, prewarm::Runtime::Open(o));
    *out = new prewarm_runtime{std::move(rt)};
    return absl::OkStatus();
  });
}

extern "C" int prewarm_runtime_open(const char* cache_dir, const char* model_config,
                                    int tensor_parallel_size, int strict, prewarm_runtime** out,
                                    char* err, size_t err_len) {
  prewarm_runtime_options o{};
  o.cache_dir = cache_dir;
  o.model_config = model_config;
  o.tensor_parallel_size = tensor_parallel_size;
  o.strict = strict;
  return prewarm_runtime_open_with(&o, out, err, err_len);
}

extern "C" size_t prewarm_runtime_info(const prewarm_runtime* rt, char* buf, size_t buf_len) {
  std::string text;
  try {
    if (rt == nullptr) {
      text = "{}";
    } else {
      const prewarm::KernelCache& kc = rt->rt->kernel_cache();
      nlohmann::json launchers = nlohmann::json::array();
      for (const prewarm::Launcher* l : prewarm::AllLaunchers()) {
        if (l->AppliesTo(kc.shape(), kc.limits())) launchers.push_back(std::string(l->Name()));
      }
      nlohmann::json shape = prewarm::ShapeToJson(kc.model(), kc.shape(), kc.limits());
      shape["decode_heads"] = kc.shape().DecodeHeads();
      const nlohmann::json j = {
          {"arch", kc.arch().name},
          {"gpu", rt->rt->has_gpu() ? nlohmann::json(rt->rt->gpu().Name()) : nlohmann::json()},
          {"strict", kc.strict()},
          {"source", kc.filled_by().has_value() ? kc.filled_by()->path : "options"},
          {"shape", shape},
          {"limits", prewarm::LimitsToJson(kc.limits())},
          {"launchers", launchers}};
      text = j.dump();
    }
  } catch (...) {
    text = "{}";
  }
  if (buf != nullptr && buf_len > 0) Message(text, buf, buf_len);
  return text.size();
}

extern "C" int prewarm_runtime_preload(prewarm_runtime* rt, long long* loaded, char* err,
                                       size_t err_len) {
  return Guard(err, err_len, [&]() -> absl::Status {
    RETURN_IF_ERROR(Required({{"rt", rt}}));
    ASSIGN_OR_RETURN(const int64_t n, rt->rt->Preload());
    if (loaded != nullptr) *loaded = n;
    return absl::OkStatus();
  });
}

extern "C" int prewarm_runtime_get(prewarm_runtime* rt, const char* launcher, const char* step_json,
                                   void** modules, size_t max_modules, size_t* count, char* err,
                                   size_t err_len) {
  return Guard(err, err_len, [&]() -> absl::Status {
    RETURN_IF_ERROR(
        Required({{"rt", rt}, {"launcher", launcher}, {"step_json", step_json}, {"count", count}}));
    const absl::StatusOr<nlohmann::json> j = prewarm::ParseJson(step_json);
    if (!j.ok()) return absl::InvalidArgumentError(StrCat("step_json: ", j.status().message()));
    ASSIGN_OR_RETURN(const prewarm::Step step, prewarm::StepFromJson(*j));
    // The rules replay applies to a trace's step, against the cache's own limits: a step out of
    // range reaches no planned key, and its sums (q_len * ctx) could overflow int64.
    if (absl::Status range = prewarm::CheckStep(step, rt->rt->kernel_cache().limits());
        !range.ok()) {
      return absl::InvalidArgumentError(StrCat("step_json: out of range: ", range.message()));
    }
    ASSIGN_OR_RETURN(const std::vector<prewarm::LoadedKernel> k, rt->rt->ForStep(launcher, step));
    *count = k.size();
    for (size_t i = 0; i < k.size() && i < max_modules && modules != nullptr; ++i) {
      modules[i] = k[i].module;
    }
    return absl::OkStatus();
  });
}

extern "C" void prewarm_runtime_get_stats(const prewarm_runtime* rt, prewarm_runtime_stats* out) {
  if (rt == nullptr || out == nullptr) return;
  const prewarm::RuntimeStats& s = rt->rt->stats();
  *out = {s.hits, s.misses, s.compiles, s.memory_hits, s.load_seconds, s.compile_seconds};
}

extern "C" void prewarm_runtime_close(prewarm_runtime* rt) { delete rt; }

extern "C" int prewarm_runtime_fp8_bmm(prewarm_runtime* rt, const prewarm_fp8_bmm_args* a,
                                       void* stream, char* err, size_t err_len) {
  return Launch(rt, "fp8_bmm", a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative("fp8_bmm", "m", a->m));
    if (a->m == 0) return absl::OkStatus();
    RETURN_IF_ERROR(Required({{"x", a->x}, {"w", a->w}, {"y", a->y}}));
    prewarm::StepStats st;
    st.decode_tokens = a->m;
    ASSIGN_OR_RETURN(
        const prewarm::LoadedKernel k, r.ForCall("fp8_bmm", st, [&](const prewarm::Key& key) {
          return prewarm::KeyInt(key, "batch") == a->batch && prewarm::KeyInt(key, "n") == a->n &&
                 prewarm::KeyInt(key, "k") == a->k;
        }));
    return prewarm::LaunchFp8Bmm(r.gpu(), k.module, k.key,
                                 {Ptr(a->x), Ptr(a->w), Ptr(a->y), a->w_scale, a->m});
  });
}

extern "C" int prewarm_runtime_norm_rope_insert(prewarm_runtime* rt,
                                                const prewarm_norm_rope_insert_args* a,
                                                void* stream, char* err, size_t err_len) {
  return Launch(
      rt, "norm_rope_insert", a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
        RETURN_IF_ERROR(NonNegative("norm_rope_insert", "num_tokens", a->num_tokens));
        if (a->num_tokens == 0) return absl::OkStatus();
        RETURN_IF_ERROR(Required({{"latent", a->latent},
                                  {"rope", a->rope},
                                  {"index_key", a->index_key},
                                  {"gamma", a->gamma},
                                  {"pos", a->pos},
                                  {"slot", a->slot},
                                  {"kv_cache", a->kv_cache},
                                  {"index_cache", a->index_cache}}));
        prewarm::StepStats st;
        st.total_tokens = a->num_tokens;
        ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall("norm_rope_insert", st));
        return prewarm::LaunchNormRopeInsert(
            r.gpu(), k.module, k.key,
            {Ptr(a->latent), Ptr(a->rope), Ptr(a->index_key), Ptr(a->gamma), Ptr(a->pos),
             Ptr(a->slot), a->g_kv, a->g_idx, a->num_tokens, Ptr(a->kv_cache),
             Ptr(a->index_cache)});
      });
}

namespace {

absl::Status IndexCommon(const char* launcher, const prewarm_index_args& a) {
  RETURN_IF_ERROR(NonNegative(launcher, "rows", a.rows));
  if (a.rows == 0) return absl::OkStatus();
  if (a.stride < 1 || a.max_blocks < 1 || a.block_size < 1) {
    return absl::InvalidArgumentError(StrCat(launcher, ": stride ", a.stride, ", max_blocks ",
                                             a.max_blocks, " and block_size ", a.block_size,
                                             " must each be >= 1"));
  }
  return Required({{"q", a.q},
                   {"w", a.w},
                   {"row_req", a.row_req},
                   {"visible", a.visible},
                   {"block_table", a.block_table},
                   {"index_cache", a.index_cache},
                   {"out", a.out}});
}

// The kernels multiply every latent value by g_kv, and Hopper's prefill block folds it into each
// bf16 pair of NVFP4 scales (kernels/nvfp4_mla/sparse_wg.h), which holds it up to 512.
absl::Status SparseScales(const char* launcher, const prewarm_sparse_args& a) {
  if (!(std::isfinite(a.g_kv) && a.g_kv > 0 && a.g_kv <= 512)) {
    return absl::InvalidArgumentError(
        StrCat(launcher, ": g_kv is ", a.g_kv, "; it must be finite, > 0 and <= 512"));
  }
  return Positive(launcher, "scale", a.scale);
}

absl::Status SparseCommon(const char* launcher, const prewarm_sparse_args& a) {
  RETURN_IF_ERROR(NonNegative(launcher, "rows", a.rows));
  if (a.rows == 0) return absl::OkStatus();
  if (a.max_blocks < 1 || a.block_size < 1) {
    return absl::InvalidArgumentError(StrCat(launcher, ": max_blocks ", a.max_blocks,
                                             " and block_size ", a.block_size,
                                             " must each be >= 1"));
  }
  RETURN_IF_ERROR(Required({{"q_latent", a.q_latent},
                            {"q_rope", a.q_rope},
                            {"topk", a.topk},
                            {"row_req", a.row_req},
                            {"block_table", a.block_table},
                            {"kv_cache", a.kv_cache},
                            {"out", a.out},
                            {"lse", a.lse}}));
  return SparseScales(launcher, a);
}

absl::Status TopkCommon(const char* launcher, const prewarm_topk_args& a) {
  RETURN_IF_ERROR(NonNegative(launcher, "rows", a.rows));
  if (a.rows == 0) return absl::OkStatus();
  if (a.stride < 1) {
    return absl::InvalidArgumentError(StrCat(launcher, ": stride ", a.stride, " must be >= 1"));
  }
  return Required({{"scores", a.scores}, {"visible", a.visible}, {"out", a.out}});
}

}  // namespace

extern "C" int prewarm_runtime_index_prefill(prewarm_runtime* rt, const prewarm_index_args* a,
                                             void* stream, char* err, size_t err_len) {
  return Launch(
      rt, "index_prefill", a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
        RETURN_IF_ERROR(IndexCommon("index_prefill", *a));
        if (a->rows == 0) return absl::OkStatus();
        RETURN_IF_ERROR(NonNegative("index_prefill", "prefill_work", a->prefill_work));
        // The call's rows are the step's prefill rows (the key on Hopper at 64 index
        // heads follows them).
        ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                         r.ForCall("index_prefill", PrefillStats(1, a->prefill_work, a->rows)));
        return prewarm::LaunchIndexPrefill(r.gpu(), k.module, k.key, IndexArgsOf(*a));
      });
}

extern "C" int prewarm_runtime_index_decode(prewarm_runtime* rt, const prewarm_index_args* a,
                                            void* stream, char* err, size_t err_len) {
  return Launch(rt, "index_decode", a, stream, err, err_len,
                [&](prewarm::Runtime& r) -> absl::Status {
                  RETURN_IF_ERROR(IndexCommon("index_decode", *a));
                  if (a->rows == 0) return absl::OkStatus();
                  RETURN_IF_ERROR(NonNegative("index_decode", "max_ctx", a->max_ctx));
                  ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                                   r.ForCall("index_decode", DecodeStats(a->rows, a->max_ctx)));
                  return prewarm::LaunchIndexDecode(r.gpu(), k.module, k.key, IndexArgsOf(*a));
                });
}

extern "C" int prewarm_runtime_topk_prefill(prewarm_runtime* rt, const prewarm_topk_args* a,
                                            void* stream, char* err, size_t err_len) {
  return Launch(
      rt, "topk_prefill", a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
        RETURN_IF_ERROR(TopkCommon("topk_prefill", *a));
        if (a->rows == 0) return absl::OkStatus();
        if (a->ctx < 1) {
          return absl::InvalidArgumentError(StrCat("topk_prefill: ctx ", a->ctx, " must be >= 1"));
        }
        ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                         r.ForCall("topk_prefill", PrefillStats(a->ctx, 0)));
        const size_t ws = prewarm::TopkWorkspaceBytes(k.key, a->rows);
        RETURN_IF_ERROR(WorkspaceGiven("topk_prefill", ws, a->ws_key, "ws_key"));
        RETURN_IF_ERROR(WorkspaceGiven("topk_prefill", ws, a->ws_idx, "ws_idx"));
        return prewarm::LaunchTopkPrefill(r.gpu(), k.module, k.key, TopkArgsOf(*a));
      });
}

extern "C" int prewarm_runtime_topk_decode(prewarm_runtime* rt, const prewarm_topk_args* a,
                                           void* stream, char* err, size_t err_len) {
  return Launch(rt, "topk_decode", a, stream, err, err_len,
                [&](prewarm::Runtime& r) -> absl::Status {
                  RETURN_IF_ERROR(TopkCommon("topk_decode", *a));
                  if (a->rows == 0) return absl::OkStatus();
                  ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                                   r.ForCall("topk_decode", DecodeStats(a->rows, 0)));
                  return prewarm::LaunchTopkDecode(r.gpu(), k.module, k.key, TopkArgsOf(*a));
                });
}

extern "C" int prewarm_runtime_sparse_prefill(prewarm_runtime* rt, const prewarm_sparse_args* a,
                                              void* stream, char* err, size_t err_len) {
  return Launch(rt, "sparse_prefill", a, stream, err, err_len,
                [&](prewarm::Runtime& r) -> absl::Status {
                  RETURN_IF_ERROR(SparseCommon("sparse_prefill", *a));
                  if (a->rows == 0) return absl::OkStatus();
                  if (a->ctx < 1) {
                    return absl::InvalidArgumentError(
                        StrCat("sparse_prefill: ctx ", a->ctx, " must be >= 1"));
                  }
                  ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                                   r.ForCall("sparse_prefill", PrefillStats(a->ctx, 0)));
                  return prewarm::LaunchSparsePrefill(r.gpu(), k.module, k.key, SparseArgsOf(*a));
                });
}

extern "C" int prewarm_runtime_sparse_decode(prewarm_runtime* rt, const prewarm_sparse_args* a,
                                             void* stream, char* err, size_t err_len) {
  return Launch(
      rt, "sparse_decode", a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
        RETURN_IF_ERROR(SparseCommon("sparse_decode", *a));
        if (a->rows == 0) return absl::OkStatus();
        ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                         r.ForCall("sparse_decode", DecodeStats(a->rows, 0)));
        RETURN_IF_ERROR(WorkspaceGiven(
            "sparse_decode", prewarm::SparseWorkspaceBytes(k.key, a->rows), a->ws_o, "ws_o"));
        RETURN_IF_ERROR(WorkspaceGiven("sparse_decode",
                                       prewarm::SparseLseWorkspaceBytes(k.key, a->rows), a->ws_lse,
                                       "ws_lse"));
        return prewarm::LaunchSparseDecode(r.gpu(), k.module, k.key, SparseArgsOf(*a));
      });
}

extern "C" int prewarm_runtime_workspace(prewarm_runtime* rt, const char* launcher, int rows,
                                         long long ctx, int /*stride: unused*/, size_t bytes[2],
                                         char* err, size_t err_len) {
  return Guard(err, err_len, [&]() -> absl::Status {
    RETURN_IF_ERROR(Required({{"rt", rt}, {"launcher", launcher}, {"bytes", bytes}}));
    bytes[0] = bytes[1] = 0;
    RETURN_IF_ERROR(NonNegative(launcher, "rows", rows));
    const prewarm::KernelCache& kc = rt->rt->kernel_cache();
    const std::string name = launcher;
    if (rows == 0) return kc.KeysForStats(name, {}).status();
    if (name.starts_with("msa_")) return prewarm::capi::MsaWorkspace(kc, name, rows, ctx, bytes);
    prewarm::StepStats st =
        name == "topk_prefill" ? PrefillStats(std::max(1LL, ctx), 0) : DecodeStats(rows, ctx);
    ASSIGN_OR_RETURN(const std::vector<prewarm::Key> keys, kc.KeysForStats(name, st));
    if (keys.empty()) return absl::OkStatus();
    const prewarm::Key& key = keys.front();
    if (name == "topk_prefill") {
      bytes[0] = bytes[1] = prewarm::TopkWorkspaceBytes(key, rows);
    } else if (name == "sparse_decode") {
      bytes[0] = prewarm::SparseWorkspaceBytes(key, rows);
      bytes[1] = prewarm::SparseLseWorkspaceBytes(key, rows);
    }
    return absl::OkStatus();
  });
}
