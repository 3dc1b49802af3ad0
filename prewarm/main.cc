// prewarm: flags -> Config -> Run. Every flag is defined here and only here; each also reads
// from PREWARM_<FLAG> (see cli/flag_parser.h for the rules and limits/limits.h for precedence).
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "prewarm/cache/manifest.h"
#include "prewarm/cli/build_config.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/config.h"
#include "prewarm/cli/flag_parser.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/env.h"
#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

// Scheduler limits: text, so one parser (limits/) validates flags, variables and --vllm-args
// alike and names the source in its error.
ABSL_FLAG(std::string, max_num_seqs, "",
          "Requests in one step (vLLM --max-num-seqs), at most 65536. Default vLLM's: 1024 for "
          "a GPU of 70 GiB or more (gfx942, gfx950, sm_90, sm_100, sm_120), 256 otherwise (see "
          "--gpu-memory-gib).");
ABSL_FLAG(std::string, max_num_batched_tokens, "",
          "New tokens in one step (vLLM --max-num-batched-tokens). Default vLLM's: 8192 for a GPU "
          "of 70 GiB or more, 2048 otherwise.");
ABSL_FLAG(std::string, gpu_memory_gib, "",
          "The GPU's memory in GiB, for vLLM's defaults of the two limits above (70 or more: the "
          "large ones, except on an A100, sm_80). Default: from --arch (plan and run print which "
          "applied).");
ABSL_FLAG(std::string, max_model_len, "",
          "Context length of any request (vLLM --max-model-len; auto or -1: the model's "
          "maximum). Default: the model's max_position_embeddings.");
ABSL_FLAG(std::string, num_speculative_tokens, "",
          "Speculative tokens per decode request; a decode query is 1..k+1 tokens. Default 0.");
ABSL_FLAG(std::string, max_cudagraph_capture_size, "",
          "Largest captured decode batch (vLLM -O '{\"max_cudagraph_capture_size\":N}'). "
          "Default 512; limits the plan only with --graph-only.");
ABSL_FLAG(std::string, tensor_parallel_size, "",
          "Tensor-parallel ranks; must divide the model's attention heads. Default 1.");
ABSL_FLAG(std::string, block_size, "",
          "Paged KV block size in tokens. Default 64; for an MSA model (MiniMax-M3) its sparse "
          "block, 128, the only value vLLM accepts there (another is exit 2).");
ABSL_FLAG(std::string, decode_context_parallel_size, "",
          "Decode context-parallel ranks (vLLM -dcp); must divide the tensor-parallel size. MLA "
          "decode gathers their query heads, so sparse_decode sees heads / tp * dcp. Default 1.");
ABSL_FLAG(std::string, kv_cache_dtype, "",
          "KV cache dtype, any of vLLM's: auto|float16|bfloat16|int8|fp8|fp8_e4m3|fp8_e5m2|"
          "fp8_inc|fp8_ds_mla|nvfp4. The NVFP4 launchers need nvfp4; every other leaves only "
          "fp8_bmm for an MLA model and no launcher for an MSA one (MiniMax-M3). Default auto: "
          "nvfp4 for the embedded example, the model's own otherwise.");
ABSL_FLAG(bool, graph_only, false,
          "Plan only steps with at most max_cudagraph_capture_size decode tokens (as AITER's "
          "warmup did). Off by default: an eager step compiles inside a request too.");
ABSL_FLAG(std::string, vllm_args, "",
          "The server's own command line (\"vllm serve M --max-num-seqs 128 -tp 4 ...\"); limits "
          "are read from it, below flags and PREWARM_* variables in precedence.");
ABSL_FLAG(std::string, model_config, "",
          "Path of the model's Hugging Face config.json: an MLA model (kv_lora_rank) or an MSA "
          "one (MiniMax-M3: text_config.sparse_attention_config). Default: the embedded example, "
          "DeepSeek-V3.2's shape (128 heads, L 512, Dr 64, indexer 64 x 128 with top-k 2048, "
          "163840 positions) with an NVFP4 KV cache.");
ABSL_FLAG(std::string, arch, "auto",
          "Target list: gfx942, gfx950,gfx942, gfx90a, sm_90, or auto (the GPUs under "
          "/sys/class/kfd; plan falls back to gfx942 when none is visible).");
