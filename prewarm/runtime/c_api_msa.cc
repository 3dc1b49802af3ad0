// The C ABI of MiniMax-M3's msa_* launchers (prewarm_runtime.h): the arguments checked, the key
// picked from the call's key-deciding values, then msa_index_launch.h / msa_sparse_launch.h.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "prewarm/runtime/c_api_internal.h"
#include "prewarm/runtime/msa_index_launch.h"
#include "prewarm/runtime/msa_sparse_launch.h"
#include "prewarm/runtime/prewarm_runtime.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace {

using prewarm::StrCat;
using prewarm::capi::DecodeStats;
using prewarm::capi::Launch;
using prewarm::capi::NonNegative;
using prewarm::capi::Positive;
using prewarm::capi::PrefillStats;
using prewarm::capi::Ptr;
using prewarm::capi::Required;
using prewarm::capi::WorkspaceGiven;

absl::Status AtLeastOne(std::string_view launcher, std::string_view name, long long v) {
  if (v >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(launcher, ": ", name, " is ", v, "; it must be >= 1"));
}

absl::Status InsertArgs(const prewarm_msa_norm_rope_insert_args& a) {
  constexpr std::string_view kName = "msa_norm_rope_insert";
  RETURN_IF_ERROR(Required({{"q", a.q},
                            {"k", a.k},
                            {"v", a.v},
                            {"index_q", a.index_q},
                            {"index_k", a.index_k},
                            {"q_norm", a.q_norm},
                            {"k_norm", a.k_norm},
                            {"index_q_norm", a.index_q_norm},
                            {"index_k_norm", a.index_k_norm},
                            {"pos", a.pos},
                            {"slot", a.slot},
                            {"q_out", a.q_out},
                            {"index_q_out", a.index_q_out},
                            {"kv_cache", a.kv_cache},
                            {"index_cache", a.index_cache}}));
  if (!std::isfinite(a.eps) || a.eps < 0) {
    return absl::InvalidArgumentError(
        StrCat(kName, ": eps is ", a.eps, "; it must be finite and >= 0"));
  }
  RETURN_IF_ERROR(Positive(kName, "theta", a.theta));
  RETURN_IF_ERROR(Positive(kName, "k_scale", a.k_scale));
  return Positive(kName, "v_scale", a.v_scale);
}

// Checks of an index call with rows > 0.
absl::Status IndexArgs(std::string_view launcher, const prewarm_msa_index_args& a) {
  RETURN_IF_ERROR(AtLeastOne(launcher, "stride", a.stride));
  RETURN_IF_ERROR(AtLeastOne(launcher, "max_blocks", a.max_blocks));
  return Required({{"index_q", a.index_q},
                   {"row_req", a.row_req},
                   {"visible", a.visible},
                   {"block_table", a.block_table},
                   {"index_cache", a.index_cache},
                   {"scores", a.scores}});
}

prewarm::MsaIndexArgs IndexArgsOf(const prewarm_msa_index_args& a) {
  prewarm::MsaIndexArgs m;
  m.index_q = Ptr(a.index_q);
  m.row_req = Ptr(a.row_req);
  m.visible = Ptr(a.visible);
  m.block_table = Ptr(a.block_table);
  m.max_blocks = a.max_blocks;
  m.index_cache = Ptr(a.index_cache);
  m.scores = Ptr(a.scores);
  m.stride = a.stride;
  m.rows = a.rows;
  return m;
}

absl::Status TopkArgs(std::string_view launcher, const prewarm_msa_topk_args& a) {
  RETURN_IF_ERROR(AtLeastOne(launcher, "stride", a.stride));
  return Required({{"scores", a.scores}, {"visible", a.visible}, {"topk", a.topk}});
}

// The index heads of the cache's model per rank: scores and topk are [heads][rows][...].
prewarm::MsaTopkArgs TopkArgsOf(const prewarm_msa_topk_args& a, const prewarm::Runtime& r) {
  prewarm::MsaTopkArgs m;
  m.scores = Ptr(a.scores);
  m.visible = Ptr(a.visible);
  m.stride = a.stride;
  m.rows = a.rows;
  m.heads = static_cast<int>(r.shape().index_n_heads);
  m.topk = Ptr(a.topk);
  m.workspace = Ptr(a.workspace);
  return m;
}

