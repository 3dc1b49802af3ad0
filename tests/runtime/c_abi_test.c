/* The C ABI compiles as C (C99) and links against libprewarm_runtime.so.
 *   c_abi_test                 open on this machine: without a GPU, PREWARM_ENOGPU saying why;
 *                              with one, a strict miss on an empty cache is PREWARM_EMISS.
 *   c_abi_test CACHE ARCH      a runtime without a GPU (device -1) over a cache `prewarm run`
 *                              filled for ARCH: info, preload, a NULL argument named, a launch
 *                              refused for want of a GPU after its key was found, a step out
 *                              of range refused by prewarm_runtime_get.
 *   c_abi_test --layout        sizeof and offsetof of every structure, as JSON, for the Python
 *                              package's ctypes mirror (tests/python/test_runtime.py).
 *   c_abi_test --index-prefill-rows CACHE
 *                              over a cache of DeepSeek-V3.2 (64 index heads) for sm_90, device
 *                              -1: index_prefill's key follows the call's rows (the step's
 *                              prefill rows), and rows past max_num_batched_tokens are refused. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "prewarm/runtime/prewarm_runtime.h"

#define FIELD(s, f) printf("%s\"%s\":%zu", first++ ? "," : "", #f, offsetof(s, f))

static void Layout(void) {
  int first = 0;
  printf("{\"options\":{\"size\":%zu,", sizeof(prewarm_runtime_options));
  FIELD(prewarm_runtime_options, cache_dir);
  FIELD(prewarm_runtime_options, model_config);
  FIELD(prewarm_runtime_options, tensor_parallel_size);
  FIELD(prewarm_runtime_options, kv_cache_dtype);
  FIELD(prewarm_runtime_options, arch);
  FIELD(prewarm_runtime_options, strict);
  FIELD(prewarm_runtime_options, device);
  first = 0;
  printf("},\"stats\":{\"size\":%zu,", sizeof(prewarm_runtime_stats));
  FIELD(prewarm_runtime_stats, hits);
  FIELD(prewarm_runtime_stats, misses);
  FIELD(prewarm_runtime_stats, compiles);
  FIELD(prewarm_runtime_stats, memory_hits);
  FIELD(prewarm_runtime_stats, load_seconds);
  FIELD(prewarm_runtime_stats, compile_seconds);
  first = 0;
  printf("},\"fp8_bmm\":{\"size\":%zu,", sizeof(prewarm_fp8_bmm_args));
  FIELD(prewarm_fp8_bmm_args, x);
  FIELD(prewarm_fp8_bmm_args, w);
  FIELD(prewarm_fp8_bmm_args, y);
  FIELD(prewarm_fp8_bmm_args, w_scale);
  FIELD(prewarm_fp8_bmm_args, m);
  FIELD(prewarm_fp8_bmm_args, batch);
  FIELD(prewarm_fp8_bmm_args, n);
  FIELD(prewarm_fp8_bmm_args, k);
  first = 0;
  printf("},\"norm_rope_insert\":{\"size\":%zu,", sizeof(prewarm_norm_rope_insert_args));
  FIELD(prewarm_norm_rope_insert_args, latent);
  FIELD(prewarm_norm_rope_insert_args, rope);
  FIELD(prewarm_norm_rope_insert_args, index_key);
  FIELD(prewarm_norm_rope_insert_args, gamma);
  FIELD(prewarm_norm_rope_insert_args, pos);
  FIELD(prewarm_norm_rope_insert_args, slot);
  FIELD(prewarm_norm_rope_insert_args, g_kv);
  FIELD(prewarm_norm_rope_insert_args, g_idx);
  FIELD(prewarm_norm_rope_insert_args, num_tokens);
  FIELD(prewarm_norm_rope_insert_args, kv_cache);
  FIELD(prewarm_norm_rope_insert_args, index_cache);
  first = 0;
  printf("},\"index\":{\"size\":%zu,", sizeof(prewarm_index_args));
  FIELD(prewarm_index_args, q);
  FIELD(prewarm_index_args, w);
  FIELD(prewarm_index_args, row_req);
  FIELD(prewarm_index_args, visible);
  FIELD(prewarm_index_args, block_table);
  FIELD(prewarm_index_args, max_blocks);
  FIELD(prewarm_index_args, block_size);
  FIELD(prewarm_index_args, index_cache);
  FIELD(prewarm_index_args, g_idx);
  FIELD(prewarm_index_args, out);
  FIELD(prewarm_index_args, stride);
  FIELD(prewarm_index_args, rows);
  FIELD(prewarm_index_args, ws);
  FIELD(prewarm_index_args, prefill_work);
  FIELD(prewarm_index_args, max_ctx);
  first = 0;
  printf("},\"topk\":{\"size\":%zu,", sizeof(prewarm_topk_args));
  FIELD(prewarm_topk_args, scores);
  FIELD(prewarm_topk_args, visible);
  FIELD(prewarm_topk_args, stride);
  FIELD(prewarm_topk_args, rows);
  FIELD(prewarm_topk_args, out);
  FIELD(prewarm_topk_args, ws_key);
  FIELD(prewarm_topk_args, ws_idx);
  FIELD(prewarm_topk_args, ctx);
  first = 0;
  printf("},\"sparse\":{\"size\":%zu,", sizeof(prewarm_sparse_args));
  FIELD(prewarm_sparse_args, q_latent);
  FIELD(prewarm_sparse_args, q_rope);
  FIELD(prewarm_sparse_args, topk);
  FIELD(prewarm_sparse_args, row_req);
  FIELD(prewarm_sparse_args, block_table);
  FIELD(prewarm_sparse_args, max_blocks);
  FIELD(prewarm_sparse_args, block_size);
  FIELD(prewarm_sparse_args, kv_cache);
  FIELD(prewarm_sparse_args, g_kv);
  FIELD(prewarm_sparse_args, scale);
  FIELD(prewarm_sparse_args, out);
  FIELD(prewarm_sparse_args, lse);
  FIELD(prewarm_sparse_args, rows);
  FIELD(prewarm_sparse_args, ws_o);
  FIELD(prewarm_sparse_args, ws_lse);
  FIELD(prewarm_sparse_args, ctx);
  first = 0;
  printf("},\"msa_norm_rope_insert\":{\"size\":%zu,", sizeof(prewarm_msa_norm_rope_insert_args));
  FIELD(prewarm_msa_norm_rope_insert_args, q);
  FIELD(prewarm_msa_norm_rope_insert_args, k);
  FIELD(prewarm_msa_norm_rope_insert_args, v);
  FIELD(prewarm_msa_norm_rope_insert_args, index_q);
  FIELD(prewarm_msa_norm_rope_insert_args, index_k);
  FIELD(prewarm_msa_norm_rope_insert_args, q_norm);
  FIELD(prewarm_msa_norm_rope_insert_args, k_norm);
  FIELD(prewarm_msa_norm_rope_insert_args, index_q_norm);
  FIELD(prewarm_msa_norm_rope_insert_args, index_k_norm);
  FIELD(prewarm_msa_norm_rope_insert_args, pos);
  FIELD(prewarm_msa_norm_rope_insert_args, slot);
  FIELD(prewarm_msa_norm_rope_insert_args, eps);
  FIELD(prewarm_msa_norm_rope_insert_args, theta);
  FIELD(prewarm_msa_norm_rope_insert_args, k_scale);
  FIELD(prewarm_msa_norm_rope_insert_args, v_scale);
  FIELD(prewarm_msa_norm_rope_insert_args, num_tokens);
  FIELD(prewarm_msa_norm_rope_insert_args, q_out);
  FIELD(prewarm_msa_norm_rope_insert_args, index_q_out);
  FIELD(prewarm_msa_norm_rope_insert_args, kv_cache);
  FIELD(prewarm_msa_norm_rope_insert_args, index_cache);
  first = 0;
  printf("},\"msa_index\":{\"size\":%zu,", sizeof(prewarm_msa_index_args));
  FIELD(prewarm_msa_index_args, index_q);
  FIELD(prewarm_msa_index_args, row_req);
  FIELD(prewarm_msa_index_args, visible);
  FIELD(prewarm_msa_index_args, block_table);
  FIELD(prewarm_msa_index_args, max_blocks);
  FIELD(prewarm_msa_index_args, index_cache);
  FIELD(prewarm_msa_index_args, scores);
  FIELD(prewarm_msa_index_args, stride);
  FIELD(prewarm_msa_index_args, rows);
  FIELD(prewarm_msa_index_args, prefill_work);
  first = 0;
  printf("},\"msa_topk\":{\"size\":%zu,", sizeof(prewarm_msa_topk_args));
  FIELD(prewarm_msa_topk_args, scores);
  FIELD(prewarm_msa_topk_args, visible);
  FIELD(prewarm_msa_topk_args, stride);
  FIELD(prewarm_msa_topk_args, rows);
  FIELD(prewarm_msa_topk_args, topk);
  FIELD(prewarm_msa_topk_args, workspace);
  FIELD(prewarm_msa_topk_args, ctx);
  first = 0;
  printf("},\"msa_sparse\":{\"size\":%zu,", sizeof(prewarm_msa_sparse_args));
  FIELD(prewarm_msa_sparse_args, q);
  FIELD(prewarm_msa_sparse_args, topk);
  FIELD(prewarm_msa_sparse_args, row_req);
  FIELD(prewarm_msa_sparse_args, visible);
  FIELD(prewarm_msa_sparse_args, block_table);
  FIELD(prewarm_msa_sparse_args, max_blocks);
  FIELD(prewarm_msa_sparse_args, kv_cache);
  FIELD(prewarm_msa_sparse_args, k_scale);
  FIELD(prewarm_msa_sparse_args, v_scale);
  FIELD(prewarm_msa_sparse_args, scale);
  FIELD(prewarm_msa_sparse_args, o);
  FIELD(prewarm_msa_sparse_args, lse);
  FIELD(prewarm_msa_sparse_args, rows);
  FIELD(prewarm_msa_sparse_args, ws_o);
  FIELD(prewarm_msa_sparse_args, ws_lse);
  FIELD(prewarm_msa_sparse_args, ctx);
  printf("}}\n");
}

static int Expect(int cond, const char* what, const char* err) {
  printf("%s: %s%s%s\n", cond ? "ok" : "FAILED", what, err[0] ? ": " : "", err);
  return cond ? 0 : 1;
}

/* The msa_* launchers without a GPU: a bad argument is EINVAL naming it; with every argument
 * good, on an MSA cache each picks its key (named) and answers PREWARM_ENOGPU, and on an MLA
 * cache each is EINVAL saying the model never runs it. */