ABSL_FLAG(std::string, format, "table", "plan, verify and inspect output: table or json.");
ABSL_FLAG(std::string, trace, "", "replay: a JSON Lines file of scheduler steps.");
ABSL_FLAG(bool, strict, false, "replay: exit 1 on any cache miss.");
ABSL_FLAG(std::string, cache_dir, "",
          "The cache root (the shared volume). Default ~/.cache/prewarm.");
ABSL_FLAG(std::string, manifest, "",
          "run: where to write the manifest. Default {cache-dir}/prewarm/manifest.json, or "
          "manifest-shard-I-of-N.json with --shard.");
ABSL_FLAG(int32_t, jobs, 0,
          "run: compile worker processes, 0 to 256. Default 0: the cgroup CPU limit (cpu.max), "
          "else the number of CPUs.");
ABSL_FLAG(std::string, shard, "0/1",
          "run: i/n compiles every n-th key of the plan starting at i, so n pods (an Indexed "
          "Job) split one plan.");
ABSL_FLAG(double, compile_timeout, 600,
          "run: seconds one compile may take before its worker is killed (then retried once); "
          "over 0, at most 86400.");
ABSL_FLAG(int64_t, compile_memory_mb, 0,
          "run: address-space limit of each compile worker in MiB; 0 for none.");
ABSL_FLAG(double, progress_interval, 5,
          "run: seconds between progress lines, at most 3600; 0 for none.");
ABSL_FLAG(bool, quiet, false, "run: no progress lines, only errors and the summary.");
ABSL_FLAG(bool, serve, false,
          "run: keep serving metrics and gRPC health after the run, until SIGTERM (the native "
          "sidecar mode); verify: serve them, SERVING when every planned key is valid, compiling "
          "nothing (the sidecar of an image volume). Both re-check every --verify-interval.");
ABSL_FLAG(
    std::string, metrics_address, "0.0.0.0:9400",
    "run, verify: where to serve Prometheus metrics (GET /metrics); port 0 picks a free port.");
ABSL_FLAG(
    std::string, grpc_address, "0.0.0.0:9401",
    "run, verify: where to serve grpc.health.v1.Health and prewarm.v1.Status; port 0 picks one.");
ABSL_FLAG(double, verify_interval, 60,
          "run --serve, verify --serve: seconds between re-checks of the cache (a stat of each "
          "entry; the full check, checksum included, of each one that changed); over 0, at most "
          "86400.");
ABSL_FLAG(std::string, pushgateway, "",
          "run: push the final metrics to this Pushgateway (http://host:port); a failed push "
          "is logged, not fatal.");
ABSL_FLAG(std::string, pushgateway_group, "",
          "run: the Pushgateway group to push to, beyond job=\"prewarm\": LABEL=VALUE pairs, "
          "comma-separated (the chart gives namespace=NS,pod=NAME from the downward API). A push "
          "replaces its group, so each pod needs one of its own. Default: instance=<host name>.");
ABSL_FLAG(std::string, tag, "",
          "pack: the image reference, REGISTRY/REPOSITORY[:TAG] (no tag: latest), e.g. "
          "registry.example.com/ml/prewarm-cache:dsv32-gfx942-v1.");
ABSL_FLAG(std::string, output, "",
          "pack: the OCI image layout directory to write (new, empty, or an earlier layout); "
          "skopeo, podman, crane or oras take it as it is.");
ABSL_FLAG(bool, push, false,
          "pack: copy the image to its registry with skopeo (registry credentials as skopeo "
          "finds them: $REGISTRY_AUTH_FILE, ~/.docker/config.json).");
ABSL_FLAG(std::string, addr, "", "probe: the gRPC address to check, HOST:PORT.");
ABSL_FLAG(std::string, service, "prewarm", "probe: the health service name to check.");
ABSL_FLAG(double, timeout, 1,
          "probe: seconds to wait for the connection and the answer; over 0, at most 3600.");
