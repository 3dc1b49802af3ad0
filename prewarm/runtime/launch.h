// How to launch each launcher's kernels: entry names, grids and argument order, one helper per
// launcher, matching the comments at the top of each kernels/ file. The key decides the
// compile-time part (rows_tile, splits, ...); the arguments carry the run-time sizes.
// Workspace sizes are given by the *WorkspaceBytes helpers (0 when a variant needs none).
#ifndef PREWARM_RUNTIME_LAUNCH_H_
#define PREWARM_RUNTIME_LAUNCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prewarm/launchers/key.h"
#include "prewarm/runtime/gpu.h"

namespace prewarm {

// One kernel launch of a key: its entry, block size and dynamic shared memory (LDS) in bytes.
struct EntryLaunch {
  const char* entry;  // a literal: the launch path allocates no strings
  unsigned threads = 0;
  unsigned shared_bytes = 0;
  // Launched as a programmatic dependent of the stream's previous launch (Gpu::Launch): only
  // entries that wait for it (pw_grid_dependency_wait, kernels/common/portability.h) before
  // reading what it wrote, and only right after a launch of the same key.
  bool programmatic = false;
};
// The launches a key's Launch* helper makes, in order (sparse_decode with splits: the split
// kernel, then the combine, but where the splits combine inside their cluster: sm_90 at 2). The one
// place block sizes and dynamic shared memory are decided; `prewarm verify` checks them against the
// compiled code object. InvalidArgument for an unknown launcher or a key without its arch.
absl::StatusOr<std::vector<EntryLaunch>> EntryLaunches(const Key& key);

struct Fp8BmmArgs {
  DevicePtr x = 0, w = 0, y = 0;  // bf16 [M][B][K], fp8 [B][N][K], bf16 [M][B][N]
  float w_scale = 1;
  int m = 0;
};
// InvalidArgument naming x, w or y if it is not 16-byte aligned.
absl::Status LaunchFp8Bmm(Gpu& gpu, void* module, const Key& key, const Fp8BmmArgs& a);

struct NormRopeInsertArgs {
  DevicePtr latent = 0, rope = 0, index_key = 0, gamma = 0, pos = 0, slot = 0;
  float g_kv = 1, g_idx = 1;
  int num_tokens = 0;
  DevicePtr kv_cache = 0, index_cache = 0;
};
absl::Status LaunchNormRopeInsert(Gpu& gpu, void* module, const Key& key,
                                  const NormRopeInsertArgs& a);

struct IndexArgs {
  DevicePtr q = 0, w = 0, row_req = 0, visible = 0, block_table = 0;
  int max_blocks = 0, block_size = 0;
  DevicePtr index_cache = 0;
  float g_idx = 1;
  DevicePtr out = 0;
  int stride = 0, rows = 0;
};
// Where the kernel is index_decode's (NVIDIA, index heads a multiple of 16, Di 128), as
// LaunchIndexDecode checks its pointers.
absl::Status LaunchIndexPrefill(Gpu& gpu, void* module, const Key& key, const IndexArgs& a);
// InvalidArgument naming q if it is not 16-byte aligned, index_cache if not 8-byte aligned.
absl::Status LaunchIndexDecode(Gpu& gpu, void* module, const Key& key, const IndexArgs& a);

struct TopkArgs {
  DevicePtr scores = 0, visible = 0;
  int stride = 0, rows = 0;
  DevicePtr out = 0;
  // topk_prefill with strips > 1 (but a cluster a row on sm_90, 2 to 8 strips: none):
  // TopkWorkspaceBytes each.
  DevicePtr ws_key = 0, ws_idx = 0;
};
size_t TopkWorkspaceBytes(const Key& key, int rows);
absl::Status LaunchTopkPrefill(Gpu& gpu, void* module, const Key& key, const TopkArgs& a);
absl::Status LaunchTopkDecode(Gpu& gpu, void* module, const Key& key, const TopkArgs& a);

struct SparseArgs {
  DevicePtr q_latent = 0, q_rope = 0, topk = 0, row_req = 0, block_table = 0;
  int max_blocks = 0, block_size = 0;
  DevicePtr kv_cache = 0;
  float g_kv = 1, scale = 1;
  DevicePtr out = 0, lse = 0;
  int rows = 0;
  DevicePtr ws_o = 0, ws_lse = 0;  // sparse_decode with splits > 1: SparseWorkspaceBytes
};
// Bytes of ws_o and of ws_lse (ws_o / kv_lora_rank): 0 when the key has no splits or its splits
// combine inside their cluster. Not monotone in rows (splits fall as rows grow): a caller sizing
// once takes the max over the row counts it runs.
size_t SparseWorkspaceBytes(const Key& key, int rows);
size_t SparseLseWorkspaceBytes(const Key& key, int rows);
absl::Status LaunchSparsePrefill(Gpu& gpu, void* module, const Key& key, const SparseArgs& a);
absl::Status LaunchSparseDecode(Gpu& gpu, void* module, const Key& key, const SparseArgs& a);

// A key's integer or boolean param (booleans as 0/1).
int64_t KeyInt(const Key& key, const std::string& name);
// The arch a key was compiled for; InvalidArgument when it has none or an unknown one.
absl::StatusOr<Arch> KeyArch(const Key& key);
// An NVIDIA arch's compute capability (sm_90: 90); none elsewhere.
std::optional<int64_t> NvidiaSm(const Arch& arch);

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_LAUNCH_H_