static int MsaLaunches(prewarm_runtime* rt, int msa) {
  static char fake[64]; /* never read: a runtime without a GPU launches nothing */
  const int want = msa ? PREWARM_ENOGPU : PREWARM_EINVAL;
  const char* says = msa ? "without a GPU" : "does not run for this cache's model";
  char err[1024] = "";
  int failed = 0;
  int rc;

  prewarm_msa_norm_rope_insert_args in;
  memset(&in, 0, sizeof in);
  in.num_tokens = 3;
  rc = prewarm_runtime_msa_norm_rope_insert(rt, &in, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_norm_rope_insert: q must not") != NULL,
                   "msa_norm_rope_insert: a NULL tensor is named", err);
  in.q = in.k = in.v = in.index_q = in.index_k = fake;
  in.q_norm = in.k_norm = in.index_q_norm = in.index_k_norm = in.pos = in.slot = fake;
  in.q_out = in.index_q_out = in.kv_cache = in.index_cache = fake;
  in.eps = 1e-6f;
  in.theta = 5e6f;
  in.v_scale = 1;
  rc = prewarm_runtime_msa_norm_rope_insert(rt, &in, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "k_scale is 0; it must be finite") != NULL,
                   "msa_norm_rope_insert: a zero global scale is named", err);
  in.k_scale = 1;
  rc = prewarm_runtime_msa_norm_rope_insert(rt, &in, NULL, err, sizeof err);
  failed +=
      Expect(rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "small=true") != NULL),
             "msa_norm_rope_insert: its key, then no GPU (MLA: never runs)", err);
  in.num_tokens = -1;
  rc = prewarm_runtime_msa_norm_rope_insert(rt, &in, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "num_tokens is -1") != NULL,
                   "msa_norm_rope_insert: negative num_tokens are named", err);

  prewarm_msa_index_args ix;
  memset(&ix, 0, sizeof ix);
  ix.index_q = ix.row_req = ix.visible = ix.block_table = ix.index_cache = fake;
  ix.scores = fake;
  ix.rows = 4;
  ix.max_blocks = 1;
  rc = prewarm_runtime_msa_index_prefill(rt, &ix, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_index_prefill: stride is 0") != NULL,
                   "msa_index_prefill: stride 0 is named", err);
  ix.stride = 8;
  rc = prewarm_runtime_msa_index_prefill(rt, &ix, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "prefill_work is 0") != NULL,
                   "msa_index_prefill: prefill_work 0 is named", err);
  ix.prefill_work = 4000;
  rc = prewarm_runtime_msa_index_prefill(rt, &ix, NULL, err, sizeof err);
  failed += Expect(
      rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "large=false") != NULL),
      "msa_index_prefill: its key, then no GPU (MLA: never runs)", err);
  rc = prewarm_runtime_msa_index_decode(rt, &ix, NULL, err, sizeof err);
  failed += Expect(
      rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "rows_tile=4") != NULL),
      "msa_index_decode: its key, then no GPU (MLA: never runs)", err);
  /* The fused top-k: its key, with a topk output and a workspace (a counter a row) named. */
  rc = prewarm_runtime_msa_index_topk_decode(rt, &ix, fake, fake, NULL, err, sizeof err);
  failed += Expect(
      rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "rows_tile=4") != NULL),
      "msa_index_topk_decode: its key, then no GPU (MLA: never runs)", err);
  rc = prewarm_runtime_msa_index_topk_decode(rt, &ix, NULL, fake, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_index_decode: topk must not") != NULL,
                   "msa_index_topk_decode: a NULL topk is named", err);
  rc = prewarm_runtime_msa_index_topk_decode(rt, &ix, fake, NULL, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "needs a workspace") != NULL &&
                       strstr(err, "in workspace") != NULL,
                   "msa_index_topk_decode: a NULL workspace is named", err);
  ix.scores = NULL;
  rc = prewarm_runtime_msa_index_decode(rt, &ix, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_index_decode: scores must not") != NULL,
                   "msa_index_decode: a NULL output is named", err);

  prewarm_msa_topk_args tk;
  memset(&tk, 0, sizeof tk);
  tk.scores = tk.visible = fake;
  tk.rows = 2;
  tk.stride = 8;
  rc = prewarm_runtime_msa_topk_prefill(rt, &tk, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_topk_prefill: topk must not") != NULL,
                   "msa_topk_prefill: a NULL output is named", err);
  tk.topk = fake;
  rc = prewarm_runtime_msa_topk_prefill(rt, &tk, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_topk_prefill: ctx is 0") != NULL,
                   "msa_topk_prefill: ctx 0 is named", err);
  tk.ctx = 300000; /* 2344 blocks: 4 strips of 1024 */
  rc = prewarm_runtime_msa_topk_prefill(rt, &tk, NULL, err, sizeof err);
  failed +=
      Expect(rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "strips=4") != NULL),
             "msa_topk_prefill: its key, then no GPU (MLA: never runs)", err);
  rc = prewarm_runtime_msa_topk_decode(rt, &tk, NULL, err, sizeof err);
  failed += Expect(rc == want && strstr(err, says) != NULL &&
                       (!msa || strstr(err, "msa_topk_decode arch=") != NULL),
                   "msa_topk_decode: its key, then no GPU (MLA: never runs)", err);

  prewarm_msa_sparse_args sp;
  memset(&sp, 0, sizeof sp);
  sp.q = sp.topk = sp.row_req = sp.visible = sp.block_table = sp.kv_cache = fake;
  sp.o = sp.lse = fake;
  sp.rows = 2;
  sp.max_blocks = 4;
  sp.k_scale = sp.v_scale = 1;
  rc = prewarm_runtime_msa_sparse_prefill(rt, &sp, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_sparse_prefill: scale is 0") != NULL,
                   "msa_sparse_prefill: a zero softmax scale is named", err);
  sp.scale = 0.088f;
  sp.ctx = 900;
  rc = prewarm_runtime_msa_sparse_prefill(rt, &sp, NULL, err, sizeof err);
  failed +=
      Expect(rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "rounds=1") != NULL),
             "msa_sparse_prefill: its key, then no GPU (MLA: never runs)", err);
  sp.rows = 1;  // 8 splits (the cap) at tp 4 and tp 1: s^2 x 1 x G <= 256 for G 1 and 4
  rc = prewarm_runtime_msa_sparse_decode(rt, &sp, NULL, err, sizeof err);
  failed +=
      Expect(rc == want && strstr(err, says) != NULL && (!msa || strstr(err, "splits=8") != NULL),
             "msa_sparse_decode: its key, then no GPU (MLA: never runs)", err);
  sp.rows = -3;
  rc = prewarm_runtime_msa_sparse_decode(rt, &sp, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "msa_sparse_decode: rows is -3") != NULL,
                   "msa_sparse_decode: negative rows are named", err);
  size_t bytes[2];
  rc = prewarm_runtime_workspace(rt, "msa_index_decode", 3, 0, 0, bytes, err, sizeof err);
  failed += Expect(msa ? rc == PREWARM_OK && bytes[0] == 12 && bytes[1] == 0
                       : rc == PREWARM_EINVAL && strstr(err, says) != NULL,
                   "msa_index_decode: its fused top-k's workspace, a counter a row (MLA: never "
                   "runs)",
                   err);
  rc = prewarm_runtime_workspace(rt, "msa_sparse_decode", 2, 0, 0, bytes, err, sizeof err);
  /* 16 splits for 2 rows: an f32 lse per row, head and split, and D = 128 f32 of o for each. */
  failed += Expect(msa ? rc == PREWARM_OK && bytes[1] > 0 && bytes[1] % (2 * 16 * 4) == 0 &&
                             bytes[0] == bytes[1] * 128
                       : rc == PREWARM_EINVAL && strstr(err, says) != NULL,
                   "msa_sparse_decode: its workspace (MLA: never runs)", err);
  return failed;
}

