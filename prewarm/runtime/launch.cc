#include "prewarm/runtime/launch.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

#include "common/geometry.h"
#include "nvfp4_mla/index_geometry.h"
#include "nvfp4_mla/sparse_geometry.h"
#include "prewarm/runtime/launch_common.h"
#include "prewarm/runtime/msa_index_launch.h"
#include "prewarm/runtime/msa_sparse_launch.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

constexpr unsigned kBlock = PW_BLOCK_THREADS;

using launch_internal::CeilDiv;
using launch_internal::CheckAligned;
using launch_internal::Run;

unsigned Unsigned(int v) { return static_cast<unsigned>(v); }

// The block shape sparse_geometry.h gives the kernel compiled for this key.
absl::StatusOr<PwSparseGeometry> SparseGeometry(const Key& key) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const int range = pw_sparse_range(static_cast<int>(KeyInt(key, "topk")),
                                    std::max<int>(1, static_cast<int>(KeyInt(key, "splits"))));
  const bool staged =
      pw_sparse_staged(arch.platform == Platform::kNvidia, key.launcher == "sparse_prefill",
                       static_cast<int>(KeyInt(key, "rounds")), range);
  return pw_sparse_geometry(static_cast<int>(KeyInt(key, "heads")), WarpWidth(arch),
                            SharedMemoryKib(arch), static_cast<int>(KeyInt(key, "kv_lora_rank")),
                            static_cast<int>(KeyInt(key, "rope_dim")), range, staged, Wgmma(arch));
}

// The splits of a sparse_decode key whose partials go through the workspace and the combine
// kernel: 0 where there are none (one split, or splits that combine inside their thread block
// cluster: sparse_geometry.h).
absl::StatusOr<int64_t> SparseWorkspaceSplits(const Key& key) {
  const int64_t splits = KeyInt(key, "splits");
  if (key.launcher != "sparse_decode" || splits <= 1) return 0;
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const bool cluster =
      pw_sparse_dec_cluster(static_cast<int>(std::min<int64_t>(splits, int64_t{1} << 20)),
                            arch.platform == Platform::kNvidia, Wgmma(arch));
  return cluster ? 0 : splits;
}

// The block shape index_geometry.h gives the index kernels compiled for this key.
absl::StatusOr<PwIndexGeometry> IndexGeometry(const Key& key) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  return pw_index_geometry(static_cast<int>(KeyInt(key, "index_heads")),
                           static_cast<int>(KeyInt(key, "index_head_dim")), WarpWidth(arch),
                           SharedMemoryKib(arch));
}

// Whether index_decode takes the heads as its GEMM's M (index_decode.hip: NVIDIA sm_80+'s
// mma.sync, index_geometry.h's rule): its own block shape and grid; index_prefill's kernel is then
// index_decode's, with the same launch (index_prefill.hip).
bool IndexDecodeHeadsM(const Key& key, const Arch& arch) {
  const std::optional<int64_t> sm = NvidiaSm(arch);
  return pw_index_decode_heads_m(static_cast<int>(KeyInt(key, "index_heads")),
                                 static_cast<int>(KeyInt(key, "index_head_dim")),
                                 sm.has_value() && *sm >= 80);
}

// Whether index_prefill's kernel is index_wg.h's (Hopper's warpgroup instructions, 64
// index heads of 128 dims): its own block shape, 4 rows a block.
bool IndexPrefillWg(const Key& key, const Arch& arch) {
  return pw_index_prefill_wg(static_cast<int>(KeyInt(key, "index_heads")),
                             static_cast<int>(KeyInt(key, "index_head_dim")), Wgmma(arch));
}

// fp8_bmm's block shape (common/geometry.h) for this key: its tiled path needs e4m3 matrix
// instructions (NVIDIA sm_89 and later, as fp8_bmm.hip's PW_FP8_MMA_ARCH), its persistent form
// Hopper's warpgroup instructions (sm_90, which the toolchain compiles as sm_90a: PW_WGMMA).
absl::StatusOr<PwFp8BmmGeometry> Fp8Geometry(const Key& key) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const std::optional<int64_t> sm = NvidiaSm(arch);
  return pw_fp8_bmm_geometry(static_cast<int>(KeyInt(key, "n")), static_cast<int>(KeyInt(key, "k")),
                             static_cast<int>(KeyInt(key, "m_exact")),
                             static_cast<int>(KeyInt(key, "block_m")), sm.has_value() && *sm >= 89,
                             sm.has_value() && *sm == 90);
}

