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
ABSL_FLAG(std::string, gpu_name, "",
          "The GPU's name as vLLM reads it (torch.cuda.get_device_name(), nvidia-smi's name, "
          "e.g. NVIDIA A800-SXM4-80GB), for the same defaults: vLLM gives the small ones to any "
          "name containing a100. Only an sm_80 of 70 GiB or more needs it (an A100 or an A800); "
          "without it an sm_80 target is taken for an A100.");
ABSL_FLAG(std::string, max_model_len, "",
          "Context length of any request (vLLM --max-model-len; auto or -1: the model's "
          "maximum). Default: the model's max_position_embeddings, scaled as its rope_scaling says "
          "(as vLLM derives it).");
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
          "The target archs: one (gfx942, gfx950, gfx90a, sm_90, ...), several comma-separated "
          "(gfx950,gfx942), or auto: the GPUs under /sys/class/kfd. Not given, verify and replay "
          "take the archs of "
          "the cache's manifest when there is one. With no GPU visible, plan and replay fall back "
          "to gfx942; run and verify refuse. gc --stale needs it.");
ABSL_FLAG(std::string, format, "table", "plan, verify and inspect output: table or json.");
ABSL_FLAG(std::string, trace, "", "replay: a JSON Lines file of scheduler steps.");
ABSL_FLAG(bool, strict, false, "replay: exit 1 on any cache miss.");
ABSL_FLAG(std::string, cache_dir, "",
          "The cache root (the shared volume). Default ~/.cache/prewarm.");
ABSL_FLAG(std::string, manifest, "",
          "run: where to write the manifest. Default {cache-dir}/prewarm/manifest.json, or "
          "manifest-shard-I-of-N.json with --shard.");
// The numbers of run, verify and probe are text too: cli/build_config.cc reads them, so one that
// is not a number is refused with the rule, as one out of range is.
ABSL_FLAG(std::string, jobs, "0",
          "run: compile worker processes, 0 to 256. Default 0: the cgroup CPU limit (cpu.max), "
          "else the number of CPUs.");
ABSL_FLAG(std::string, shard, "0/1",
          "run: i/n compiles every n-th key of the plan starting at i, so n pods (an Indexed "
          "Job) split one plan.");
ABSL_FLAG(std::string, compile_timeout, "600",
          "run: seconds one compile may take before its worker is killed (then retried once); "
          "over 0, at most 86400.");
ABSL_FLAG(std::string, compile_memory_mb, "0",
          "run: address-space limit of each compile worker in MiB; 0 for none.");
