/* prewarm's serving-side runtime, for C and any language with a C FFI (python/prewarm_runtime
 * wraps it with ctypes).
 *
 * A serving process opens the cache once, loads the planned kernels (the warm start), then
 * launches each call on its own stream:
 *   prewarm_runtime_options o = {0};
 *   o.cache_dir = "/cache";       (the rest from the manifest of the run that filled it)
 *   o.strict = 1;
 *   prewarm_runtime* rt;
 *   char err[512];
 *   if (prewarm_runtime_open_with(&o, &rt, err, sizeof err) != PREWARM_OK) { ... err ... }
 *   prewarm_runtime_preload(rt, NULL, err, sizeof err);
 *   prewarm_sparse_args a = {...};  (device pointers and sizes, docs/kernels.md)
 *   prewarm_runtime_sparse_decode(rt, &a, stream, err, sizeof err);
 *   prewarm_runtime_close(rt);
 * A launch picks its kernel from the values marked "key" below, by the same rules `prewarm plan`
 * enumerated, and allocates nothing: workspaces come from the caller
 * (prewarm_runtime_workspace), so launches can be captured in a CUDA graph once the kernels are
 * loaded (preload before capturing: a module load is not a stream operation). On Hopper (sm_90)
 * the split decodes' combine kernel (sparse_decode, msa_sparse_decode) is a programmatic dependent
 * of their split kernel (programmatic stream serialization: its blocks may start while the split
 * kernel runs, and wait for it), which a CUDA graph captures as a programmatic edge (a CUDA 12.3
 * driver or later); where the driver refuses that, the runtime falls back to ordinary launches.
 * Modules stay loaded until close. Not thread-safe: one runtime per thread or a lock.
 *
 * Return codes: 0 ok; PREWARM_ENOGPU no GPU or driver; PREWARM_EINVAL a bad argument, or a
 * launcher this cache's model and KV cache dtype never run (the message says why);
 * PREWARM_EMISS a miss in strict mode (the message names launcher, key and cache directory), or
 * a cache filled for other archs; PREWARM_EFAIL anything else; PREWARM_ENOCOMPILER the compiler
 * a runtime needs cannot be loaded (the message names it): a non-strict runtime compiles its
 * misses, and a strict one over a cache without a manifest needs it to name the entries.
 * Messages are NUL-terminated and truncated to err_len; err may be NULL. */
#ifndef PREWARM_RUNTIME_PREWARM_RUNTIME_H_
#define PREWARM_RUNTIME_PREWARM_RUNTIME_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PREWARM_OK 0
#define PREWARM_ENOGPU 1
#define PREWARM_EINVAL 2
#define PREWARM_EMISS 3
#define PREWARM_EFAIL 4
#define PREWARM_ENOCOMPILER 5

typedef struct prewarm_runtime prewarm_runtime;

typedef struct {
  const char* cache_dir; /* required */
  /* What the plan needs. NULL or 0: what the cache's manifest recorded ({cache_dir}/prewarm/
   * manifest.json, or its shards), else the embedded example, tp 1 and "auto". */
  const char* model_config;   /* an HF config.json */
  int tensor_parallel_size;   /* 0: unset */
  const char* kv_cache_dtype; /* vLLM's --kv-cache-dtype spelling */
  const char* arch;           /* NULL: the GPU's own */
  int strict;                 /* 1: a miss is an error, never a compile */
  int device;                 /* the CUDA/HIP device ordinal; -1: no GPU (needs arch): the
                                 runtime plans, checks and preloads entries (a pre-start check
                                 that the cache covers the plan), and a launch is ENOGPU */
} prewarm_runtime_options;

typedef struct {
  long long hits;        /* keys found in the cache */
  long long misses;      /* keys not in the cache */
  long long compiles;    /* in-request compiles (non-strict misses) */
  long long memory_hits; /* later uses of a loaded key */
  double load_seconds;
  double compile_seconds;
} prewarm_runtime_stats;

