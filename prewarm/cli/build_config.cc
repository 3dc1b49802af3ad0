#include "prewarm/cli/build_config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
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

std::string Underscored(std::string_view hyphen_name) { return ReplaceAll(hyphen_name, '-', '_'); }

// The text of a number flag (seconds): a decimal, spaces around and a sign allowed; inf and nan
// are numbers here (out of every range), so their message is the rule alone.
std::optional<double> ParseNumberText(std::string_view text) {
  text = StripWhitespace(text);
  if (text.starts_with('+')) text.remove_prefix(1);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ptr != text.data() + text.size()) return std::nullopt;
  // 1e999 and 1e-999 are numbers too: strtod's HUGE_VAL or 0, out of range or in it as such.
  if (ec == std::errc::result_out_of_range) return std::strtod(std::string(text).c_str(), nullptr);
  if (ec != std::errc()) return std::nullopt;
  return v;
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
    return absl::InvalidArgumentError(StrCat(origin, "=", ShownValue(text), ": ", why,
                                             "; expected LABEL=VALUE[,LABEL=VALUE...]"));
  };
  for (std::string_view rest = text; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string_view pair = StripWhitespace(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return bad(StrCat("\"", ShownValue(pair), "\" has no ="));
    const std::string name(StripWhitespace(pair.substr(0, eq)));
    const std::string value(StripWhitespace(pair.substr(eq + 1)));
    const bool valid_name = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                            std::all_of(name.begin(), name.end(), [](char ch) {
                              return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                            });
    if (!valid_name) return bad(StrCat("\"", ShownValue(name), "\" is not a label name"));
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

// Why `host` is not a host a server can bind or a client reach ("" when it is): a name or IPv4
// address, or an IPv6 address in brackets. What civetweb, gRPC and libcurl would each refuse
// (or misread) in their own words is refused here first, naming the flag.
std::string BadHost(std::string_view host) {
  if (host.empty()) return "no host before the port";
  if (host.front() == '[' || host.back() == ']') {
    if (host.size() < 2 || host.front() != '[' || host.back() != ']') {
      return "an unclosed [ (an IPv6 address is written [::1]:PORT)";
    }
    const std::string inner(host.substr(1, host.size() - 2));
    in6_addr addr{};
    if (::inet_pton(AF_INET6, inner.c_str(), &addr) != 1) return "not an IPv6 address in [ ]";
    return "";
  }
  if (host.find(':') != std::string_view::npos) {
    return "an IPv6 address goes in brackets ([::1]:PORT)";
  }
  const bool name_chars = std::all_of(host.begin(), host.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' || ch == '_';
  });
  if (!name_chars || host.size() > 253) return "not a host name or IP address";
  return "";
}

// HOST:PORT, the port 0 to 65535 (`port_required` false: it may be left out, as in a URL).
// `value`: the flag's whole value, for the message (a URL around `text`).
absl::Status CheckHostPort(std::string_view origin, std::string_view text, bool port_required,
                           std::string_view expected, std::string_view value) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat(origin, "=", ShownValue(value), ": ", why, "; expected ", expected));
  };
  std::string_view host = text;
  const size_t colon = text.rfind(':');
  const bool has_port =
      colon != std::string_view::npos && text.find(']', colon) == std::string_view::npos;
  if (has_port) {
    host = text.substr(0, colon);
    const std::string_view port = text.substr(colon + 1);
    const std::optional<int64_t> n = ParseInt64(port);
    if (port.empty() ||
        !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
        !n.has_value() || *n > 65535) {
      return bad(StrCat("port \"", ShownValue(port), "\" is not a number from 0 to 65535"));
    }
  } else if (port_required) {
    return bad("no :PORT");
  }
  if (const std::string why = BadHost(host); !why.empty()) return bad(why);
  return absl::OkStatus();
}

// --pushgateway: [http:// or https://]HOST[:PORT][/PATH].
absl::Status CheckPushgatewayUrl(std::string_view origin, std::string_view url) {
  std::string_view rest = url;
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (rest.starts_with(scheme)) rest.remove_prefix(scheme.size());
  }
  if (rest.find("://") != std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat(origin, "=", ShownValue(url),
                                             ": not http:// or https://; expected "
                                             "http://HOST:PORT (e.g. http://pushgateway:9091)"));
  }
  return CheckHostPort(origin, rest.substr(0, rest.find('/')), false,
                       "http://HOST:PORT (e.g. http://pushgateway:9091)", url);
}