// Thread block clusters (topk_decode's and topk_prefill's cluster entries): Hopper's sm_90a
// builds.
bool Clusters(const Arch& arch) { return Wgmma(arch); }

// topk_prefill's launch: a cluster of `strips` blocks a row on Hopper (2 to 8 strips), else the
// strips (and their merge where more than one).
absl::StatusOr<bool> TopkPrefillClusters(const Key& key) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  return pw_topk_prefill_cluster(static_cast<int>(KeyInt(key, "strips")), Clusters(arch));
}

// A top-k launch whose rows are the grid's y (a row's blocks its x: a cluster), in pieces of at
// most 65,535 rows (the y dimension's limit): launch(v) for each piece's arguments.
template <typename F>
absl::Status TopkRowPieces(const TopkArgs& a, int k, F launch) {
  constexpr int kMaxY = 65535;
  for (int r0 = 0; r0 < a.rows; r0 += kMaxY) {
    TopkArgs v = a;
    v.rows = std::min(kMaxY, a.rows - r0);
    v.scores += static_cast<DevicePtr>(r0) * static_cast<DevicePtr>(a.stride) * 4;
    v.visible += static_cast<DevicePtr>(r0) * 4;
    v.out += static_cast<DevicePtr>(r0) * static_cast<DevicePtr>(k) * 4;
    RETURN_IF_ERROR(launch(v));
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<int64_t> NvidiaSm(const Arch& arch) {
  return arch.platform == Platform::kNvidia ? ParseInt64(std::string_view(arch.name).substr(3))
                                            : std::nullopt;
}

absl::StatusOr<Arch> KeyArch(const Key& key) {
  auto it = key.params.find("arch");
  const std::string* name =
      it == key.params.end() ? nullptr : std::get_if<std::string>(&it->second);
  if (name == nullptr) return absl::InvalidArgumentError("key has no arch: " + key.String());
  return ParseArch(*name);
}

int64_t KeyInt(const Key& key, const std::string& name) {
  auto it = key.params.find(name);
  if (it == key.params.end()) return 0;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return *i;
  if (const auto* b = std::get_if<bool>(&it->second)) return *b ? 1 : 0;
  return 0;
}

absl::StatusOr<std::vector<EntryLaunch>> EntryLaunches(const Key& key) {
  const std::string& l = key.launcher;
  // MiniMax-M3's launchers: msa_index_launch.h (insert, index, top-k), msa_sparse_launch.h.
  if (l == "msa_sparse_prefill" || l == "msa_sparse_decode") return MsaSparseEntryLaunches(key);
  if (l.rfind("msa_", 0) == 0) return MsaIndexEntryLaunches(key);
  if (l == "fp8_bmm") {
    ASSIGN_OR_RETURN(const PwFp8BmmGeometry g, Fp8Geometry(key));
    return std::vector<EntryLaunch>{{"pw_fp8_bmm", kBlock, Unsigned(g.smem_bytes)}};
  }
  if (l == "norm_rope_insert") return std::vector<EntryLaunch>{{"pw_norm_rope_insert", kBlock, 0}};
  if (l == "topk_decode") {  // at most: a launch gives what its longest row needs
    ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
    const unsigned cache = Unsigned(4 * pw_topk_decode_cache_cap(SharedMemoryKib(arch)));
    std::vector<EntryLaunch> e = {{"pw_topk_decode", kBlock, cache}};
    if (Clusters(arch)) e.push_back({"pw_topk_decode_cluster", kBlock, cache});
    return e;
  }
  if (l == "topk_prefill") {
    std::vector<EntryLaunch> e = {{"pw_topk_prefill", kBlock, 0}};
    if (KeyInt(key, "strips") > 1) e.push_back({"pw_topk_prefill_merge", kBlock, 0});
    ASSIGN_OR_RETURN(const bool clusters, TopkPrefillClusters(key));
    if (clusters) e.push_back({"pw_topk_prefill_cluster", kBlock, 0});
    return e;
  }
  // index_prefill where the heads are the GEMMs' M is index_decode's kernel (index_prefill.hip).
  if (l == "index_decode" || l == "index_prefill") {
    ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
    if (l == "index_prefill" && IndexPrefillWg(key, arch)) {
      const PwIndexWgGeometry g = pw_index_prefill_wg_geometry(
          static_cast<int>(KeyInt(key, "index_heads")),
          static_cast<int>(KeyInt(key, "index_head_dim")), WarpWidth(arch));
      return std::vector<EntryLaunch>{
          {"pw_index_prefill", Unsigned(g.threads), Unsigned(g.smem_bytes)}};
    }
    const bool heads_m = IndexDecodeHeadsM(key, arch);
    if (l == "index_prefill" && !heads_m) {
      ASSIGN_OR_RETURN(const PwIndexGeometry g, IndexGeometry(key));
      return std::vector<EntryLaunch>{
          {"pw_index_prefill", Unsigned(g.threads), Unsigned(g.smem_bytes)}};
    }
    const PwIndexDecodeGeometry g =
        pw_index_decode_geometry(static_cast<int>(KeyInt(key, "index_heads")),
                                 static_cast<int>(KeyInt(key, "index_head_dim")), WarpWidth(arch),
                                 SharedMemoryKib(arch), heads_m);
    return std::vector<EntryLaunch>{{l == "index_decode" ? "pw_index_decode" : "pw_index_prefill",
                                     Unsigned(g.threads), Unsigned(g.smem_bytes)}};
  }
  if (l == "sparse_prefill" || l == "sparse_decode") {
    ASSIGN_OR_RETURN(const PwSparseGeometry g, SparseGeometry(key));
    const bool decode = l == "sparse_decode";
    std::vector<EntryLaunch> e = {{decode ? "pw_sparse_decode" : "pw_sparse_prefill",
                                   Unsigned(g.threads), Unsigned(g.smem_bytes)}};
    ASSIGN_OR_RETURN(const int64_t combined, SparseWorkspaceSplits(key));
    if (combined > 0) {
      e.push_back({"pw_sparse_decode_combine", PW_SPARSE_COMBINE_THREADS, 0, true});
    }
    return e;
  }
  return absl::InvalidArgumentError(StrCat("no launch code for launcher \"", l, "\""));
}

absl::Status LaunchFp8Bmm(Gpu& gpu, void* module, const Key& key, const Fp8BmmArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const PwFp8BmmGeometry g, Fp8Geometry(key));
  // The kernel reads X and W and writes Y 16 bytes at a time.
  RETURN_IF_ERROR(CheckAligned("fp8_bmm", {{"x", a.x, 16}, {"w", a.w, 16}, {"y", a.y, 16}}));
  const int64_t exact = KeyInt(key, "m_exact");
  const int64_t rows = exact > 0 ? exact : KeyInt(key, "block_m");
  const int64_t batch = KeyInt(key, "batch"), n = KeyInt(key, "n");
  if (a.m <= 0) return absl::OkStatus();  // no rows (a grid of 0 is an error)
  Fp8BmmArgs v = a;
  Dim3 grid = {CeilDiv(n, g.cols), static_cast<unsigned>(batch), CeilDiv(a.m, rows)};
  if (g.persistent) {
    // One block an SM over the tiles (its shared memory allows no second).
    const PwFp8BmmTiles tiles =
        pw_fp8_bmm_tiles(a.m, static_cast<int>(batch), static_cast<int>(n), g.cols);
    grid = {static_cast<unsigned>(std::min(tiles.total, gpu.MultiprocessorCount())), 1, 1};
  }
  return Run(gpu, module, e[0], grid, {&v.x, &v.w, &v.w_scale, &v.y, &v.m});
}

absl::Status LaunchNormRopeInsert(Gpu& gpu, void* module, const Key& key,
                                  const NormRopeInsertArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  if (a.num_tokens <= 0) return absl::OkStatus();  // nothing to insert (a grid of 0 is an error)
  NormRopeInsertArgs v = a;
  // small: a block a token; large: a warp a token, persistent (norm_rope_insert.hip).
  const unsigned grid = KeyInt(key, "small")
                            ? static_cast<unsigned>(a.num_tokens)
                            : std::min<unsigned>(CeilDiv(a.num_tokens, kBlock / WarpWidth(arch)),
                                                 PW_NORM_ROPE_MAX_BLOCKS);
  return Run(gpu, module, e[0], {grid, 1, 1},
             {&v.latent, &v.rope, &v.index_key, &v.gamma, &v.pos, &v.slot, &v.g_kv, &v.g_idx,
              &v.num_tokens, &v.kv_cache, &v.index_cache});
}

absl::Status LaunchIndexPrefill(Gpu& gpu, void* module, const Key& key, const IndexArgs& a) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  const bool wg = IndexPrefillWg(key, arch);
  // Where its kernel is index_decode's (index_prefill.hip), so is its launch.
  if (!wg && IndexDecodeHeadsM(key, arch)) return LaunchIndexDecode(gpu, module, key, a);
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const PwIndexGeometry g, IndexGeometry(key));
  // The warpgroup kernel reads Q 16 bytes and the index records 8 bytes at a time
  // (index_wg.h); it scores 4 rows a block.
  if (wg) {
    RETURN_IF_ERROR(
        CheckAligned(key.launcher, {{"q", a.q, 16}, {"index_cache", a.index_cache, 8}}));
  }
  const int rows_a_block = wg ? kPwIndexWgRows : g.rows;
  IndexArgs v = a;
  const unsigned chunks = KeyInt(key, "large") ? CeilDiv(a.stride, PW_INDEX_PREFILL_CHUNK) : 1;
  if (a.rows <= 0) return absl::OkStatus();  // no rows (a grid of 0 is an error)
  return Run(gpu, module, e[0], {CeilDiv(a.rows, rows_a_block), chunks, 1},
             {&v.q, &v.w, &v.row_req, &v.visible, &v.block_table, &v.max_blocks, &v.block_size,
              &v.index_cache, &v.g_idx, &v.out, &v.stride, &v.rows});
}