ABSL_FLAG(std::string, progress_interval, "5",
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
ABSL_FLAG(std::string, verify_interval, "60",
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
ABSL_FLAG(std::string, timeout, "1",
          "probe: seconds to wait for the connection and the answer; over 0, at most 3600.");
ABSL_FLAG(bool, dry_run, false, "gc: list what would be removed, remove nothing.");
ABSL_FLAG(bool, stale, false,
          "gc: also remove prewarm's launcher directories that this build would not produce "
          "for --arch (old compilers, old kernel sources).");
ABSL_FLAG(std::string, log_format, "text", "Log lines on stderr: text or json.");

namespace {

constexpr char kThisFile[] = "prewarm/main.cc";

constexpr char kUsage[] =
    "prewarm: compile the GPU kernel variants a vLLM server can reach, before it starts.\n"
    "\n"
    "usage: prewarm COMMAND [flags]      prewarm COMMAND --help: the command's own flags\n"
    "       prewarm --version            the version and the compilers it uses\n"
    "\n"
    "commands:\n";

constexpr char kUsageTail[] =
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
    "Flags take hyphens or underscores; each also reads from PREWARM_<FLAG> (for the commands it\n"
    "applies to; a flag given to a command it does not apply to is exit 2). Precedence: flag,\n"
    "PREWARM_* variable, --vllm-args, model config, default.\n"
    "Exit codes: 0 done; 1 the run failed; 2 bad input (the message names the value).\n";

constexpr char kCommandTail[] =
    "\nFlags take hyphens or underscores; each also reads from PREWARM_<FLAG>. Precedence: flag,\n"
    "PREWARM_* variable, --vllm-args, model config, default.\n";

// The flags that decide the plan: the scheduler limits, the model and the targets.
std::vector<std::string> PlanFlags(std::vector<std::string> more) {
  std::vector<std::string> flags = {"max-num-seqs",
                                    "max-num-batched-tokens",
                                    "gpu-memory-gib",
                                    "gpu-name",
                                    "max-model-len",
                                    "num-speculative-tokens",
                                    "max-cudagraph-capture-size",
                                    "tensor-parallel-size",
                                    "block-size",
                                    "decode-context-parallel-size",
                                    "kv-cache-dtype",
                                    "graph-only",
                                    "vllm-args",
                                    "model-config",
                                    "arch",
                                    "log-format"};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// Every command, what it does and the flags it takes. A flag lands here once for each command
// that reads it; one that a command ignores is refused there (exit 2), not silently kept.
const std::vector<prewarm::CommandSpec>& Commands() {
  static const std::vector<prewarm::CommandSpec> commands = {
      {"run", "compile every reachable key that is not in the cache yet (--cache-dir)",
       "usage: prewarm run [flags]\n"
       "\n"
       "Plans the keys the server can reach (its limits: --vllm-args and the limit flags), "
       "compiles\n"
       "those the cache lacks in worker processes, and writes the manifest and metrics into the\n"
       "cache. --serve keeps serving metrics and gRPC health until SIGTERM (the native sidecar);\n"
       "--shard i/n splits the plan over the pods of an Indexed Job.\n"
       "Exit 0 every key of this shard is in the cache; 1 a key failed; 2 bad input.\n"
       "\n"
       "examples:\n"
       "  prewarm run --arch gfx90a --cache-dir ./prewarm-cache\n"
       "  prewarm run --serve --arch gfx942 --cache-dir /cache\n",
       PlanFlags({"cache-dir", "manifest", "jobs", "shard", "compile-timeout", "compile-memory-mb",
                  "progress-interval", "quiet", "serve", "metrics-address", "grpc-address",
                  "verify-interval", "pushgateway", "pushgateway-group"})},
      {"plan", "print the compile keys reachable under the scheduler limits (--format table|json)",
       "usage: prewarm plan [flags]\n"
       "\n"
       "Prints every compile key the server can reach under its limits, each with a witness (a\n"
       "step in range that reaches it); compiles nothing. --arch auto with no GPU visible plans\n"
       "for gfx942 and says so.\n"
       "\n"
       "examples:\n"
       "  prewarm plan\n"
       "  prewarm plan --model-config config.json --vllm-args \"vllm serve M -tp 8\" --format "
       "json\n",
       PlanFlags({"format"})},
      {"verify",
       "check that the cache holds a valid entry for every planned key (--format json: each key's\n"
       "           state and what its kernels use; --serve: keep serving health, compiling "
       "nothing)",
       "usage: prewarm verify [flags]\n"
       "\n"
       "Checks that the cache (--cache-dir) holds a valid entry for every planned key: checksum\n"
       "and code object. Writes nothing. Without --arch it verifies the archs the cache's "
       "manifest\n"
       "names (else the GPUs visible). --serve: serve metrics and gRPC health, SERVING while "
       "every\n"
       "planned key is valid, re-checking every --verify-interval (the sidecar of an image "
       "volume).\n"
       "Exit 0 every key valid; 1 one is missing or invalid; 2 bad input.\n"
       "\n"
       "examples:\n"
       "  prewarm verify --cache-dir ./prewarm-cache\n"
       "  prewarm verify --serve --arch gfx942 --cache-dir /cache\n",
       PlanFlags(
           {"cache-dir", "format", "serve", "metrics-address", "grpc-address", "verify-interval"})},
      {"pack",
       "the filled cache (--cache-dir) as an OCI image (--tag REF, --output DIR and/or --push)\n"
       "           for a read-only Kubernetes image volume: one layer, deterministic",
       "usage: prewarm pack --cache-dir DIR --tag REF [--output DIR] [--push]\n"
       "\n"
       "Packs the entries of every key the cache's own manifest plans (every arch it was filled\n"
       "for) and the manifest into an OCI image of one deterministic layer, for a Kubernetes "
       "image\n"
       "volume. The limits and archs come from the manifest, so the planning flags do not apply.\n"
       "Exit 0 packed; 1 a planned key is missing or damaged (nothing written); 2 bad input.\n"
       "\n"
       "example:\n"
       "  prewarm pack --cache-dir ./prewarm-cache --tag registry.example.com/ml/cache:v1 "
       "--output ./cache-oci\n",
       {"cache-dir", "tag", "output", "push", "log-format"}},
      {"inspect",
       "ENTRY...: what a cache entry (a .co file) holds and what its kernels use",
       "usage: prewarm inspect [--format table|json] ENTRY.co...\n"
       "\n"
       "What each cache entry holds (launcher, key, producer) and what its kernels use: "
       "registers,\n"
       "LDS, scratch, occupancy, with any problem. Exit 0 every entry read; 2 one is not a "
       "readable\n"
       "entry (the message names it).\n"
       "\n"
       "example:\n"
       "  prewarm inspect prewarm-cache/sparse_decode_*/*.co\n",
       {"format", "log-format"}},
      {"replay", "dispatch each step of --trace FILE and look its keys up in the cache",
       "usage: prewarm replay --trace FILE [flags]\n"
       "\n"
       "Dispatches each step of a JSON Lines trace under the limits, as the server would, and "
       "looks\n"
       "each key up in the cache: hit or MISS. Out-of-range and malformed steps are listed with "
       "the\n"
       "rule they break (exit 2 after the rest is replayed). One arch: without --arch, the one "
       "the\n"
       "cache's manifest names (several: name one), else the GPU visible, else gfx942.\n"
       "An entry that is there but cannot be read is an ERROR naming the path and why (exit 1).\n"
       "--strict: exit 1 on any miss.\n"
       "\n"
       "example:\n"
       "  prewarm replay --trace steps.jsonl --cache-dir ./prewarm-cache\n",
       PlanFlags({"cache-dir", "trace", "strict"})},
      {"gc",
       "remove old temp files (and, with --stale, entries of other builds)",
       "usage: prewarm gc [--cache-dir DIR] [--stale --arch LIST] [--dry-run]\n"
       "\n"
       "Removes prewarm's temp files older than an hour; --stale also its launcher directories of\n"
       "the --arch archs that this build would not produce (old compilers, old kernel sources).\n"
       "Never touches another arch's entries, nor anything that is not prewarm's.\n"
       "\n"
       "example:\n"
       "  prewarm gc --stale --arch gfx950 --dry-run\n",
       {"cache-dir", "arch", "stale", "dry-run", "log-format"}},
      {"probe",
       "check a prewarm's gRPC health (--addr HOST:PORT): exit 0 serving, 2 cannot\n"
       "           connect, 3 RPC failed, 4 not serving (grpc_health_probe's codes)",
       "usage: prewarm probe --addr HOST:PORT [--service NAME] [--timeout SECONDS]\n"
       "\n"
       "Asks a prewarm's grpc.health.v1.Health: exit 0 serving, 2 cannot connect (or bad input),\n"
       "3 the RPC failed, 4 not serving (grpc_health_probe's codes).\n"
       "\n"
       "example:\n"
       "  prewarm probe --addr 127.0.0.1:9401\n",
       {"addr", "service", "timeout", "log-format"}},
  };
  return commands;
}

// "  run      compile every ...", a line (or two) per command.
std::string CommandList() {
  std::string out;
  for (const prewarm::CommandSpec& c : Commands()) {
    prewarm::StrAppend(out, "  ", c.name, std::string(9 - std::min<size_t>(c.name.size(), 8), ' '),
                       c.summary, "\n");
  }
  return out;
}

std::string Help(const prewarm::CommandSpec* command) {
  if (command != nullptr) {
    return prewarm::StrCat(command->usage, "\nflags:\n",
                           prewarm::FlagsHelp(kThisFile, command, Commands()), kCommandTail);
  }
  std::string out = prewarm::StrCat(kUsage, CommandList());
  prewarm::StrAppend(out, kUsageTail, "\nflags (the commands each applies to):\n",
                     prewarm::FlagsHelp(kThisFile, nullptr, Commands()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // The hidden compile-worker mode (toolchain/worker.h): no flags, the jobs come on stdin.
  if (argc == 3 && std::string_view(argv[1]) == prewarm::kWorkerCommand &&
      std::string_view(argv[2]) == "--serve") {
    return prewarm::CompileWorkerMain();
  }
  const std::vector<std::string> args_vec(argv, argv + argc);
  absl::StatusOr<prewarm::ParsedArgs> args = prewarm::ParseArgs(args_vec, kThisFile, Commands());
  if (!args.ok()) return prewarm::ReportError(args.status());
  if (args->version) return prewarm::RunVersion(std::cout);
  const prewarm::CommandSpec* command = nullptr;
  for (const prewarm::CommandSpec& c : Commands()) {
    if (c.name == args->command) command = &c;
  }
  if (args->help) {
    std::cout << Help(command);
    return prewarm::kExitOk;
  }
  if (command == nullptr) {
    std::cerr << kUsage << CommandList() << "(prewarm --help: every command and flag)\n";
    return prewarm::kExitBadInput;
  }
  if (!args->positionals.empty() && args->command != "inspect") {
    return prewarm::ReportError(absl::InvalidArgumentError(
        prewarm::StrCat("unexpected argument \"", prewarm::ShownValue(args->positionals.front()),
                        "\" after ", args->command, " (flags start with --)")));
  }
  absl::StatusOr<prewarm::Config> config = prewarm::BuildConfig(*args);
  if (!config.ok()) return prewarm::ReportError(config.status());
  config->paths = args->positionals;
  return prewarm::Run(*config, std::cout);
}
