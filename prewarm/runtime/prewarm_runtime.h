/* prewarm's serving-side runtime, for C and any language with a C FFI.
 *
 * A serving process opens the cache once, then asks for the kernels of each scheduler step:
 *   prewarm_runtime* rt;
 *   char err[512];
 *   if (prewarm_runtime_open("/cache", NULL, 4, 1, &rt, err, sizeof err) != 0) { ... err ... }
 *   void* modules[8];
 *   size_t n;
 *   prewarm_runtime_get(rt, "sparse_decode",
 *                       "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":4097}]}",
 *                       modules, 8, &n, err, sizeof err);
 *   ... launch with the CUDA driver / HIP module API (entry names: kernels/ sources) ...
 *   prewarm_runtime_close(rt);
 * A module stays loaded until close. Not thread-safe: one runtime per thread or a lock.
 * Return codes: 0 ok; PREWARM_ENOGPU no GPU or driver; PREWARM_EINVAL bad argument;
 * PREWARM_EMISS a miss in strict mode (the message names launcher, key and cache directory);
 * PREWARM_EFAIL anything else. Messages are NUL-terminated and truncated to err_len. */
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

typedef struct prewarm_runtime prewarm_runtime;

typedef struct {
  long long hits;        /* keys found in the cache */
  long long misses;      /* keys not in the cache */
  long long compiles;    /* in-request compiles (non-strict misses) */
  long long memory_hits; /* later uses of a loaded key */
  double load_seconds;
  double compile_seconds;
} prewarm_runtime_stats;

/* model_config: an HF config.json, or NULL for the embedded example. strict: 1 = a miss is an
 * error, never a compile. */
int prewarm_runtime_open(const char* cache_dir, const char* model_config, int tensor_parallel_size,
                         int strict, prewarm_runtime** out, char* err, size_t err_len);

/* The modules of `launcher` in one step (trace JSON, DESIGN.md section 5), in key order. */
int prewarm_runtime_get(prewarm_runtime* rt, const char* launcher, const char* step_json,
                        void** modules, size_t max_modules, size_t* count, char* err,
                        size_t err_len);

void prewarm_runtime_get_stats(const prewarm_runtime* rt, prewarm_runtime_stats* out);

void prewarm_runtime_close(prewarm_runtime* rt);

#ifdef __cplusplus
}
#endif

#endif /* PREWARM_RUNTIME_PREWARM_RUNTIME_H_ */