absl::Status LaunchIndexDecode(Gpu& gpu, void* module, const Key& key, const IndexArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  // The kernel reads Q 16 bytes and the index records 8 bytes at a time (index_decode.hip); the
  // error names the key's launcher (index_prefill's too, where the kernel is this one).
  RETURN_IF_ERROR(CheckAligned(key.launcher, {{"q", a.q, 16}, {"index_cache", a.index_cache, 8}}));
  IndexArgs v = a;
  // Keys as M: the row tiles by the position slices; heads as M: a row a block (index_geometry.h).
  const bool heads_m = IndexDecodeHeadsM(key, arch);
  const unsigned x =
      heads_m ? static_cast<unsigned>(a.rows) : CeilDiv(a.rows, KeyInt(key, "rows_tile"));
  const int slices = pw_index_decode_grid_y(a.stride, a.rows, gpu.MultiprocessorCount(), heads_m);
  return Run(gpu, module, e[0], {x, static_cast<unsigned>(slices), 1},
             {&v.q, &v.w, &v.row_req, &v.visible, &v.block_table, &v.max_blocks, &v.block_size,
              &v.index_cache, &v.g_idx, &v.out, &v.stride, &v.rows});
}

size_t TopkWorkspaceBytes(const Key& key, int rows) {
  const int64_t strips = KeyInt(key, "strips");
  const absl::StatusOr<bool> clusters = TopkPrefillClusters(key);
  if (strips <= 1 || (clusters.ok() && *clusters)) return 0;  // a cluster a row: none
  return static_cast<size_t>(rows) * strips * KeyInt(key, "topk") * 4;
}

