#include "prewarm/runtime/msa_sparse_launch.h"

#include <algorithm>
#include <limits>

#include "nvfp4_msa/msa_sparse_geometry.h"
#include "prewarm/runtime/launch_common.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using launch_internal::CeilDiv;
using launch_internal::Run;

// The block shape msa_sparse_geometry.h gives the kernel compiled for this key.
absl::StatusOr<PwMsaSparseGeometry> Geometry(const Key& key) {
  const bool prefill = key.launcher == "msa_sparse_prefill";
  if (!prefill && key.launcher != "msa_sparse_decode") {
    return absl::InvalidArgumentError(StrCat("not an msa_sparse launcher: \"", key.launcher, "\""));
  }
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const int64_t heads = KeyInt(key, "heads"), kv_heads = KeyInt(key, "kv_heads");
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || KeyInt(key, "head_dim") != 128) {
    return absl::InvalidArgumentError(
        StrCat(key.launcher, ": needs kv_heads dividing heads and head_dim 128: ", key.String()));
  }
  return pw_msa_sparse_geometry(static_cast<int>(heads / kv_heads), WarpWidth(arch),
                                SharedMemoryKib(arch), prefill,
                                prefill ? static_cast<int>(KeyInt(key, "rounds")) : 0,
                                static_cast<int>(KeyInt(key, "topk_blocks")),
                                arch.platform == Platform::kNvidia, Wgmma(arch));
}

int64_t Splits(const Key& key) {
  return key.launcher == "msa_sparse_decode" ? std::max<int64_t>(1, KeyInt(key, "splits")) : 1;
}

// Whether a decode key's splits combine inside their cluster (no combine kernel).
absl::StatusOr<bool> ClusterCombines(const Key& key) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  return pw_msa_dec_cluster(static_cast<int>(std::min<int64_t>(Splits(key), 1 << 20)),
                            arch.platform == Platform::kNvidia, Wgmma(arch));
}

// InvalidArgument naming the first of q, kv, o, ws_o that is not 16-byte aligned.
absl::Status CheckAligned(const char* launcher, const MsaSparseArgs& a) {
  return launch_internal::CheckAligned(launcher,
                                       {{"q", a.q}, {"kv", a.kv}, {"o", a.o}, {"ws_o", a.ws_o}});
}

}  // namespace

absl::StatusOr<std::vector<EntryLaunch>> MsaSparseEntryLaunches(const Key& key) {
  ASSIGN_OR_RETURN(const PwMsaSparseGeometry g, Geometry(key));
  const unsigned threads = static_cast<unsigned>(g.threads);
  const unsigned smem = static_cast<unsigned>(g.smem_bytes);
  if (key.launcher == "msa_sparse_prefill") {
    return std::vector<EntryLaunch>{{"pw_msa_sparse_prefill", threads, smem}};
  }
  std::vector<EntryLaunch> e = {{"pw_msa_sparse_decode", threads, smem}};
  ASSIGN_OR_RETURN(const bool cluster, ClusterCombines(key));
  if (Splits(key) > 1 && !cluster) {
    e.push_back({"pw_msa_sparse_decode_combine", PW_MSA_COMBINE_THREADS, 0, true});
  }
  return e;
}

size_t MsaSparseWorkspaceBytes(const Key& key, int rows) {
  return MsaSparseLseWorkspaceBytes(key, rows) * KeyInt(key, "head_dim");
}

size_t MsaSparseLseWorkspaceBytes(const Key& key, int rows) {
  const int64_t splits = Splits(key);
  if (splits <= 1) return 0;
  return static_cast<size_t>(std::max(rows, 0)) * KeyInt(key, "heads") * splits * sizeof(float);
}

