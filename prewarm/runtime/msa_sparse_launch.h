// How to launch MiniMax-M3's MSA sparse attention (kernels/nvfp4_msa/msa_sparse_{prefill,decode}
// .hip; docs/kernels.md): entry names, grids and argument order. The key decides the
// compile-time part (rounds, splits, heads, kv_heads, topk_blocks); the arguments carry the
// run-time sizes. Nothing here allocates device memory: the caller passes the workspace of
// splits > 1, sized by MsaSparseWorkspaceBytes / MsaSparseLseWorkspaceBytes.
#ifndef PREWARM_RUNTIME_MSA_SPARSE_LAUNCH_H_
#define PREWARM_RUNTIME_MSA_SPARSE_LAUNCH_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prewarm/launchers/key.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/launch.h"

namespace prewarm {

// Tensors (row-major, device pointers; bf16 as 16-bit words): q [rows][heads][128] bf16, topk
// [kv_heads][rows][topk_blocks] int32, row_req and visible [rows] int32, block_table
// [requests][max_blocks] int32, kv the NVFP4 cache (kernels/nvfp4_msa/msa_layout.h); out o
// [rows][heads][128] bf16 and lse [rows][heads] f32. q, o, kv (and ws_o) 16-byte aligned.
struct MsaSparseArgs {
  DevicePtr q = 0, topk = 0, row_req = 0, visible = 0, block_table = 0;
  int max_blocks = 0;
  DevicePtr kv = 0;
  float k_scale = 1, v_scale = 1, scale = 1;
  DevicePtr o = 0, lse = 0;
  int rows = 0;
  DevicePtr ws_o = 0, ws_lse = 0;  // msa_sparse_decode with splits > 1
  // msa_sparse_prefill's warpgroup path (sm_90): the most blocks of its persistent grid (0: one a
  // multiprocessor), for a caller that leaves multiprocessors to other work, or an A/B.
  int max_grid = 0;
};

// The launches a key's helper makes, in order (decode with splits > 1: the split kernel, then
// the combine). InvalidArgument for a key of another launcher or without its arch.
absl::StatusOr<std::vector<EntryLaunch>> MsaSparseEntryLaunches(const Key& key);

// Bytes of ws_o ([rows][heads][splits][128] f32) and of ws_lse ([rows][heads][splits] f32) for
// `rows` decode rows: 0 when the key has splits 1 (or is not msa_sparse_decode).
size_t MsaSparseWorkspaceBytes(const Key& key, int rows);
size_t MsaSparseLseWorkspaceBytes(const Key& key, int rows);

// Launch on the Gpu's current stream; rows 0 launches nothing. InvalidArgument for a pointer
// that is not 16-byte aligned where the kernel reads 16 bytes at a time (named), or a missing
// workspace.
absl::Status LaunchMsaSparsePrefill(Gpu& gpu, void* module, const Key& key, const MsaSparseArgs& a);
absl::Status LaunchMsaSparseDecode(Gpu& gpu, void* module, const Key& key, const MsaSparseArgs& a);

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_MSA_SPARSE_LAUNCH_H_
