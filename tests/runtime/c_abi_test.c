/* The C ABI compiles as C (C99) and links against libprewarm_runtime.so.
 *   c_abi_test                 open on this machine: without a GPU, PREWARM_ENOGPU saying why;
 *                              with one, a strict miss on an empty cache is PREWARM_EMISS.
 *   c_abi_test CACHE ARCH      a runtime without a GPU (device -1) over a cache `prewarm run`
 *                              filled for ARCH: info, preload, a NULL argument named, a launch
 *                              refused for want of a GPU after its key was found.
 *   c_abi_test --layout        sizeof and offsetof of every structure, as JSON, for the Python
 *                              package's ctypes mirror (tests/python/test_runtime.py). */
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
  printf("}}\n");
}

static int Expect(int cond, const char* what, const char* err) {
  printf("%s: %s%s%s\n", cond ? "ok" : "FAILED", what, err[0] ? ": " : "", err);
  return cond ? 0 : 1;
}

/* device -1 over a filled cache. */
static int WithoutGpu(const char* cache, const char* arch) {
  prewarm_runtime_options o;
  memset(&o, 0, sizeof o);
  o.cache_dir = cache;
  o.arch = arch;
  o.strict = 1;
  o.device = -1;
  prewarm_runtime* rt = NULL;
  char err[1024] = "";
  int failed = 0;
  int rc = prewarm_runtime_open_with(&o, &rt, err, sizeof err);
  if (Expect(rc == PREWARM_OK, "open with device -1", err)) return 1;
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
  failed += Expect(rc == PREWARM_ENOGPU && strstr(err, "splits=16") != NULL &&
                       strstr(err, "without a GPU") != NULL,
                   "a launch names its key, then refuses for want of a GPU", err);
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

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--layout") == 0) {
    Layout();
    return 0;
  }
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