/* device -1 over a filled cache. */
/* prewarm_runtime_get range-checks a step as replay does (issue 29 item 15): a step out of the
 * cache's limits, an integer past int64 and more requests than any max_num_seqs are EINVAL naming
 * the rule, never dispatched (q_len * ctx of the first would overflow int64). An in-range step
 * passes the check (and then needs a GPU). */
static int GetChecksTheStep(prewarm_runtime* rt, int msa) {
  /* A launcher of the cache's model: the step's checks come before its dispatch either way. */
  const char* step_launcher = msa ? "msa_topk_decode" : "fp8_bmm";
  const char* topk_prefill = msa ? "msa_topk_prefill" : "topk_prefill";
  const char* sparse_decode = msa ? "msa_sparse_decode" : "sparse_decode";
  char err[1024] = "";
  void* modules[8];
  size_t n = 0;
  int failed = 0;
  int rc =
      prewarm_runtime_get(rt, step_launcher,
                          "{\"requests\":[{\"phase\":\"prefill\",\"q_len\":4611686018427387904,"
                          "\"ctx\":4611686018427387904}]}",
                          modules, 8, &n, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "out of range") != NULL &&
                       strstr(err, "ctx 4611686018427387904 > max_model_len") != NULL,
                   "a step whose q_len * ctx overflows int64 is out of range, named", err);
  rc = prewarm_runtime_get(
      rt, step_launcher,
      "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":18446744073709551615}]}", modules,
      8, &n, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "requests[0].ctx: 18446744073709551615") &&
                       strstr(err, "below 2^63") != NULL,
                   "a ctx past int64 is named as given, not wrapped", err);
  rc = prewarm_runtime_get(rt, step_launcher,
                           "{\"requests\":[{\"phase\":\"decode\",\"q_len\":-4,\"ctx\":9}]}",
                           modules, 8, &n, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "q_len -4 < 1") != NULL,
                   "a negative q_len is named", err);
  {
    /* 70000 requests: more than the largest max_num_seqs (65536). */
    static const char head[] = "{\"requests\":[";
    static const char one[] = "{\"phase\":\"decode\",\"q_len\":1,\"ctx\":9},";
    static char big[sizeof head + 70000 * (sizeof one - 1) + 4];
    size_t at = 0;
    memcpy(big, head, sizeof head - 1);
    at = sizeof head - 1;
    for (int i = 0; i < 70000; ++i) {
      memcpy(big + at, one, sizeof one - 1);
      at += sizeof one - 1;
    }
    big[at - 1] = ']';
    big[at] = '}';
    big[at + 1] = '\0';
    rc = prewarm_runtime_get(rt, step_launcher, big, modules, 8, &n, err, sizeof err);
    failed += Expect(rc == PREWARM_EINVAL && strstr(err, "70000 requests, more than 65536") != NULL,
                     "a step of 70000 requests is refused, named", err);
  }
  rc = prewarm_runtime_get(rt, step_launcher,
                           "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":9}]}", modules,
                           8, &n, err, sizeof err);
  failed += Expect(rc != PREWARM_EINVAL, "an in-range step passes the check", err);
  /* The workspace sizes: key values past the cache's limits are refused, never a size that
   * wrapped (ctx 2^62 gave 0 bytes for topk_prefill's strips, and the kernel wrote past it). */
  size_t bytes[2] = {1, 1};
  rc = prewarm_runtime_workspace(rt, topk_prefill, 1000, 4611686018427387904LL, 0, bytes, err,
                                 sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "ctx 4611686018427387904 > max_model_len") &&
                       bytes[0] == 0,
                   "a workspace for a ctx past max_model_len is refused", err);
  rc = prewarm_runtime_workspace(rt, sparse_decode, 2147483647, 100, 0, bytes, err, sizeof err);
  failed += Expect(
      rc == PREWARM_EINVAL && strstr(err, "rows 2147483647 > max_num_batched_tokens") != NULL,
      "a workspace for more rows than a step holds is refused", err);
  rc = prewarm_runtime_workspace(rt, sparse_decode, 2, 0, 0, bytes, err, sizeof err);
  failed += Expect(rc == PREWARM_OK && bytes[0] > 0, "an in-range workspace has a size", err);
  return failed;
}