ABSL_FLAG(bool, dry_run, false, "gc: list what would be removed, remove nothing.");
ABSL_FLAG(bool, stale, false,
          "gc: also remove prewarm's launcher directories that this build would not produce "
          "for --arch (old compilers, old kernel sources).");
ABSL_FLAG(std::string, log_format, "text", "Log lines on stderr: text or json.");

namespace {

constexpr char kUsage[] =
    "prewarm: compile the GPU kernel variants a vLLM server can reach, before it starts.\n"
    "\n"
    "usage: prewarm COMMAND [flags]\n"
    "\n"
    "commands:\n"
    "  run      compile every reachable key that is not in the cache yet (--cache-dir)\n"
    "  plan     print the compile keys reachable under the scheduler limits (--format table|json)\n"
    "  verify   check that the cache holds a valid entry for every planned key (--format json:\n"
    "           each key's state and what its kernels use: registers, LDS, scratch, occupancy;\n"
    "           --serve: keep serving health, SERVING while it does, compiling nothing)\n"
    "  pack     the filled cache (--cache-dir) as an OCI image (--tag REF, --output DIR and/or\n"
    "           --push) for a read-only Kubernetes image volume: one layer, deterministic\n"
    "  inspect  ENTRY...: what a cache entry (a .co file) holds and what its kernels use\n"
    "  replay   dispatch each step of --trace FILE and look its keys up in the cache\n"
    "  gc       remove old temp files (and, with --stale, entries of other builds)\n"
    "  probe    check a prewarm's gRPC health (--addr HOST:PORT): exit 0 serving, 2 cannot\n"
    "           connect, 3 RPC failed, 4 not serving (grpc_health_probe's codes)\n"
    "\n"
    "examples:\n"
    "  prewarm plan                                  # the embedded example model\n"
    "  prewarm run --arch gfx90a --cache-dir ./prewarm-cache\n"
    "  prewarm run --serve --arch gfx942 --cache-dir /cache   # the Kubernetes sidecar\n"
    "  prewarm plan --model-config config.json --vllm-args \"--max-num-seqs 128 -tp 8\"\n"
    "  prewarm replay --trace steps.jsonl --arch gfx950\n"
    "  prewarm pack --cache-dir ./prewarm-cache --tag registry.example.com/ml/cache:v1 --output "
    "./cache-oci\n"
    "  prewarm verify --serve --arch gfx942 --cache-dir /cache   # sidecar of an image volume\n"
    "\n"
    "Flags take hyphens or underscores; each also reads from PREWARM_<FLAG>. Precedence: flag,\n"
    "PREWARM_* variable, --vllm-args, model config, default.\n"
    "Exit codes: 0 done; 1 the run failed; 2 bad input (the message names the value).\n"
    "\n"
    "flags:\n";

constexpr char kThisFile[] = "prewarm/main.cc";

}  // namespace

int main(int argc, char** argv) {
  // The hidden compile-worker mode (toolchain/worker.h): no flags, the jobs come on stdin.
  if (argc == 3 && std::string_view(argv[1]) == prewarm::kWorkerCommand &&
      std::string_view(argv[2]) == "--serve") {
    return prewarm::CompileWorkerMain();
  }
  const std::vector<std::string> args_vec(argv, argv + argc);
  absl::StatusOr<prewarm::ParsedArgs> args = prewarm::ParseArgs(args_vec, kThisFile);
  if (!args.ok()) return prewarm::ReportError(args.status());
  if (args->help || args->command == "help") {
    std::cout << kUsage << prewarm::FlagsHelp(kThisFile);
    return prewarm::kExitOk;
  }
  if (args->command.empty()) {
    std::cerr << kUsage << "(run prewarm --help for the flags)\n";
    return prewarm::kExitBadInput;
  }
  if (!args->positionals.empty() && args->command != "inspect") {
    return prewarm::ReportError(absl::InvalidArgumentError(
        prewarm::StrCat("unexpected argument \"", args->positionals.front(), "\" after ",
                        args->command, " (flags start with --)")));
  }
  absl::StatusOr<prewarm::Config> config = prewarm::BuildConfig(*args);
  if (!config.ok()) return prewarm::ReportError(config.status());
  config->paths = args->positionals;
  return prewarm::Run(*config, std::cout);
}