int prewarm_runtime_open_with(const prewarm_runtime_options* options, prewarm_runtime** out,
                              char* err, size_t err_len);

/* The same with positional options (device 0, the manifest's KV cache dtype). model_config NULL
 * and tensor_parallel_size 0: the manifest's. */
int prewarm_runtime_open(const char* cache_dir, const char* model_config, int tensor_parallel_size,
                         int strict, prewarm_runtime** out, char* err, size_t err_len);

/* What the runtime planned with, as JSON: {"arch", "gpu" (null without one), "strict", "source"
 * (the manifest or "options"), "shape": {family, heads_per_rank, kv_lora_rank, qk_rope_head_dim,
 * index_n_heads, index_head_dim, index_topk, ...} (an MSA model: {family "MSA", heads_per_rank,
 * kv_heads_per_rank, index_heads_per_rank, head_dim, index_dim, sparse_topk_blocks, ...}),
 * "limits": {...}, "launchers": [names it runs]}.
 * Returns the length the text needs (excluding NUL); writes at most buf_len bytes with the NUL. */
size_t prewarm_runtime_info(const prewarm_runtime* rt, char* buf, size_t buf_len);

/* Loads every planned kernel (the warm start); `loaded` (may be NULL) receives how many. */
int prewarm_runtime_preload(prewarm_runtime* rt, long long* loaded, char* err, size_t err_len);

/* The modules of `launcher` in one step (trace JSON, docs/keys.md), in key order. */
int prewarm_runtime_get(prewarm_runtime* rt, const char* launcher, const char* step_json,
                        void** modules, size_t max_modules, size_t* count, char* err,
                        size_t err_len);

void prewarm_runtime_get_stats(const prewarm_runtime* rt, prewarm_runtime_stats* out);

void prewarm_runtime_close(prewarm_runtime* rt);

/* ---- Launches. Pointers are device addresses (docs/kernels.md gives each tensor's layout); stream
 * is a cudaStream_t / hipStream_t, NULL for the default stream. rows 0 launches nothing. ---- */

/* Y[m][b][n] = X[m][b][:] . W[b][n][:] with X quantized to FP8 per 128-wide group. x, w, y
 * 16-byte aligned. */
typedef struct {
  const void* x; /* bf16 [m][batch][k] */
  const void* w; /* fp8 [batch][n][k] */
  void* y;       /* bf16 [m][batch][n] */
  float w_scale;
  int m;           /* key */
  int batch, n, k; /* key: one of the model's two GEMMs (q_absorb, v_up) */
} prewarm_fp8_bmm_args;
int prewarm_runtime_fp8_bmm(prewarm_runtime* rt, const prewarm_fp8_bmm_args* a, void* stream,
                            char* err, size_t err_len);

typedef struct {
  const void* latent;    /* bf16 [num_tokens][L] */
  const void* rope;      /* bf16 [num_tokens][Dr] */
  const void* index_key; /* bf16 [num_tokens][Di] */
  const void* gamma;     /* float [L] */
  const void* pos;       /* int32 [num_tokens] */
  const void* slot;      /* int64 [num_tokens]; -1 writes nothing */
  float g_kv, g_idx;     /* the NVFP4 global scales */
  int num_tokens;        /* key */
  void* kv_cache;        /* uint8 [blocks][block_size][L/2 + L/16 + 2 Dr] */
  void* index_cache;     /* uint8 [blocks][block_size][Di/2 + Di/16] */
} prewarm_norm_rope_insert_args;
int prewarm_runtime_norm_rope_insert(prewarm_runtime* rt, const prewarm_norm_rope_insert_args* a,
                                     void* stream, char* err, size_t err_len);