// pack --output: checked before the cache is read, so a path pack cannot write is exit 2 at once
// (nothing written): a symlink whose target does not exist (mkdir through it is EEXIST), or a
// path that is there and is not a directory. A symlink to a directory is that directory.
template <typename Origin>
absl::Status CheckPackOutput(const Origin& origin, const Config& c) {
  const std::string shown = StrCat(origin("output"), " ", ShownValue(c.output));
  struct stat link {};
  if (::lstat(c.output.c_str(), &link) != 0) {
    if (errno == ENOENT) return absl::OkStatus();  // made by pack (with its parents)
    return absl::InvalidArgumentError(StrCat(shown, ": ", std::strerror(errno)));
  }
  struct stat target {};
  if (S_ISLNK(link.st_mode) && ::stat(c.output.c_str(), &target) != 0) {
    const int err = errno;
    std::string to(4096, '\0');
    const ssize_t n = ::readlink(c.output.c_str(), to.data(), to.size());
    to.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return absl::InvalidArgumentError(
        StrCat(shown, ": a symbolic link to ", ShownValue(to), ", which ",
               err == ENOENT ? "does not exist" : std::strerror(err),
               "; give a directory (new, empty, or an earlier layout), or remove the link"));
  }
  const struct stat& st = S_ISLNK(link.st_mode) ? target : link;
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        StrCat(shown,
               ": exists and is not a directory; give a directory (new, empty, or an earlier "
               "OCI image layout)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> BuildConfig(const ParsedArgs& args) {
  // A path longer than PATH_MAX names nothing the system can open (ENAMETOOLONG): refused here,
  // cut, rather than carried into every later message whole (a 130 KB --cache-dir was echoed
  // twice in one 260 KB line).
  for (const char* flag : {"cache-dir", "manifest", "model-config", "trace", "output"}) {
    const auto it = args.texts.find(flag);
    if (it == args.texts.end() || it->second.size() < PATH_MAX) continue;
    return absl::InvalidArgumentError(StrCat(args.origins.at(flag), "=", ShownValue(it->second),
                                             ": longer than any path (PATH_MAX ", PATH_MAX,
                                             " bytes)"));
  }
  // An empty path (a flag given as "", or a PREWARM_* variable set empty, as a manifest renders an
  // unset value) is refused, not read as "not given": that would plan the embedded example, or
  // fill ~/.cache/prewarm instead of the volume, and report success.
  for (const auto& [flag, instead] :
       {std::pair{"cache-dir", "leave it unset for ~/.cache/prewarm"},
        std::pair{"manifest", "leave it unset for the cache's own"},
        std::pair{"model-config", "leave it unset for the embedded example"},
        std::pair{"trace", "give the trace's file"}, std::pair{"output", "give a directory"}}) {
    const auto it = args.texts.find(flag);
    if (it == args.texts.end() || !it->second.empty()) continue;
    return absl::InvalidArgumentError(
        StrCat(args.origins.at(flag), "=\"\": an empty path; give a path, or ", instead));
  }
  Config c;
  c.command = args.command;
  auto origin = [&](const std::string& flag) {
    auto it = args.origins.find(flag);
    return it == args.origins.end() ? std::string() : it->second;
  };
  // A flag's value as given (not as parsed: 1e-7 stays 1e-7), for the message that refuses it.
  auto given = [&](const std::string& flag) {
    auto it = args.texts.find(flag);
    return ShownValue(it == args.texts.end() ? std::string() : it->second);
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
  c.gpu_name = Flag<std::string>("gpu_name");
  c.gpu_name_origin = origin("gpu-name");
  c.arch = Flag<std::string>("arch");
  c.arch_origin = origin("arch");
  const std::string format = Flag<std::string>("format");
  if (format == "json") {
    c.format = OutputFormat::kJson;
  } else if (format != "table") {
    return absl::InvalidArgumentError(
        StrCat(origin("format"), "=", ShownValue(format), ": expected table or json"));
  }
  const std::string log_format = Flag<std::string>("log_format");
  if (log_format == "json") {
    SetLogFormat(LogFormat::kJson);
  } else if (log_format != "text") {
    return absl::InvalidArgumentError(
        StrCat(origin("log-format"), "=", ShownValue(log_format), ": expected text or json"));
  }
  c.trace = Flag<std::string>("trace");
  c.strict = Flag<bool>("strict");
  c.cache_dir = Flag<std::string>("cache_dir");
  if (c.cache_dir.empty()) {
    const std::optional<std::string> home = GetEnv("HOME");
    c.cache_dir = StrCat(home.value_or("/tmp"), "/.cache/prewarm");
  }
  // Numeric flags are text (main.cc), read here so that a value that is not a number names the
  // rule as one out of range does: "--jobs=x: not an integer; must be 0 to 256 (...)".
  auto rule_error = [&](const char* flag, bool parsed, std::string_view kind,
                        std::string_view rule) {
    return absl::InvalidArgumentError(StrCat(origin(flag), "=", given(flag), ": ",
                                             parsed ? "" : StrCat("not ", kind, "; "), rule));
  };
  // An integer in [lo, hi]; a whole number beyond int64 is out of range, not "not an integer".
  auto integer = [&](const char* flag, int64_t lo, int64_t hi,
                     std::string_view rule) -> absl::StatusOr<int64_t> {
    // As Abseil's integer flags took it: spaces around, a sign, base 10.
    const WholeNumberText v = ParseWholeNumber(Flag<std::string>(Underscored(flag).c_str()));
    if (v.value.has_value() && *v.value >= lo && *v.value <= hi) return *v.value;
    return rule_error(flag, v.is_whole, "an integer", rule);
  };
  ASSIGN_OR_RETURN(const int64_t jobs,
                   integer("jobs", 0, 256, "must be 0 to 256 (0: one per available CPU)"));
  c.jobs = jobs > 0 ? static_cast<int>(jobs) : AvailableCpus();
  const std::string shard = Flag<std::string>("shard");
  const size_t slash = shard.find('/');
  const std::optional<int64_t> index = ParseInt64(std::string_view(shard).substr(0, slash));
  const std::optional<int64_t> count = slash == std::string::npos
                                           ? std::nullopt
                                           : ParseInt64(std::string_view(shard).substr(slash + 1));
  const int64_t i = index.value_or(-1), n = count.value_or(0);
  if (n < 1 || i < 0 || i >= n || n > 100000) {
    return absl::InvalidArgumentError(
        StrCat(origin("shard"), "=", ShownValue(shard),
               ": expected i/n with 0 <= i < n <= 100000 (e.g. 0/4)"));
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
  auto seconds = [&](const char* flag, bool zero_ok, double max) -> absl::StatusOr<double> {
    const std::optional<double> v = ParseNumberText(Flag<std::string>(Underscored(flag).c_str()));
    if (v.has_value() && (zero_ok ? *v >= 0 : *v > 0) && *v <= max) return *v;
    return rule_error(
        flag, v.has_value(), "a number",
        StrCat("must be ", zero_ok ? ">= 0" : "> 0", " and at most ", max, " seconds"));
  };
  if (args.command == "run") {
    if (absl::Status ok = CheckReplaceable(c.manifest); !ok.ok()) {
      const std::string from = origin("manifest");
      return absl::InvalidArgumentError(
          StrCat(from.empty() ? "the manifest" : from, ": ", ok.message()));
    }
  }
  ASSIGN_OR_RETURN(c.compile_timeout_s, seconds("compile-timeout", false, 86400));
  // In bytes it must fit RLIMIT_AS: 2^44 MiB wrapped to a limit of 0, failing every compile.
  constexpr int64_t kMaxCompileMemoryMb = int64_t{1} << 24;  // 16 TiB
  ASSIGN_OR_RETURN(c.compile_memory_mb,
                   integer("compile-memory-mb", 0, kMaxCompileMemoryMb,
                           StrCat("must be 0 to ", kMaxCompileMemoryMb, " MiB (0: no limit)")));
  ASSIGN_OR_RETURN(c.progress_interval_s, seconds("progress-interval", true, 3600));
  c.serve = Flag<bool>("serve");
  c.metrics_address = Flag<std::string>("metrics_address");
  c.grpc_address = Flag<std::string>("grpc_address");
  c.metrics_address_given = !origin("metrics-address").empty();
  c.grpc_address_given = !origin("grpc-address").empty();
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"metrics-address", &c.metrics_address},
        {"grpc-address", &c.grpc_address}}) {
    if (origin(flag).empty()) continue;  // the default is good
    RETURN_IF_ERROR(
        CheckHostPort(origin(flag), *value, true, "HOST:PORT (port 0 picks a free one)", *value));
  }
  ASSIGN_OR_RETURN(c.verify_interval_s, seconds("verify-interval", false, 86400));
  c.pushgateway = Flag<std::string>("pushgateway");
  if (!c.pushgateway.empty()) {
    RETURN_IF_ERROR(CheckPushgatewayUrl(origin("pushgateway"), c.pushgateway));
  }
  {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> group =
        PushGroup(Flag<std::string>("pushgateway_group"), origin("pushgateway-group"));
    if (!group.ok()) return group.status();
    c.pushgateway_group = *std::move(group);
  }
  c.probe_addr = Flag<std::string>("addr");
  if (!c.probe_addr.empty()) {
    RETURN_IF_ERROR(CheckHostPort(origin("addr"), c.probe_addr, true, "HOST:PORT", c.probe_addr));
  }
  c.probe_service = Flag<std::string>("service");
  ASSIGN_OR_RETURN(c.probe_timeout_s, seconds("timeout", false, 3600));
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
  // A reference is a registry, a name of at most 255 characters and a tag of at most 128 (the
  // distribution spec); a longer one is refused here, before its parser quotes it whole.
  if (c.tag.size() > 512) {
    return absl::InvalidArgumentError(
        StrCat(origin("tag"), "=", ShownValue(c.tag),
               ": longer than an image reference can be (512 bytes)"));
  }
  if (args.command == "pack" && !c.output.empty()) RETURN_IF_ERROR(CheckPackOutput(origin, c));
  return c;
}

}  // namespace prewarm