/* A strict runtime over `cache` for `arch` without a GPU (device -1); 1 (said why) if it fails. */
static int OpenWithoutGpu(const char* cache, const char* arch, prewarm_runtime** rt) {
  prewarm_runtime_options o;
  memset(&o, 0, sizeof o);
  o.cache_dir = cache;
  o.arch = arch;
  o.strict = 1;
  o.device = -1;
  char err[1024] = "";
  const int rc = prewarm_runtime_open_with(&o, rt, err, sizeof err);
  return Expect(rc == PREWARM_OK, "open with device -1", err);
}

static int WithoutGpu(const char* cache, const char* arch) {
  prewarm_runtime* rt = NULL;
  char err[1024] = "";
  int failed = 0;
  if (OpenWithoutGpu(cache, arch, &rt)) return 1;
  int rc;
  char info[4096];
  const size_t need = prewarm_runtime_info(rt, info, sizeof info);
  failed += Expect(need < sizeof info && strstr(info, "manifest.json") != NULL &&
                       strstr(info, "\"gpu\":null") != NULL,
                   "info names the manifest and no GPU", info);
  long long loaded = 0;
  rc = prewarm_runtime_preload(rt, &loaded, err, sizeof err);
  failed += Expect(rc == PREWARM_OK && loaded > 0, "preload checks every planned entry", err);
  prewarm_runtime_stats stats;
  prewarm_runtime_get_stats(rt, &stats);
  failed += Expect(stats.hits == loaded && stats.misses == 0 && stats.compiles == 0,
                   "stats count the entries read", "");
  const int msa = strstr(info, "\"family\":\"MSA\"") != NULL;
  failed += MsaLaunches(rt, msa);
  failed += GetChecksTheStep(rt, msa);
  prewarm_sparse_args a;
  memset(&a, 0, sizeof a);
  a.rows = 1;
  a.max_blocks = 1;
  a.block_size = 64;
  rc = prewarm_runtime_sparse_decode(rt, &a, NULL, err, sizeof err);
  failed += Expect(
      rc == PREWARM_EINVAL && strstr(err, "sparse_decode: q_latent must not be NULL") != NULL,
      "a NULL tensor is named", err);
  static char fake[64];
  a.q_latent = a.q_rope = a.topk = a.row_req = a.block_table = a.kv_cache = fake;
  a.out = a.lse = a.ws_o = a.ws_lse = fake;
  rc = prewarm_runtime_sparse_decode(rt, &a, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "sparse_decode: g_kv is 0") != NULL,
                   "a zero global scale is named", err);
  a.g_kv = 0.05f;
  a.scale = 1e30f * 1e30f; /* inf */
  rc = prewarm_runtime_sparse_decode(rt, &a, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "sparse_decode: scale is inf") != NULL,
                   "an infinite softmax scale is named", err);
  a.scale = 0.1f;
  rc = prewarm_runtime_sparse_decode(rt, &a, NULL, err, sizeof err);
  if (msa) {
    failed += Expect(rc == PREWARM_EINVAL && strstr(err, "does not run for this cache") != NULL,
                     "an MLA launcher on an MSA cache says it never runs", err);
  } else {
    failed += Expect(rc == PREWARM_ENOGPU && strstr(err, "splits=32") != NULL &&
                         strstr(err, "without a GPU") != NULL,
                     "a launch names its key, then refuses for want of a GPU", err);
  }
  a.rows = -3;
  rc = prewarm_runtime_sparse_decode(rt, &a, NULL, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "rows is -3") != NULL,
                   "negative rows are named", err);
  size_t bytes[2];
  rc = prewarm_runtime_workspace(rt, "sparse_decoder", 1, 0, 0, bytes, err, sizeof err);
  failed += Expect(rc == PREWARM_EINVAL && strstr(err, "unknown launcher") != NULL,
                   "an unknown launcher is named", err);
  prewarm_runtime_close(rt);
  return failed;
}