typedef struct {
  const void* q;           /* bf16 [rows][Hi][Di] */
  const void* w;           /* float [rows][Hi] */
  const void* row_req;     /* int32 [rows]: each row's request */
  const void* visible;     /* int32 [rows]: key positions each row sees */
  const void* block_table; /* int32 [requests][max_blocks] */
  int max_blocks, block_size;
  const void* index_cache;
  float g_idx;
  void* out; /* float [rows][stride] */
  int stride, rows;
  void* ws;               /* reserved (was index_decode's buffer): ignored, may be NULL */
  long long prefill_work; /* index_prefill key: sum over prefill requests of q_len * ctx */
  long long max_ctx; /* the largest context among the decode rows: no key reads it (index_decode's
                      * key, rows_tile, comes from rows); checked >= 0, else ignored */
} prewarm_index_args;
/* index_prefill: rows are the step's prefill rows (at most max_num_batched_tokens; the key on
 * Hopper at 64 index heads of 128 dims follows them, its kernel then the warpgroup one); on
 * NVIDIA with index heads a multiple of 16 and index head dim 128, q 16-byte and index_cache
 * 8-byte aligned (else an error naming it). */
int prewarm_runtime_index_prefill(prewarm_runtime* rt, const prewarm_index_args* a, void* stream,
                                  char* err, size_t err_len);
/* index_decode: q 16-byte and index_cache 8-byte aligned (else an error naming it). */
int prewarm_runtime_index_decode(prewarm_runtime* rt, const prewarm_index_args* a, void* stream,
                                 char* err, size_t err_len);

typedef struct {
  const void* scores;  /* float [rows][stride] */
  const void* visible; /* int32 [rows] */
  int stride, rows;
  void* out;    /* int32 [rows][Ktop]; ascending indices, -1 past the visible range */
  void* ws_key; /* topk_prefill with strips (but 2 to 8 on sm_90, a thread block cluster a row:
                   none): prewarm_runtime_workspace bytes each */
  void* ws_idx;
  long long ctx; /* topk_prefill key: the request's context */
} prewarm_topk_args;
int prewarm_runtime_topk_prefill(prewarm_runtime* rt, const prewarm_topk_args* a, void* stream,
                                 char* err, size_t err_len);
int prewarm_runtime_topk_decode(prewarm_runtime* rt, const prewarm_topk_args* a, void* stream,
                                char* err, size_t err_len);

typedef struct {
  const void* q_latent; /* bf16 [rows][Hr][L] */
  const void* q_rope;   /* bf16 [rows][Hr][Dr] */
  const void* topk;     /* int32 [rows][Ktop] */
  const void* row_req;  /* int32 [rows] */
  const void* block_table;
  int max_blocks, block_size;
  const void* kv_cache;
  float g_kv, scale; /* the cache's NVFP4 global scale, in (0, 512]; the scores' scale, > 0 */
  void* out;         /* bf16 [rows][Hr][L] */
  void* lse;         /* float [rows][Hr] */
  int rows;
  void* ws_o; /* sparse_decode with splits: prewarm_runtime_workspace bytes */
  void* ws_lse;
  long long ctx; /* sparse_prefill key: the request's context */
} prewarm_sparse_args;
int prewarm_runtime_sparse_prefill(prewarm_runtime* rt, const prewarm_sparse_args* a, void* stream,
                                   char* err, size_t err_len);
int prewarm_runtime_sparse_decode(prewarm_runtime* rt, const prewarm_sparse_args* a, void* stream,
                                  char* err, size_t err_len);

/* ---- MiniMax-M3's MSA launchers (an MSA cache: --kv-cache-dtype nvfp4 --block-size 128;
 * docs/kernels.md). Per rank: Hq query heads, Hkv KV heads, Hi = Hkv index heads, D = Di = 128, Kb
 * the blocks a row selects (prewarm_runtime_info's shape: heads_per_rank, kv_heads_per_rank,
 * index_heads_per_rank, head_dim, index_dim, sparse_topk_blocks). Caches (kernels/nvfp4_msa/
 * msa_layout.h): kv_cache uint8 [blocks][2][Hkv][128][D/2 + D/16] (K then V, NVFP4 with the
 * global scales k_scale and v_scale), index_cache bf16 [blocks][128][Di]; block_table int32
 * [requests][max_blocks], slot = block * 128 + offset. The rows of a call are query tokens:
 * row_req int32 [rows] each row's request (its block_table row), visible int32 [rows] the keys it
 * sees (position + 1), nb = ceil(visible / 128) its blocks. bf16, kv_cache and index_cache
 * 16-byte aligned. On an MLA cache (and the MLA launchers on an MSA cache) every launch is
 * PREWARM_EINVAL saying why. ---- */