absl::Status LaunchMsaSparsePrefill(Gpu& gpu, void* module, const Key& key,
                                    const MsaSparseArgs& a) {
  if (key.launcher != "msa_sparse_prefill") {
    return absl::InvalidArgumentError(
        StrCat("LaunchMsaSparsePrefill: a key of \"", key.launcher, "\""));
  }
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaSparseEntryLaunches(key));
  ASSIGN_OR_RETURN(const PwMsaSparseGeometry g, Geometry(key));
  RETURN_IF_ERROR(CheckAligned("msa_sparse_prefill", a));
  if (a.rows <= 0) return absl::OkStatus();                 // a grid of 0 is an error
  if (a.rows > std::numeric_limits<int>::max() - g.rows) {  // the kernel rounds rows up in int
    return absl::InvalidArgumentError(
        StrCat("msa_sparse_prefill: rows ", a.rows, ": more than one launch takes"));
  }
  MsaSparseArgs v = a;
  // Work items (row tiles x head slices) over a 1-D grid: the warpgroup path's blocks are
  // persistent, one an SM taking items in turn; the others take one item each.
  const int64_t items =
      static_cast<int64_t>(CeilDiv(a.rows, g.rows)) * KeyInt(key, "kv_heads") * g.head_slices;
  if (a.max_grid < 0) {
    return absl::InvalidArgumentError(StrCat("msa_sparse_prefill: max_grid ", a.max_grid,
                                             ": must be 0 (one block a "
                                             "multiprocessor) or more"));
  }
  const int64_t blocks =
      g.wg ? std::min<int64_t>(items, a.max_grid > 0 ? a.max_grid : gpu.MultiprocessorCount())
           : items;
  // The kernel counts items in int (a block's next is w + gridDim.x), and a grid's x times its
  // threads stays under 2^32 (HIP).
  if (items > std::numeric_limits<int>::max() - blocks || blocks * e[0].threads >= (1LL << 32)) {
    return absl::InvalidArgumentError(StrCat("msa_sparse_prefill: rows ", a.rows, " make ", items,
                                             " work items, more than one launch takes"));
  }
  const Dim3 grid = {static_cast<unsigned>(blocks), 1, 1};
  return Run(gpu, module, e[0], grid,
             {&v.q, &v.topk, &v.row_req, &v.visible, &v.block_table, &v.max_blocks, &v.kv,
              &v.k_scale, &v.v_scale, &v.scale, &v.o, &v.lse, &v.rows});
}

absl::Status LaunchMsaSparseDecode(Gpu& gpu, void* module, const Key& key, const MsaSparseArgs& a) {
  if (key.launcher != "msa_sparse_decode") {
    return absl::InvalidArgumentError(
        StrCat("LaunchMsaSparseDecode: a key of \"", key.launcher, "\""));
  }
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, MsaSparseEntryLaunches(key));
  ASSIGN_OR_RETURN(const PwMsaSparseGeometry g, Geometry(key));
  RETURN_IF_ERROR(CheckAligned("msa_sparse_decode", a));
  const int64_t splits = Splits(key);
  if (splits > 1 && (a.ws_o == 0 || a.ws_lse == 0)) {
    return absl::InvalidArgumentError(
        StrCat("msa_sparse_decode: splits ", splits, " needs ws_o and ws_lse"));
  }
  if (a.rows <= 0) return absl::OkStatus();
  MsaSparseArgs v = a;
  const int64_t heads = KeyInt(key, "heads");
  RETURN_IF_ERROR(
      Run(gpu, module, e[0],
          {static_cast<unsigned>(a.rows),
           static_cast<unsigned>(KeyInt(key, "kv_heads") * g.head_slices),
           static_cast<unsigned>(splits)},
          {&v.q, &v.topk, &v.row_req, &v.visible, &v.block_table, &v.max_blocks, &v.kv, &v.k_scale,
           &v.v_scale, &v.scale, &v.o, &v.lse, &v.ws_o, &v.ws_lse, &v.rows}));
  if (e.size() < 2) return absl::OkStatus();
  return Run(gpu, module, e[1], {static_cast<unsigned>(a.rows), static_cast<unsigned>(heads), 1},
             {&v.ws_o, &v.ws_lse, &v.o, &v.lse});
}

}  // namespace prewarm