absl::Status LaunchTopkPrefill(Gpu& gpu, void* module, const Key& key, const TopkArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const bool clusters, TopkPrefillClusters(key));
  if (clusters) {
    const unsigned strips = static_cast<unsigned>(KeyInt(key, "strips"));
    return TopkRowPieces(a, static_cast<int>(KeyInt(key, "topk")), [&](TopkArgs p) {
      return Run(gpu, module, e.back(), {strips, static_cast<unsigned>(p.rows), 1},
                 {&p.scores, &p.visible, &p.stride, &p.out});
    });
  }
  TopkArgs v = a;
  RETURN_IF_ERROR(Run(gpu, module, e[0],
                      {static_cast<unsigned>(a.rows),
                       static_cast<unsigned>(std::max<int64_t>(1, KeyInt(key, "strips"))), 1},
                      {&v.scores, &v.visible, &v.stride, &v.out, &v.ws_key, &v.ws_idx}));
  if (e.size() < 2) return absl::OkStatus();
  return Run(gpu, module, e[1], {static_cast<unsigned>(a.rows), 1, 1},
             {&v.ws_key, &v.ws_idx, &v.out});
}

absl::Status LaunchTopkDecode(Gpu& gpu, void* module, const Key& key, const TopkArgs& a) {
  ASSIGN_OR_RETURN(std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  if (a.stride < 0 || a.stride > std::numeric_limits<int>::max() - 256) {
    return absl::InvalidArgumentError(
        StrCat("topk_decode: stride ", a.stride, ": must be from 0 to 2^31 - 257 scores"));
  }
  // A row's blocks (a cluster on sm_90, where it pays) and the cache each needs for its slice of
  // the longest row.
  const bool cluster = Clusters(arch) && pw_topk_decode_cluster_pays(a.rows, a.stride);
  const int blocks = pw_topk_decode_blocks(cluster);
  EntryLaunch& entry = e[cluster ? 1 : 0];
  int cache_keys = pw_topk_decode_cache_keys(SharedMemoryKib(arch),
                                             pw_topk_slice(static_cast<int>(a.stride), blocks));
  entry.shared_bytes = Unsigned(4 * cache_keys);
  return TopkRowPieces(a, static_cast<int>(KeyInt(key, "topk")), [&](TopkArgs p) {
    return Run(gpu, module, entry,
               {static_cast<unsigned>(blocks), static_cast<unsigned>(p.rows), 1},
               {&p.scores, &p.visible, &p.stride, &p.out, &cache_keys});
  });
}

size_t SparseWorkspaceBytes(const Key& key, int rows) {
  return SparseLseWorkspaceBytes(key, rows) * KeyInt(key, "kv_lora_rank");
}

size_t SparseLseWorkspaceBytes(const Key& key, int rows) {
  return static_cast<size_t>(rows) * KeyInt(key, "heads") *
         SparseWorkspaceSplits(key).value_or(KeyInt(key, "splits")) * sizeof(float);
}

absl::Status LaunchSparsePrefill(Gpu& gpu, void* module, const Key& key, const SparseArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const PwSparseGeometry g, SparseGeometry(key));
  SparseArgs v = a;
  return Run(gpu, module, e[0],
             {static_cast<unsigned>(a.rows), CeilDiv(KeyInt(key, "heads"), g.head_tile), 1},
             {&v.q_latent, &v.q_rope, &v.topk, &v.row_req, &v.block_table, &v.max_blocks,
              &v.block_size, &v.kv_cache, &v.g_kv, &v.scale, &v.out, &v.lse});
}

absl::Status LaunchSparseDecode(Gpu& gpu, void* module, const Key& key, const SparseArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> e, EntryLaunches(key));
  ASSIGN_OR_RETURN(const PwSparseGeometry g, SparseGeometry(key));
  SparseArgs v = a;
  const int64_t heads = KeyInt(key, "heads");
  RETURN_IF_ERROR(
      Run(gpu, module, e[0],
          {static_cast<unsigned>(a.rows), CeilDiv(heads, g.head_tile),
           static_cast<unsigned>(std::max<int64_t>(1, KeyInt(key, "splits")))},
          {&v.q_latent, &v.q_rope, &v.topk, &v.row_req, &v.block_table, &v.max_blocks,
           &v.block_size, &v.kv_cache, &v.g_kv, &v.scale, &v.out, &v.lse, &v.ws_o, &v.ws_lse}));
  if (e.size() < 2) return absl::OkStatus();
  return Run(gpu, module, e[1], {static_cast<unsigned>(a.rows), static_cast<unsigned>(heads), 1},
             {&v.ws_o, &v.ws_lse, &v.out, &v.lse});
}

}  // namespace prewarm