absl::Status SparseArgs(std::string_view launcher, const prewarm_msa_sparse_args& a) {
  RETURN_IF_ERROR(AtLeastOne(launcher, "max_blocks", a.max_blocks));
  RETURN_IF_ERROR(Required({{"q", a.q},
                            {"topk", a.topk},
                            {"row_req", a.row_req},
                            {"visible", a.visible},
                            {"block_table", a.block_table},
                            {"kv_cache", a.kv_cache},
                            {"o", a.o},
                            {"lse", a.lse}}));
  RETURN_IF_ERROR(Positive(launcher, "k_scale", a.k_scale));
  RETURN_IF_ERROR(Positive(launcher, "v_scale", a.v_scale));
  return Positive(launcher, "scale", a.scale);
}

prewarm::MsaSparseArgs SparseArgsOf(const prewarm_msa_sparse_args& a) {
  prewarm::MsaSparseArgs m;
  m.q = Ptr(a.q);
  m.topk = Ptr(a.topk);
  m.row_req = Ptr(a.row_req);
  m.visible = Ptr(a.visible);
  m.block_table = Ptr(a.block_table);
  m.max_blocks = a.max_blocks;
  m.kv = Ptr(a.kv_cache);
  m.k_scale = a.k_scale;
  m.v_scale = a.v_scale;
  m.scale = a.scale;
  m.o = Ptr(a.o);
  m.lse = Ptr(a.lse);
  m.rows = a.rows;
  m.ws_o = Ptr(a.ws_o);
  m.ws_lse = Ptr(a.ws_lse);
  return m;
}

}  // namespace

namespace prewarm::capi {

absl::Status MsaWorkspace(const KernelCache& kc, const std::string& launcher, int rows,
                          long long ctx, size_t bytes[2]) {
  const bool topk = launcher == "msa_topk_prefill";
  const StepStats st = topk ? PrefillStats(std::max(1LL, ctx), 0) : DecodeStats(rows, 0);
  ASSIGN_OR_RETURN(const std::vector<Key> keys, kc.KeysForStats(launcher, st));
  if (keys.empty()) return absl::OkStatus();
  if (topk) {
    bytes[0] =
        MsaTopkWorkspaceBytes(keys.front(), rows, static_cast<int>(kc.shape().index_n_heads));
  } else if (launcher == "msa_index_decode") {
    bytes[0] = MsaIndexDecodeWorkspaceBytes(rows);
  } else if (launcher == "msa_sparse_decode") {
    bytes[0] = MsaSparseWorkspaceBytes(keys.front(), rows);
    bytes[1] = MsaSparseLseWorkspaceBytes(keys.front(), rows);
  }
  return absl::OkStatus();
}

}  // namespace prewarm::capi

extern "C" int prewarm_runtime_msa_norm_rope_insert(prewarm_runtime* rt,
                                                    const prewarm_msa_norm_rope_insert_args* a,
                                                    void* stream, char* err, size_t err_len) {
  constexpr const char* kName = "msa_norm_rope_insert";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "num_tokens", a->num_tokens));
    if (a->num_tokens == 0) return absl::OkStatus();
    RETURN_IF_ERROR(InsertArgs(*a));
    prewarm::StepStats st;
    st.total_tokens = a->num_tokens;
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, st));
    prewarm::MsaNormRopeInsertArgs m;
    m.q = Ptr(a->q);
    m.k = Ptr(a->k);
    m.v = Ptr(a->v);
    m.index_q = Ptr(a->index_q);
    m.index_k = Ptr(a->index_k);
    m.q_norm = Ptr(a->q_norm);
    m.k_norm = Ptr(a->k_norm);
    m.index_q_norm = Ptr(a->index_q_norm);
    m.index_k_norm = Ptr(a->index_k_norm);
    m.pos = Ptr(a->pos);
    m.slot = Ptr(a->slot);
    m.eps = a->eps;
    m.theta = a->theta;
    m.k_scale = a->k_scale;
    m.v_scale = a->v_scale;
    m.num_tokens = a->num_tokens;
    m.q_out = Ptr(a->q_out);
    m.index_q_out = Ptr(a->index_q_out);
    m.kv_cache = Ptr(a->kv_cache);
    m.index_cache = Ptr(a->index_cache);
    return prewarm::LaunchMsaNormRopeInsert(r.gpu(), k.module, k.key, m);
  });
}

extern "C" int prewarm_runtime_msa_index_prefill(prewarm_runtime* rt,
                                                 const prewarm_msa_index_args* a, void* stream,
                                                 char* err, size_t err_len) {
  constexpr const char* kName = "msa_index_prefill";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(IndexArgs(kName, *a));
    RETURN_IF_ERROR(AtLeastOne(kName, "prefill_work", a->prefill_work));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k,
                     r.ForCall(kName, PrefillStats(1, a->prefill_work)));
    return prewarm::LaunchMsaIndexPrefill(r.gpu(), k.module, k.key, IndexArgsOf(*a));
  });
}