/* Per token: Gemma RMSNorm per head (x * rsqrt(mean(x^2) + eps) * (1 + w)) of q, k, index_q and
 * index_k, NeoX RoPE (base theta) of their first 64 dims at pos; K and V quantized to NVFP4 and
 * index_k as bf16 written at slot (-1: nothing written; q_out and index_q_out still are). */
typedef struct {
  const void* q;            /* bf16 [num_tokens][Hq][D] */
  const void* k;            /* bf16 [num_tokens][Hkv][D] */
  const void* v;            /* bf16 [num_tokens][Hkv][D] */
  const void* index_q;      /* bf16 [num_tokens][Hi][Di] */
  const void* index_k;      /* bf16 [num_tokens][Di] */
  const void* q_norm;       /* float [D] */
  const void* k_norm;       /* float [D] */
  const void* index_q_norm; /* float [Di] */
  const void* index_k_norm; /* float [Di] */
  const void* pos;          /* int32 [num_tokens] */
  const void* slot;         /* int64 [num_tokens]; -1 writes nothing to the caches */
  float eps, theta;         /* the model's rms_norm_eps (1e-6) and rope_theta (5e6) */
  float k_scale, v_scale;   /* the NVFP4 global scales */
  int num_tokens;           /* key */
  void* q_out;              /* bf16 [num_tokens][Hq][D], normed and rotated */
  void* index_q_out;        /* bf16 [num_tokens][Hi][Di], normed and rotated */
  void* kv_cache;
  void* index_cache;
} prewarm_msa_norm_rope_insert_args;
int prewarm_runtime_msa_norm_rope_insert(prewarm_runtime* rt,
                                         const prewarm_msa_norm_rope_insert_args* a, void* stream,
                                         char* err, size_t err_len);

/* Block scores: scores[h][t][b] = max over the keys j < visible[t] of block b of
 * index_q[t][h] . index_k[j], for b < nb(t); -inf for nb(t) <= b < stride (every entry written). */
typedef struct {
  const void* index_q;     /* bf16 [rows][Hi][Di] (msa_norm_rope_insert's index_q_out) */
  const void* row_req;     /* int32 [rows] */
  const void* visible;     /* int32 [rows] */
  const void* block_table; /* int32 [requests][max_blocks] */
  int max_blocks;
  const void* index_cache;
  void* scores;           /* float [Hi][rows][stride] */
  int stride;             /* >= the largest nb among the rows */
  int rows;               /* msa_index_decode key */
  long long prefill_work; /* msa_index_prefill key: sum over the step's prefill requests of
                             q_len * ctx */
} prewarm_msa_index_args;
int prewarm_runtime_msa_index_prefill(prewarm_runtime* rt, const prewarm_msa_index_args* a,
                                      void* stream, char* err, size_t err_len);
int prewarm_runtime_msa_index_decode(prewarm_runtime* rt, const prewarm_msa_index_args* a,
                                     void* stream, char* err, size_t err_len);
/* msa_index_decode with msa_topk_decode fused into it: the scores as above, and in the same
 * launch topk (int32 [Hi][rows][Kb], as prewarm_msa_topk_args.topk) from them, so the caller
 * skips msa_topk_decode. workspace: prewarm_runtime_workspace("msa_index_decode", rows) bytes[0]
 * (a counter a row), zero before its first use (cudaMemset once); every launch leaves it zero, so
 * one allocation serves every later step of its stream (and a CUDA graph). */
