// Metric names: append-only constants, registered here and nowhere else (docs/metrics.md).
// Labels never carry keys or hashes.
#ifndef PREWARM_SERVICE_METRIC_NAMES_H_
#define PREWARM_SERVICE_METRIC_NAMES_H_

namespace prewarm::metrics {

inline constexpr char kVariants[] = "prewarm_variants";               // gauge {launcher, state}
inline constexpr char kCompileSeconds[] = "prewarm_compile_seconds";  // histogram {launcher}
inline constexpr char kRunSeconds[] = "prewarm_run_seconds";          // gauge {phase}
inline constexpr char kCacheBytes[] = "prewarm_cache_bytes";          // gauge
inline constexpr char kEntriesRejected[] = "prewarm_cache_entries_rejected_total";  // {reason}
inline constexpr char kReady[] = "prewarm_ready";                                   // gauge 0/1
inline constexpr char kBuildInfo[] = "prewarm_build_info";  // gauge 1 {version, toolchain, arch}
// Planned variants whose code object spills registers or uses scratch, by launcher.
inline constexpr char kVariantsSpilling[] = "prewarm_variants_spilling";  // gauge {launcher}

// Compile-time buckets, 10 ms to 10 min.
inline constexpr double kCompileBuckets[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                             5,    10,    25,   50,  100,  250, 600};

}  // namespace prewarm::metrics

#endif  // PREWARM_SERVICE_METRIC_NAMES_H_
