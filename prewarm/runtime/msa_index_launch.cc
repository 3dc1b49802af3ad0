#include "prewarm/runtime/msa_index_launch.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "nvfp4_msa/msa_index_geometry.h"
#include "nvfp4_msa/msa_insert_geometry.h"
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_topk_geometry.h"
#include "prewarm/runtime/launch_common.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using launch_internal::CeilDiv;
using launch_internal::CheckAligned;
using launch_internal::Run;

int Int(const Key& key, const char* name) { return static_cast<int>(KeyInt(key, name)); }

absl::Status CheckLauncher(const Key& key, const char* launcher) {
  if (key.launcher == launcher) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("a ", key.launcher, " key given to the launch code of ", launcher));
}

}  // namespace

absl::StatusOr<std::vector<EntryLaunch>> MsaIndexEntryLaunches(const Key& key) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const std::string& l = key.launcher;
  if (l == "msa_norm_rope_insert") {
    const int threads = KeyInt(key, "small")
                            ? pw_msa_insert_small_threads(
                                  pw_msa_insert_vectors(Int(key, "heads"), Int(key, "kv_heads"),
                                                        Int(key, "index_heads")),
                                  WarpWidth(arch))
                            : PW_MSA_INSERT_THREADS;
    return std::vector<EntryLaunch>{{"pw_msa_norm_rope_insert", static_cast<unsigned>(threads), 0}};
  }
  if (l == "msa_index_prefill") {
    const PwMsaIndexPrefillGeometry g = pw_msa_index_prefill_geometry(
        Int(key, "index_heads"), Int(key, "index_dim"), WarpWidth(arch));
    return std::vector<EntryLaunch>{{"pw_msa_index_prefill", static_cast<unsigned>(g.threads),
                                     static_cast<unsigned>(g.smem_bytes)}};
  }
  if (l == "msa_index_decode") {
    const std::optional<int64_t> sm = NvidiaSm(arch);
    const int di = Int(key, "index_dim");
    const int smem = pw_msa_index_decode_smem(
        di, pw_msa_index_decode_ring(sm.has_value() ? static_cast<int>(*sm) : 0, di,
                                     SharedMemoryKib(arch)));
    return std::vector<EntryLaunch>{
        {"pw_msa_index_decode", PW_MSA_INDEX_DECODE_THREADS, static_cast<unsigned>(smem)}};
  }
  if (l == "msa_topk_prefill") {
    std::vector<EntryLaunch> e = {{"pw_msa_topk_prefill", PW_MSA_TOPK_THREADS, 0}};
    if (KeyInt(key, "strips") > 1) e.push_back({"pw_msa_topk_merge", PW_MSA_TOPK_THREADS, 0});
    return e;
  }
  if (l == "msa_topk_decode") {
    return std::vector<EntryLaunch>{{"pw_msa_topk_decode", PW_MSA_TOPK_THREADS, 0}};
  }
  return absl::InvalidArgumentError(StrCat("no msa index launch code for launcher \"", l, "\""));
}

absl::Status LaunchMsaNormRopeInsert(Gpu& gpu, void* module, const Key& key,
                                     const MsaNormRopeInsertArgs& a) {
  RETURN_IF_ERROR(CheckLauncher(key, "msa_norm_rope_insert"));
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaIndexEntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  // The kernel reads and writes 16-byte chunks of every bf16 row, and an NVFP4 row's values 4
  // bytes at a time.
  RETURN_IF_ERROR(CheckAligned("msa_norm_rope_insert", {{"q", a.q},
                                                        {"k", a.k},
                                                        {"v", a.v},
                                                        {"index_q", a.index_q},
                                                        {"index_k", a.index_k},
                                                        {"q_out", a.q_out},
                                                        {"index_q_out", a.index_q_out},
                                                        {"kv_cache", a.kv_cache},
                                                        {"index_cache", a.index_cache}}));
  if (a.num_tokens <= 0) return absl::OkStatus();  // nothing to insert (a grid of 0 is an error)
  MsaNormRopeInsertArgs v = a;
  // RoPE's inv_freq_i = theta^(-2i / rope_dim) = rope_ratio^i, the ratio in double here.
  double rope_ratio = std::pow(static_cast<double>(a.theta), -2.0 / Int(key, "rope_dim"));
  const unsigned grid = KeyInt(key, "small")
                            ? static_cast<unsigned>(a.num_tokens)
                            : static_cast<unsigned>(pw_msa_insert_large_grid(
                                  a.num_tokens, WarpWidth(arch), gpu.MultiprocessorCount()));
  return Run(gpu, module, e[0], {grid, 1, 1},
             {&v.q,
              &v.k,
              &v.v,
              &v.index_q,
              &v.index_k,
              &v.q_norm,
              &v.k_norm,
              &v.index_q_norm,
              &v.index_k_norm,
              &v.pos,
              &v.slot,
              &v.eps,
              &rope_ratio,
              &v.k_scale,
              &v.v_scale,
              &v.num_tokens,
              &v.q_out,
              &v.index_q_out,
              &v.kv_cache,
              &v.index_cache});
}

namespace {

absl::Status CheckIndexArgs(const char* launcher, const MsaIndexArgs& a) {
  RETURN_IF_ERROR(CheckAligned(launcher, {{"index_q", a.index_q}, {"index_cache", a.index_cache}}));
  if (a.stride < 1 && a.rows > 0) {
    return absl::InvalidArgumentError(StrCat(launcher, ": stride ", a.stride, " < 1"));
  }
  return absl::OkStatus();
}

std::vector<void*> IndexArgv(MsaIndexArgs& v) {
  return {&v.index_q,     &v.row_req, &v.visible, &v.block_table, &v.max_blocks,
          &v.index_cache, &v.scores,  &v.stride,  &v.rows};
}

}  // namespace