int prewarm_runtime_msa_index_topk_decode(prewarm_runtime* rt, const prewarm_msa_index_args* a,
                                          void* topk, void* workspace, void* stream, char* err,
                                          size_t err_len);

/* Per row and index head, the Kb blocks with the highest score among its nb: the model's leading
 * (init) and trailing (local) blocks always, ties to the lower block id; ascending, -1 padded. */
typedef struct {
  const void* scores;  /* float [Hi][rows][stride] (the index launchers' output): finite up to
                          each row's nb, -inf past it */
  const void* visible; /* int32 [rows] */
  int stride;          /* >= the largest nb among the rows */
  int rows;            /* msa_topk_decode key */
  void* topk;          /* int32 [Hi][rows][Kb] */
  void* workspace;     /* msa_topk_prefill with strips: prewarm_runtime_workspace bytes[0] */
  long long ctx;       /* msa_topk_prefill key: the request's context */
} prewarm_msa_topk_args;
int prewarm_runtime_msa_topk_prefill(prewarm_runtime* rt, const prewarm_msa_topk_args* a,
                                     void* stream, char* err, size_t err_len);
int prewarm_runtime_msa_topk_decode(prewarm_runtime* rt, const prewarm_msa_topk_args* a,
                                    void* stream, char* err, size_t err_len);

/* GQA over the selected blocks: query head h of row t (KV head g = h / (Hq / Hkv)) attends over
 * the keys j < visible[t] of the blocks topk[g][t] (-1 skipped): o = softmax(scale q . k) v and
 * lse = ln sum exp(scale q . k). */
typedef struct {
  const void* q;       /* bf16 [rows][Hq][D] (msa_norm_rope_insert's q_out) */
  const void* topk;    /* int32 [Hkv][rows][Kb] (msa_topk_*'s output) */
  const void* row_req; /* int32 [rows] */
  const void* visible; /* int32 [rows] */
  const void* block_table;
  int max_blocks;
  const void* kv_cache;
  float k_scale, v_scale; /* the NVFP4 global scales */
  float scale;            /* the softmax scale, 1/sqrt(D) */
  void* o;                /* bf16 [rows][Hq][D] */
  void* lse;              /* float [rows][Hq] */
  int rows;               /* msa_sparse_decode key */
  void* ws_o;             /* msa_sparse_decode with splits: prewarm_runtime_workspace bytes */
  void* ws_lse;
  long long ctx; /* msa_sparse_prefill key: the request's context */
} prewarm_msa_sparse_args;
int prewarm_runtime_msa_sparse_prefill(prewarm_runtime* rt, const prewarm_msa_sparse_args* a,
                                       void* stream, char* err, size_t err_len);
int prewarm_runtime_msa_sparse_decode(prewarm_runtime* rt, const prewarm_msa_sparse_args* a,
                                      void* stream, char* err, size_t err_len);

/* The workspace bytes a launch needs (0 when its kernel needs none): topk_prefill (rows, ctx):
 * bytes[0] for ws_key and bytes[1] for ws_idx; sparse_decode (rows): bytes[0] for ws_o, bytes[1]
 * for ws_lse; msa_topk_prefill (rows, ctx): bytes[0] for workspace (bytes[1] 0); msa_sparse_decode
 * (rows): bytes[0] for ws_o, bytes[1] for ws_lse; msa_index_decode (rows): bytes[0] for the
 * workspace of prewarm_runtime_msa_index_topk_decode (the plain launch needs none). Every other
 * launcher: 0. `stride` is unused (index_decode's buffered variant, which needed it, was
 * removed). The split decodes' bytes are not monotone in `rows` (fewer splits as rows grow;
 * none at one split or a cluster's two): to size once, take the max over the row counts run. */
int prewarm_runtime_workspace(prewarm_runtime* rt, const char* launcher, int rows, long long ctx,
                              int stride, size_t bytes[2], char* err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* PREWARM_RUNTIME_PREWARM_RUNTIME_H_ */
