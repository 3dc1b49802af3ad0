#include "prewarm/limits/vllm_args.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prewarm/util/json.h"
#include "prewarm/util/shell_split.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using nlohmann::json;

constexpr std::string_view kOrigin = "--vllm-args ";

// Flags that take a value and that we read. Everything else is skipped.
enum class Kind { kInt, kKvDtype, kSpeculative, kCompilation };
struct Known {
  std::string_view name;  // normalized: hyphens, no leading dashes
  Kind kind;
  std::string_view limit_flag;  // for kInt
};
constexpr Known kKnown[] = {
    {"max-num-seqs", Kind::kInt, "max-num-seqs"},
    {"max-num-batched-tokens", Kind::kInt, "max-num-batched-tokens"},
    {"max-model-len", Kind::kInt, "max-model-len"},
    {"tensor-parallel-size", Kind::kInt, "tensor-parallel-size"},
    {"tp", Kind::kInt, "tensor-parallel-size"},
    {"block-size", Kind::kInt, "block-size"},
    {"max-cudagraph-capture-size", Kind::kInt, "max-cudagraph-capture-size"},
    {"num-speculative-tokens", Kind::kInt, "num-speculative-tokens"},
    {"kv-cache-dtype", Kind::kKvDtype, ""},
    {"speculative-config", Kind::kSpeculative, ""},
    {"compilation-config", Kind::kCompilation, ""},
    {"O", Kind::kCompilation, ""},
};

const Known* FindKnown(std::string_view name) {
  for (const Known& k : kKnown) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

absl::StatusOr<json> ParseJsonArg(std::string_view flag, std::string_view text) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) {
    return absl::InvalidArgumentError(StrCat(kOrigin, "--", flag, ": ", depth.message()));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        StrCat(kOrigin, "--", flag, " '", text, "': malformed JSON (expected an object)"));
  }
  return j;
}

// A JSON number or numeric string, as text for SetIntLimitFromText (which names the rule).
std::string JsonScalarText(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

absl::Status ApplySpeculative(LimitValues& out, std::string_view flag, const json& config) {
  auto it = config.find("num_speculative_tokens");
  if (it == config.end() || it->is_null()) {
    return absl::InvalidArgumentError(
        StrCat(kOrigin, "--", flag, " '", config.dump(),
               "': has no num_speculative_tokens; add it there or pass --num-speculative-tokens"));
  }
  return SetIntLimitFromText(out, "num-speculative-tokens", JsonScalarText(*it),
                             StrCat(kOrigin, "--", flag, " num_speculative_tokens"));
}

absl::Status ApplyCompilation(LimitValues& out, std::string_view flag, const json& config) {
  const std::string origin = StrCat(kOrigin, "--", flag, " ");
  if (auto it = config.find("max_cudagraph_capture_size"); it != config.end() && !it->is_null()) {
    return SetIntLimitFromText(out, "max-cudagraph-capture-size", JsonScalarText(*it),
                               origin + "max_cudagraph_capture_size");
  }
  if (auto it = config.find("cudagraph_capture_sizes");
      it != config.end() && it->is_array() && !it->empty()) {
    int64_t largest = 0;
    for (const json& v : *it) {
      if (!v.is_number_integer()) {
        return absl::InvalidArgumentError(StrCat(origin, "cudagraph_capture_sizes ", it->dump(),
                                                 ": expected a list of integers"));
      }
      largest = std::max(largest, v.get<int64_t>());
    }
    return SetIntLimitFromText(out, "max-cudagraph-capture-size", StrCat(largest),
                               origin + "cudagraph_capture_sizes");
  }
  return absl::OkStatus();
}

absl::Status Apply(LimitValues& out, const Known& known, std::string_view shown_flag,
                   std::string_view value) {
  switch (known.kind) {
    case Kind::kInt:
      return SetIntLimitFromText(out, known.limit_flag, value, StrCat(kOrigin, shown_flag));
    case Kind::kKvDtype:
      return SetKvCacheDtypeFromText(out, value, StrCat(kOrigin, shown_flag));
    case Kind::kSpeculative: {
      ASSIGN_OR_RETURN(json j, ParseJsonArg(known.name, value));
      return ApplySpeculative(out, known.name, j);
    }
    case Kind::kCompilation: {
      // -O3 and -O 3 are optimization levels, not configs.
      if (!value.empty() && value.front() != '{') return absl::OkStatus();
      ASSIGN_OR_RETURN(json j, ParseJsonArg(known.name, value));
      return ApplyCompilation(out, known.name, j);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LimitValues> ParseVllmArgs(std::string_view command_line) {
  absl::StatusOr<std::vector<std::string>> words = ShellSplit(command_line);
  if (!words.ok()) {
    return absl::InvalidArgumentError(
        StrCat("--vllm-args \"", command_line, "\": ", words.status().message()));
  }
  LimitValues out;
  const std::vector<std::string>& w = *words;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& word = w[i];
    if (word.size() < 2 || word[0] != '-') continue;  // positional: vllm, serve, the model
    std::string body = word.substr(word[1] == '-' ? 2 : 1);
    std::optional<std::string> inline_value;
    // -O3: a short flag glued to its value.
    if (word[1] != '-' && body.size() > 1 && body[0] == 'O' && body[1] != '.') {
      inline_value = body.substr(1);
      body.resize(1);  // "O"
    }
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body.resize(eq);
    }
    std::string name = ReplaceAll(body, '_', '-');
    // Dotted form: --speculative-config.num_speculative_tokens=3.
    std::string sub_key;
    if (const size_t dot = name.find('.'); dot != std::string::npos) {
      sub_key = ReplaceAll(name.substr(dot + 1), '-', '_');
      name.resize(dot);
    }
    const Known* known = FindKnown(name);
    if (known == nullptr) continue;  // a flag prewarm does not use (--port 8000)
    std::string value;
    if (inline_value.has_value()) {
      value = *inline_value;
    } else if (i + 1 < w.size()) {
      value = w[++i];
    } else {
      return absl::InvalidArgumentError(StrCat(kOrigin, word, ": the flag has no value"));
    }
    if (!sub_key.empty()) {
      if (known->kind != Kind::kSpeculative && known->kind != Kind::kCompilation) continue;
      // Other speculative fields (method, model) do not change any key.
      if (known->kind == Kind::kSpeculative && sub_key != "num_speculative_tokens") continue;
      if (absl::Status depth = CheckJsonDepth(value); !depth.ok()) {
        return absl::InvalidArgumentError(StrCat(kOrigin, word, ": ", depth.message()));
      }
      json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
      json config = json::object();
      config[sub_key] = parsed.is_discarded() ? json(value) : parsed;
      RETURN_IF_ERROR(known->kind == Kind::kSpeculative
                          ? ApplySpeculative(out, known->name, config)
                          : ApplyCompilation(out, known->name, config));
      continue;
    }
    RETURN_IF_ERROR(Apply(out, *known, word.substr(0, word.find('=')), value));
  }
  return out;
}

}  // namespace prewarm