/* index_prefill on Hopper at 64 index heads: `large` while the call's rows (the step's prefill
 * rows) are below 1024 (Thresholds::index_prefill_wg_large_rows), whatever the prefill work; the
 * key is named in the no-GPU refusal. Rows past max_num_batched_tokens (8192 here) are out of
 * the plan's range. */
static int IndexPrefillRows(const char* cache) {
  prewarm_runtime* rt = NULL;
  char err[1024] = "";
  int failed = 0;
  if (OpenWithoutGpu(cache, "sm_90", &rt)) return 1;
  static char fake[64]; /* never read: a runtime without a GPU launches nothing */
  prewarm_index_args a;
  memset(&a, 0, sizeof a);
  a.q = a.w = a.row_req = a.visible = a.block_table = a.index_cache = fake;
  a.out = fake;
  a.max_blocks = 1;
  a.block_size = 64;
  a.stride = 8192;
  struct {
    int rows;
    long long work;
    int ok;
    const char* want;
    const char* what;
  } cases[] = {
      {1, 1, 1, "large=true", "1 prefill row: large"},
      {1023, 8192LL * 1023, 1, "large=true", "1023 rows of a long prompt: large"},
      {1024, 1024, 1, "large=false", "1024 rows: shared, however little work"},
      {8192, 8192LL * 8192, 1, "large=false", "8192 rows: shared"},
      {8193, 8193, 0, "tokens 8193 > max_num_batched_tokens 8192",
       "8193 rows: past max_num_batched_tokens"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    a.rows = cases[i].rows;
    a.prefill_work = cases[i].work;
    const int rc = prewarm_runtime_index_prefill(rt, &a, NULL, err, sizeof err);
    const int code_ok = cases[i].ok ? rc == PREWARM_ENOGPU : rc == PREWARM_EINVAL;
    if (!code_ok) printf("rc %d\n", rc);
    failed += Expect(code_ok && strstr(err, cases[i].want) != NULL, cases[i].what, err);
  }
  prewarm_runtime_close(rt);
  return failed;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--layout") == 0) {
    Layout();
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "--index-prefill-rows") == 0) return IndexPrefillRows(argv[2]);
  if (argc == 3) return WithoutGpu(argv[1], argv[2]);
  const char* cache = "/nonexistent/prewarm-c-abi-cache";
  prewarm_runtime* rt = NULL;
  char err[512];
  int rc = prewarm_runtime_open(cache, NULL, 1, 1, &rt, err, sizeof err);
  if (rc == PREWARM_ENOGPU) {
    printf("open without a GPU: %d (%s)\n", rc, err);
    return strstr(err, "GPU") != NULL ? 0 : 1;
  }
  if (rc != PREWARM_OK) {
    printf("unexpected open result %d: %s\n", rc, err);
    return 1;
  }
  void* modules[4];
  size_t n = 0;
  rc = prewarm_runtime_get(rt, "topk_decode",
                           "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":10}]}",
                           modules, 4, &n, err, sizeof err);
  prewarm_runtime_stats stats;
  prewarm_runtime_get_stats(rt, &stats);
  prewarm_runtime_close(rt);
  printf("get: %d (%s), misses %lld\n", rc, rc ? err : "ok", stats.misses);
  return rc == PREWARM_EMISS && stats.misses == 1 ? 0 : 1;
}
