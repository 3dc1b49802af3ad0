// How to launch MiniMax-M3's indexer-side msa_* launchers (docs/kernels.md): msa_norm_rope_insert,
// msa_index_prefill, msa_index_decode, msa_topk_prefill and msa_topk_decode. Entry names, grids,
// block sizes, dynamic shared memory and argument order, matching the comments at the top of each
// kernels/nvfp4_msa/ file and its geometry header. The key decides the compile-time part (small,
// large, rows_tile, strips, the shape); the arguments carry the run-time sizes. Nothing here
// allocates device memory: workspaces are the caller's, sized by the *WorkspaceBytes helpers.
//
// Every Launch* returns InvalidArgument naming the bad value (a pointer the kernel reads in
// 16-byte units that is not 16-byte aligned, a stride the variant cannot cover) before launching
// anything; 0 rows or tokens launch nothing.
#ifndef PREWARM_RUNTIME_MSA_INDEX_LAUNCH_H_
#define PREWARM_RUNTIME_MSA_INDEX_LAUNCH_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prewarm/launchers/key.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/launch.h"

namespace prewarm {

// The launches of the five launchers' keys, in order (msa_topk_prefill with strips > 1: the strip
// kernel, then the merge). InvalidArgument for another launcher or a key without its arch.
absl::StatusOr<std::vector<EntryLaunch>> MsaIndexEntryLaunches(const Key& key);

// T tokens: q[T][Hq_r][D], k and v [T][Hkv_r][D], index_q[T][Hi_r][Di], index_k[T][Di] (bf16);
// the norm weights (float32, D or Di); pos[T] (int32), slot[T] (int64, -1: no cache write).
// Out: q_out, index_q_out (bf16, the inputs' shapes), kv_cache and index_cache (msa_layout.h).
// Every tensor but pos, slot and the norm weights 16-byte aligned (else InvalidArgument naming it).
struct MsaNormRopeInsertArgs {
  DevicePtr q = 0, k = 0, v = 0, index_q = 0, index_k = 0;
  DevicePtr q_norm = 0, k_norm = 0, index_q_norm = 0, index_k_norm = 0;
  DevicePtr pos = 0, slot = 0;
  float eps = 1e-6f, theta = 5e6f, k_scale = 1, v_scale = 1;
  int num_tokens = 0;
  DevicePtr q_out = 0, index_q_out = 0, kv_cache = 0, index_cache = 0;
};
absl::Status LaunchMsaNormRopeInsert(Gpu& gpu, void* module, const Key& key,
                                     const MsaNormRopeInsertArgs& a);

// `rows` query rows: index_q[rows][Hi_r][Di] (bf16), row_req[rows] (the block_table row of each),
// visible[rows] (keys each sees), block_table[requests][max_blocks], index_cache (bf16 pages).
// Out: scores[Hi_r][rows][stride] (float32): every entry written, -inf past each row's blocks;
// stride >= the largest ceil(visible / 128).
// msa_index_decode's fused top-k: with `topk` given, the same launch also writes
// topk[Hi_r][rows][topk_blocks] as msa_topk_decode would from those scores (the key's
// topk_blocks, init_blocks, local_blocks), so the caller skips msa_topk_decode. `workspace`
// (MsaIndexDecodeWorkspaceBytes) holds a counter a row: it must be zero before the first such
// launch, and each launch leaves it zero (the last block of a run resets its counter), so one
// zeroed workspace serves every later launch on its stream. Without topk neither is read.
struct MsaIndexArgs {
  DevicePtr index_q = 0, row_req = 0, visible = 0, block_table = 0;
  int max_blocks = 0;
  DevicePtr index_cache = 0, scores = 0;
  int stride = 0, rows = 0;
  DevicePtr topk = 0, workspace = 0;  // msa_index_decode's fused top-k only
};
absl::Status LaunchMsaIndexPrefill(Gpu& gpu, void* module, const Key& key, const MsaIndexArgs& a);
absl::Status LaunchMsaIndexDecode(Gpu& gpu, void* module, const Key& key, const MsaIndexArgs& a);
// Bytes of msa_index_decode's workspace for `rows` rows (its fused top-k's counters; 0 for none).
size_t MsaIndexDecodeWorkspaceBytes(int rows);

// scores[heads][rows][stride] (the index kernels' output), visible[rows]. Out: topk[heads][rows]
// [topk_blocks] (int32 block ids, ascending, -1 padded).
struct MsaTopkArgs {
  DevicePtr scores = 0, visible = 0;
  int stride = 0, rows = 0, heads = 0;
  DevicePtr topk = 0;
  DevicePtr workspace = 0;  // msa_topk_prefill with strips > 1: MsaTopkWorkspaceBytes
};
// Bytes of msa_topk_prefill's workspace (0 when strips is 1): each strip's candidates, an order
// key and a block id each.
size_t MsaTopkWorkspaceBytes(const Key& key, int rows, int heads);
absl::Status LaunchMsaTopkPrefill(Gpu& gpu, void* module, const Key& key, const MsaTopkArgs& a);
absl::Status LaunchMsaTopkDecode(Gpu& gpu, void* module, const Key& key, const MsaTopkArgs& a);

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_MSA_INDEX_LAUNCH_H_