absl::Status LaunchMsaIndexPrefill(Gpu& gpu, void* module, const Key& key, const MsaIndexArgs& a) {
  RETURN_IF_ERROR(CheckLauncher(key, "msa_index_prefill"));
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaIndexEntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  RETURN_IF_ERROR(CheckIndexArgs("msa_index_prefill", a));
  if (a.rows <= 0) return absl::OkStatus();
  const PwMsaIndexPrefillGeometry g = pw_msa_index_prefill_geometry(
      Int(key, "index_heads"), Int(key, "index_dim"), WarpWidth(arch));
  const unsigned chunks = KeyInt(key, "large") ? CeilDiv(a.stride, PW_MSA_INDEX_PREFILL_CHUNK) : 1;
  MsaIndexArgs v = a;
  return Run(gpu, module, e[0], {CeilDiv(a.rows, g.rows), chunks, 1}, IndexArgv(v));
}

size_t MsaIndexDecodeWorkspaceBytes(int rows) {
  return rows > 0 ? static_cast<size_t>(rows) * 4 : 0;
}

absl::Status LaunchMsaIndexDecode(Gpu& gpu, void* module, const Key& key, const MsaIndexArgs& a) {
  RETURN_IF_ERROR(CheckLauncher(key, "msa_index_decode"));
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaIndexEntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  RETURN_IF_ERROR(CheckIndexArgs("msa_index_decode", a));
  if (a.topk != 0 && a.workspace == 0 && a.rows > 0) {
    return absl::InvalidArgumentError(
        "msa_index_decode: the fused top-k (a topk output) needs its workspace");
  }
  if (a.rows <= 0) return absl::OkStatus();
  int chunk = pw_msa_index_decode_chunk(PW_MSA_INDEX_DECODE_THREADS / WarpWidth(arch), a.rows,
                                        a.stride, 2LL * gpu.MultiprocessorCount());
  MsaIndexArgs v = a;
  if (v.topk == 0) v.workspace = 0;
  return Run(gpu, module, e[0], {static_cast<unsigned>(a.rows), CeilDiv(a.stride, chunk), 1},
             {&v.index_q, &v.row_req, &v.visible, &v.block_table, &v.max_blocks, &v.index_cache,
              &v.scores, &v.stride, &v.rows, &chunk, &v.topk, &v.workspace});
}

size_t MsaTopkWorkspaceBytes(const Key& key, int rows, int heads) {
  const int64_t strips = KeyInt(key, "strips");
  if (key.launcher != "msa_topk_prefill" || strips <= 1) return 0;
  return static_cast<size_t>(rows) * heads * strips * KeyInt(key, "topk_blocks") * 2 * 4;
}

absl::Status LaunchMsaTopkPrefill(Gpu& gpu, void* module, const Key& key, const MsaTopkArgs& a) {
  RETURN_IF_ERROR(CheckLauncher(key, "msa_topk_prefill"));
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaIndexEntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const int64_t strips = std::max<int64_t>(1, KeyInt(key, "strips"));
  if (a.stride > strips * PW_MSA_TOPK_STRIP_BLOCKS) {
    return absl::InvalidArgumentError(StrCat("msa_topk_prefill: stride ", a.stride,
                                             " blocks needs more than the key's ", strips,
                                             " strips of ", PW_MSA_TOPK_STRIP_BLOCKS));
  }
  if (strips > 1 && a.workspace == 0 && a.rows > 0) {
    return absl::InvalidArgumentError("msa_topk_prefill: strips > 1 needs a workspace");
  }
  if (a.rows <= 0 || a.heads <= 0) return absl::OkStatus();
  const int warps = PW_MSA_TOPK_THREADS / WarpWidth(arch);
  MsaTopkArgs v = a;
  const int64_t items = static_cast<int64_t>(a.rows) * a.heads;
  RETURN_IF_ERROR(
      Run(gpu, module, e[0], {CeilDiv(items * strips, warps), 1, 1},
          {&v.scores, &v.visible, &v.stride, &v.rows, &v.heads, &v.topk, &v.workspace}));
  if (e.size() < 2) return absl::OkStatus();
  return Run(gpu, module, e[1], {CeilDiv(items, warps), 1, 1},
             {&v.visible, &v.rows, &v.heads, &v.workspace, &v.topk});
}

absl::Status LaunchMsaTopkDecode(Gpu& gpu, void* module, const Key& key, const MsaTopkArgs& a) {
  RETURN_IF_ERROR(CheckLauncher(key, "msa_topk_decode"));
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaIndexEntryLaunches(key));
  if (a.stride > PW_MSA_TOPK_DECODE_MAX_STRIPS * PW_MSA_TOPK_STRIP_BLOCKS) {
    return absl::InvalidArgumentError(
        StrCat("msa_topk_decode: stride ", a.stride, " blocks is more than the kernel's ",
               PW_MSA_TOPK_DECODE_MAX_STRIPS * PW_MSA_TOPK_STRIP_BLOCKS, " (2M tokens)"));
  }
  if (a.rows <= 0 || a.heads <= 0) return absl::OkStatus();
  MsaTopkArgs v = a;
  return Run(gpu, module, e[0], {static_cast<unsigned>(a.rows), static_cast<unsigned>(a.heads), 1},
             {&v.scores, &v.visible, &v.stride, &v.rows, &v.heads, &v.topk});
}

}  // namespace prewarm
