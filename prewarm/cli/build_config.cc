#include "prewarm/cli/build_config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "prewarm/cache/manifest.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/env.h"
#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

// The current value of main.cc's flag `name` (with underscores). A flag that is not defined, or
// not of type T, is a programming error: the binary's own flags are fixed at build time.
template <typename T>
T Flag(const char* name) {
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
  absl::optional<T> v = f != nullptr ? f->TryGet<T>() : absl::nullopt;
  if (!v.has_value()) {
    LogError(StrCat("internal: no flag --", name, " of the expected type"));
    std::abort();
  }
  return *std::move(v);
}

// --pushgateway-group: LABEL=VALUE pairs, comma-separated. Label names as Prometheus takes them
// (not "job", which is prewarm's, nor a reserved __ name), each once, with a value; empty text is
// instance=<host name>, so no two hosts replace each other's group.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> PushGroup(
    std::string_view text, std::string_view origin) {
  std::vector<std::pair<std::string, std::string>> group;
  if (StripWhitespace(text).empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
      group.emplace_back("instance", host);
    }
    return group;
  }
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat(origin, "=", text, ": ", why, "; expected LABEL=VALUE[,LABEL=VALUE...]"));
  };
  for (std::string_view rest = text; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string_view pair = StripWhitespace(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return bad(StrCat("\"", pair, "\" has no ="));
    const std::string name(StripWhitespace(pair.substr(0, eq)));
    const std::string value(StripWhitespace(pair.substr(eq + 1)));
    const bool valid_name = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                            std::all_of(name.begin(), name.end(), [](char ch) {
                              return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                            });
    if (!valid_name) return bad(StrCat("\"", name, "\" is not a label name"));
    if (name.rfind("__", 0) == 0)
      return bad(StrCat(name, ": names that start with __ are reserved"));
    if (name == "job") return bad("job is prewarm's own (job=\"prewarm\")");
    if (value.empty()) return bad(StrCat(name, " has no value"));
    for (const auto& [seen, v] : group) {
      if (seen == name) return bad(StrCat(name, " is given twice"));
    }
    group.emplace_back(name, value);
  }
  return group;
}

}  // namespace