extern "C" int prewarm_runtime_msa_index_decode(prewarm_runtime* rt,
                                                const prewarm_msa_index_args* a, void* stream,
                                                char* err, size_t err_len) {
  constexpr const char* kName = "msa_index_decode";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(IndexArgs(kName, *a));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, DecodeStats(a->rows, 0)));
    return prewarm::LaunchMsaIndexDecode(r.gpu(), k.module, k.key, IndexArgsOf(*a));
  });
}

extern "C" int prewarm_runtime_msa_index_topk_decode(prewarm_runtime* rt,
                                                     const prewarm_msa_index_args* a, void* topk,
                                                     void* workspace, void* stream, char* err,
                                                     size_t err_len) {
  constexpr const char* kName = "msa_index_decode";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(IndexArgs(kName, *a));
    RETURN_IF_ERROR(Required({{"topk", topk}}));
    RETURN_IF_ERROR(WorkspaceGiven(kName, prewarm::MsaIndexDecodeWorkspaceBytes(a->rows), workspace,
                                   "workspace"));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, DecodeStats(a->rows, 0)));
    prewarm::MsaIndexArgs m = IndexArgsOf(*a);
    m.topk = Ptr(topk);
    m.workspace = Ptr(workspace);
    return prewarm::LaunchMsaIndexDecode(r.gpu(), k.module, k.key, m);
  });
}

extern "C" int prewarm_runtime_msa_topk_prefill(prewarm_runtime* rt, const prewarm_msa_topk_args* a,
                                                void* stream, char* err, size_t err_len) {
  constexpr const char* kName = "msa_topk_prefill";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(TopkArgs(kName, *a));
    RETURN_IF_ERROR(AtLeastOne(kName, "ctx", a->ctx));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, PrefillStats(a->ctx, 0)));
    const prewarm::MsaTopkArgs m = TopkArgsOf(*a, r);
    RETURN_IF_ERROR(WorkspaceGiven(kName, prewarm::MsaTopkWorkspaceBytes(k.key, m.rows, m.heads),
                                   a->workspace, "workspace"));
    return prewarm::LaunchMsaTopkPrefill(r.gpu(), k.module, k.key, m);
  });
}

extern "C" int prewarm_runtime_msa_topk_decode(prewarm_runtime* rt, const prewarm_msa_topk_args* a,
                                               void* stream, char* err, size_t err_len) {
  constexpr const char* kName = "msa_topk_decode";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(TopkArgs(kName, *a));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, DecodeStats(a->rows, 0)));
    return prewarm::LaunchMsaTopkDecode(r.gpu(), k.module, k.key, TopkArgsOf(*a, r));
  });
}

extern "C" int prewarm_runtime_msa_sparse_prefill(prewarm_runtime* rt,
                                                  const prewarm_msa_sparse_args* a, void* stream,
                                                  char* err, size_t err_len) {
  constexpr const char* kName = "msa_sparse_prefill";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(SparseArgs(kName, *a));
    RETURN_IF_ERROR(AtLeastOne(kName, "ctx", a->ctx));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, PrefillStats(a->ctx, 0)));
    return prewarm::LaunchMsaSparsePrefill(r.gpu(), k.module, k.key, SparseArgsOf(*a));
  });
}

extern "C" int prewarm_runtime_msa_sparse_decode(prewarm_runtime* rt,
                                                 const prewarm_msa_sparse_args* a, void* stream,
                                                 char* err, size_t err_len) {
  constexpr const char* kName = "msa_sparse_decode";
  return Launch(rt, kName, a, stream, err, err_len, [&](prewarm::Runtime& r) -> absl::Status {
    RETURN_IF_ERROR(NonNegative(kName, "rows", a->rows));
    if (a->rows == 0) return absl::OkStatus();
    RETURN_IF_ERROR(SparseArgs(kName, *a));
    ASSIGN_OR_RETURN(const prewarm::LoadedKernel k, r.ForCall(kName, DecodeStats(a->rows, 0)));
    RETURN_IF_ERROR(
        WorkspaceGiven(kName, prewarm::MsaSparseWorkspaceBytes(k.key, a->rows), a->ws_o, "ws_o"));
    RETURN_IF_ERROR(WorkspaceGiven(kName, prewarm::MsaSparseLseWorkspaceBytes(k.key, a->rows),
                                   a->ws_lse, "ws_lse"));
    return prewarm::LaunchMsaSparseDecode(r.gpu(), k.module, k.key, SparseArgsOf(*a));
  });
}
