/* The C ABI compiles as C and links against libprewarm_runtime.so. Without a GPU, open must fail
 * with PREWARM_ENOGPU and say why; with one, a strict miss must be PREWARM_EMISS. */
#include <stdio.h>
#include <string.h>

#include "prewarm/runtime/prewarm_runtime.h"

int main(int argc, char** argv) {
  const char* cache = argc > 1 ? argv[1] : "/nonexistent/prewarm-c-abi-cache";
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
                           "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":10}]}", modules,
                           4, &n, err, sizeof err);
  prewarm_runtime_stats stats;
  prewarm_runtime_get_stats(rt, &stats);
  prewarm_runtime_close(rt);
  printf("get: %d (%s), misses %lld\n", rc, rc ? err : "ok", stats.misses);
  return rc == PREWARM_EMISS && stats.misses == 1 ? 0 : 1;
}