absl::StatusOr<Config> BuildConfig(const ParsedArgs& args) {
  Config c;
  c.command = args.command;
  auto origin = [&](const std::string& flag) {
    auto it = args.origins.find(flag);
    return it == args.origins.end() ? std::string() : it->second;
  };
  const std::pair<const char*, const char*> limit_flags[] = {
      {"max-num-seqs", "max_num_seqs"},
      {"max-num-batched-tokens", "max_num_batched_tokens"},
      {"max-model-len", "max_model_len"},
      {"num-speculative-tokens", "num_speculative_tokens"},
      {"max-cudagraph-capture-size", "max_cudagraph_capture_size"},
      {"tensor-parallel-size", "tensor_parallel_size"},
      {"block-size", "block_size"},
      {"decode-context-parallel-size", "decode_context_parallel_size"}};
  for (const auto& [name, flag] : limit_flags) {
    const std::string from = origin(name);
    if (from.empty()) continue;
    if (absl::Status s =
            SetIntLimitFromText(c.explicit_limits, name, Flag<std::string>(flag), from);
        !s.ok()) {
      return s;
    }
  }
  if (const std::string from = origin("kv-cache-dtype"); !from.empty()) {
    if (absl::Status s =
            SetKvCacheDtypeFromText(c.explicit_limits, Flag<std::string>("kv_cache_dtype"), from);
        !s.ok()) {
      return s;
    }
  }
  if (const std::string from = origin("graph-only"); !from.empty()) {
    c.explicit_limits.graph_only = Sourced<bool>{Flag<bool>("graph_only"), from};
  }
  c.vllm_args = Flag<std::string>("vllm_args");
  c.vllm_args_origin = origin("vllm-args");
  c.model_config = Flag<std::string>("model_config");
  c.gpu_memory_gib = Flag<std::string>("gpu_memory_gib");
  c.gpu_memory_gib_origin = origin("gpu-memory-gib");
  c.arch = Flag<std::string>("arch");
  const std::string format = Flag<std::string>("format");
  if (format == "json") {
    c.format = OutputFormat::kJson;
  } else if (format != "table") {
    return absl::InvalidArgumentError(
        StrCat(origin("format"), "=", format, ": expected table or json"));
  }
  const std::string log_format = Flag<std::string>("log_format");
  if (log_format == "json") {
    SetLogFormat(LogFormat::kJson);
  } else if (log_format != "text") {
    return absl::InvalidArgumentError(
        StrCat(origin("log-format"), "=", log_format, ": expected text or json"));
  }
  c.trace = Flag<std::string>("trace");
  c.strict = Flag<bool>("strict");
  c.cache_dir = Flag<std::string>("cache_dir");
  if (c.cache_dir.empty()) {
    const std::optional<std::string> home = GetEnv("HOME");
    c.cache_dir = StrCat(home.value_or("/tmp"), "/.cache/prewarm");
  }
  const int32_t jobs = Flag<int32_t>("jobs");
  if (jobs < 0 || jobs > 256) {
    return absl::InvalidArgumentError(
        StrCat(origin("jobs"), "=", jobs, ": must be 0 to 256 (0: one per available CPU)"));
  }
  c.jobs = jobs > 0 ? jobs : AvailableCpus();
  const std::string shard = Flag<std::string>("shard");
  const size_t slash = shard.find('/');
  const std::optional<int64_t> index = ParseInt64(std::string_view(shard).substr(0, slash));
  const std::optional<int64_t> count = slash == std::string::npos
                                           ? std::nullopt
                                           : ParseInt64(std::string_view(shard).substr(slash + 1));
  const int64_t i = index.value_or(-1), n = count.value_or(0);
  if (n < 1 || i < 0 || i >= n || n > 100000) {
    return absl::InvalidArgumentError(
        StrCat(origin("shard"), "=", shard, ": expected i/n with 0 <= i < n (e.g. 0/4)"));
  }
  c.shard_index = static_cast<int>(i);
  c.shard_count = static_cast<int>(n);
  c.manifest = Flag<std::string>("manifest");
  if (c.manifest.empty()) {
    c.manifest_in_cache = true;
    c.manifest = c.shard_count > 1 ? StrCat(c.cache_dir, "/prewarm/manifest-shard-", c.shard_index,
                                            "-of-", c.shard_count, ".json")
                                   : StrCat(c.cache_dir, "/prewarm/manifest.json");
  }
  // Seconds: finite, in (0, max] or [0, max]; inf, nan and the absurd are refused, not obeyed.
  auto seconds = [&](const char* flag, double v, bool zero_ok, double max) -> absl::Status {
    if ((zero_ok ? v >= 0 : v > 0) && v <= max) return absl::OkStatus();
    return absl::InvalidArgumentError(StrCat(origin(flag), "=", v, ": must be ",
                                             zero_ok ? ">= 0" : "> 0", " and at most ", max,
                                             " seconds"));
  };
  if (args.command == "run") {
    if (absl::Status ok = CheckReplaceable(c.manifest); !ok.ok()) {
      const std::string from = origin("manifest");
      return absl::InvalidArgumentError(
          StrCat(from.empty() ? "the manifest" : from, ": ", ok.message()));
    }
  }
  c.compile_timeout_s = Flag<double>("compile_timeout");
  RETURN_IF_ERROR(seconds("compile-timeout", c.compile_timeout_s, false, 86400));
  c.compile_memory_mb = Flag<int64_t>("compile_memory_mb");
  if (c.compile_memory_mb < 0) {
    return absl::InvalidArgumentError(StrCat(origin("compile-memory-mb"), "=", c.compile_memory_mb,
                                             ": must be >= 0 (0: no limit)"));
  }
  c.progress_interval_s = Flag<double>("progress_interval");
  RETURN_IF_ERROR(seconds("progress-interval", c.progress_interval_s, true, 3600));
  c.serve = Flag<bool>("serve");
  c.metrics_address = Flag<std::string>("metrics_address");
  c.grpc_address = Flag<std::string>("grpc_address");
  c.metrics_address_given = !origin("metrics-address").empty();
  c.grpc_address_given = !origin("grpc-address").empty();
  c.verify_interval_s = Flag<double>("verify_interval");
  RETURN_IF_ERROR(seconds("verify-interval", c.verify_interval_s, false, 86400));
  c.pushgateway = Flag<std::string>("pushgateway");
  {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> group =
        PushGroup(Flag<std::string>("pushgateway_group"), origin("pushgateway-group"));
    if (!group.ok()) return group.status();
    c.pushgateway_group = *std::move(group);
  }
  c.probe_addr = Flag<std::string>("addr");
  c.probe_service = Flag<std::string>("service");
  c.probe_timeout_s = Flag<double>("timeout");
  RETURN_IF_ERROR(seconds("timeout", c.probe_timeout_s, false, 3600));
  c.quiet = Flag<bool>("quiet");
  c.dry_run = Flag<bool>("dry_run");
  c.stale = Flag<bool>("stale");
  c.tag = Flag<std::string>("tag");
  c.output = Flag<std::string>("output");
  c.push = Flag<bool>("push");
  if (args.command == "pack" && c.tag.empty()) {
    return absl::InvalidArgumentError(
        "pack needs --tag REF, the image's name (e.g. registry.example.com/ml/prewarm-cache:v1)");
  }
  return c;
}

}  // namespace prewarm
