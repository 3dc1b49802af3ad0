// The immutable configuration main builds from flags and the environment. Values are still the
// user's text where a later step validates them (limits, arch), so every error can name both
// the value and where it came from.
#ifndef PREWARM_CLI_CONFIG_H_
#define PREWARM_CLI_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "prewarm/limits/limits.h"

namespace prewarm {

enum class OutputFormat { kTable, kJson };

struct Config {
  std::string command;           // run, plan, verify, pack, inspect, replay, gc, probe
  LimitValues explicit_limits;   // from flags and PREWARM_* variables, with origins
  std::string vllm_args;         // the server's command line, "" if none
  std::string vllm_args_origin;  // "--vllm-args" or "PREWARM_VLLM_ARGS"
  std::string model_config;      // path, "" for the embedded example
  std::string gpu_memory_gib;    // the GPU's memory for vLLM's batch defaults, "" from the arch
  std::string gpu_memory_gib_origin;
  std::string gpu_name;  // the GPU's name as vLLM reads it (its A100 rule), "" when not given
  std::string gpu_name_origin;
  std::string arch = "auto";
  std::string arch_origin;  // "--arch", "PREWARM_ARCH", or "" when not given
  OutputFormat format = OutputFormat::kTable;
  std::string trace;               // replay: JSON Lines file
  bool strict = false;             // replay: a miss is a failure
  std::string cache_dir;           // the cache root
  std::string manifest;            // run: where the manifest goes (the default is filled in)
  bool manifest_in_cache = false;  // the default: {cache}/prewarm/, written through descriptors
  int jobs = 1;                    // run: compile workers
  int shard_index = 0;             // run: this pod's shard of the plan ...
  int shard_count = 1;             // ... out of this many
  double compile_timeout_s = 600;
  int64_t compile_memory_mb = 0;  // run: RLIMIT_AS of each compile worker, 0: none
  double progress_interval_s = 5;
  bool quiet = false;    // run: no progress lines
  bool dry_run = false;  // gc: list, remove nothing
  bool stale = false;    // gc: also remove directories of other manager keys
  // run: the servers. They run with --serve, or during the run when an address was given.
  bool serve = false;
  std::string metrics_address = "0.0.0.0:9400";
  std::string grpc_address = "0.0.0.0:9401";
  bool metrics_address_given = false;
  bool grpc_address_given = false;
  double verify_interval_s = 60;
  std::string pushgateway;  // "http://host:port", "" for none
  // The Pushgateway grouping key beyond job="prewarm": (label, value) pairs, in order.
  std::vector<std::pair<std::string, std::string>> pushgateway_group;
  std::vector<std::string> paths;  // inspect: the entries
  // pack
  std::string tag;     // the image reference, REPOSITORY[:TAG]
  std::string output;  // the OCI image layout to write, "" for none
  bool push = false;   // copy the image to its registry (skopeo)
  // probe
  std::string probe_addr;
  std::string probe_service = "prewarm";
  double probe_timeout_s = 1;
};

// Process exit codes (docs/cli.md, "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitBadInput = 2;

}  // namespace prewarm

#endif  // PREWARM_CLI_CONFIG_H_
