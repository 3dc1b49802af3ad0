#include "prewarm/limits/vllm_args.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "prewarm/util/json.h"
#include "prewarm/util/log.h"
#include "prewarm/util/shell_split.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace prewarm {
namespace {

using nlohmann::json;

constexpr std::string_view kOrigin = "--vllm-args ";

// Flags that take a value and that we read. Everything else is skipped. Where vLLM defines each
// (vllm-project/vllm): the limits and their short forms (-tp, -dcp, -O, -cc) in
// vllm/engine/arg_utils.py (EngineArgs.add_cli_args), their fields in vllm/config/scheduler.py,
// cache.py (CacheDType), parallel.py (decode_context_parallel_size), compilation.py
// (cudagraph_capture_sizes, max_cudagraph_capture_size) and speculative.py.
enum class Kind {
  kInt,
  kKvDtype,
  kSpeculative,
  kCompilation,
  kGraphSizes,
  kHfOverrides,
  kConfig,
  kPerformanceMode,
  kChunkedPrefill,  // a bare flag: --enable-chunked-prefill or --no-enable-chunked-prefill
};
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
    {"decode-context-parallel-size", Kind::kInt, "decode-context-parallel-size"},
    {"dcp", Kind::kInt, "decode-context-parallel-size"},
    {"block-size", Kind::kInt, "block-size"},
    {"max-cudagraph-capture-size", Kind::kInt, "max-cudagraph-capture-size"},
    {"num-speculative-tokens", Kind::kInt, "num-speculative-tokens"},
    {"kv-cache-dtype", Kind::kKvDtype, ""},
    {"speculative-config", Kind::kSpeculative, ""},
    {"sc", Kind::kSpeculative, ""},  // vLLM's short form of --speculative-config
    {"compilation-config", Kind::kCompilation, ""},
    {"cc", Kind::kCompilation, ""},  // vLLM's short form of --compilation-config
    {"O", Kind::kCompilation, ""},
    {"cuda-graph-sizes", Kind::kGraphSizes, ""},
    {"cudagraph-capture-sizes", Kind::kGraphSizes, ""},  // the compilation config's, top level
    {"performance-mode", Kind::kPerformanceMode, ""},
    {"enable-chunked-prefill", Kind::kChunkedPrefill, ""},
    {"no-enable-chunked-prefill", Kind::kChunkedPrefill, ""},
    {"hf-overrides", Kind::kHfOverrides, ""},
    {"config", Kind::kConfig, ""},
};

const Known* FindKnown(std::string_view name) {
  for (const Known& k : kKnown) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// The long flags of kKnown (not -tp, -dcp, -cc, -O).
bool IsLongFlag(const Known& k) {
  return k.name != "tp" && k.name != "dcp" && k.name != "cc" && k.name != "sc" && k.name != "O";
}

// Edits (insertions, deletions, substitutions) between a and b, up to `cap` + 1.
size_t EditDistance(std::string_view a, std::string_view b, size_t cap) {
  if (a.size() > b.size() + cap || b.size() > a.size() + cap) return cap + 1;
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return std::min(row[b.size()], cap + 1);
}

// A long flag prewarm does not read (`name` normalized, `shown` as written): vLLM's argparse
// takes an abbreviation as the one flag it begins (allow_abbrev; `--max-num-seq 12` sets
// max_num_seqs there), so one that begins a flag prewarm reads is exit 2 asking for the full
// spelling (prewarm does not know every flag of vLLM's, so it cannot tell whether vLLM finds it
// unique). One a letter or two from such a flag is a warning: vLLM refuses a flag it does not
// know, but prewarm cannot tell a misspelling from a flag it never reads.
absl::Status CheckUnreadFlag(std::string_view name, std::string_view shown) {
  if (name.empty()) return absl::OkStatus();  // "--": the end of the options
  std::vector<std::string> begun;
  for (const Known& k : kKnown) {
    if (IsLongFlag(k) && k.name.size() > name.size() && k.name.substr(0, name.size()) == name) {
      begun.push_back(StrCat("--", k.name));
    }
  }
  if (begun.size() == 1) {
    return absl::InvalidArgumentError(StrCat(
        kOrigin, ShownValue(shown), ": vLLM reads an abbreviated flag as the flag it begins, here ",
        begun[0], " unless another flag of vLLM's begins so too; spell it out (", begun[0],
        ") so that prewarm reads what the server runs"));
  }
  if (begun.size() > 1) {
    return absl::InvalidArgumentError(StrCat(kOrigin, ShownValue(shown), ": begins ",
                                             StrJoin(begun, ", "),
                                             "; vLLM refuses an ambiguous abbreviation: spell "
                                             "out the flag meant"));
  }
  if (name.size() < 6) return absl::OkStatus();
  for (const Known& k : kKnown) {
    if (IsLongFlag(k) && EditDistance(name, k.name, 2) <= 2) {
      LogWarning(StrCat(kOrigin, ShownValue(shown), ": not a flag prewarm reads; did you mean --",
                        k.name,
                        "? (vLLM refuses a flag it does not know; prewarm planned without it)"));
      break;
    }
  }
  return absl::OkStatus();
}

// `shown`: the flag as the line spells it ("-O", "--compilation-config").
absl::StatusOr<json> ParseJsonArg(std::string_view shown, std::string_view text) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) {
    return absl::InvalidArgumentError(StrCat(kOrigin, shown, ": ", depth.message()));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        StrCat(kOrigin, shown, " '", ShownValue(text), "': malformed JSON (expected an object)"));
  }
  return j;
}

// A JSON number or numeric string, as text for SetIntLimitFromText (which names the rule).
std::string JsonScalarText(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// vLLM's MTP methods ("mtp" and the model-specific names it maps to it) take the count from the
// model when the config has none (vllm/config/speculative.py).
bool IsMtpMethod(const json& config) {
  auto it = config.find("method");
  if (it == config.end() || !it->is_string()) return false;
  const std::string m = it->get<std::string>();
  return m == "mtp" || (m.size() > 4 && m.compare(m.size() - 4, 4, "_mtp") == 0);
}

// A YAML mapping as JSON (the form vLLM's JSON flags take): scalars that read as integers,
// numbers or booleans become those, others strings.
json YamlToJson(const YAML::Node& v) {
  if (v.IsMap()) {
    json j = json::object();
    for (const auto& item : v) j[item.first.as<std::string>()] = YamlToJson(item.second);
    return j;
  }
  if (v.IsSequence()) {
    json j = json::array();
    for (const auto& e : v) j.push_back(YamlToJson(e));
    return j;
  }
  if (!v.IsScalar()) return nullptr;
  const std::string& text = v.Scalar();
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !parsed.is_discarded() && parsed.is_number() ? parsed : json(text);
}

// Where a field of a JSON flag came from: "--vllm-args -O max_cudagraph_capture_size" for the
// JSON form (`shown` "-O", `sep` " "), "--vllm-args -O.max_cudagraph_capture_size" for the dotted
// one (`sep` ".").
struct FieldOrigin {
  std::string_view shown;
  std::string_view sep;
  std::string Of(std::string_view field) const { return StrCat(kOrigin, shown, sep, field); }
};

absl::Status ApplySpeculative(LimitValues& out, const FieldOrigin& from, const json& config) {
  auto it = config.find("num_speculative_tokens");
  if (it == config.end() || it->is_null()) {
    if (IsMtpMethod(config)) {
      out.speculative_tokens_from_model = Sourced<bool>{true, StrCat(kOrigin, from.shown)};
      out[IntLimit::kNumSpeculativeTokens].reset();
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        StrCat(kOrigin, from.shown, " '", ShownValue(config.dump()),
               "': has no num_speculative_tokens (only method mtp takes it from the model); add "
               "it there or pass --num-speculative-tokens"));
  }
  out.speculative_tokens_from_model.reset();
  return SetIntLimitFromText(out, "num-speculative-tokens", JsonScalarText(*it),
                             from.Of("num_speculative_tokens"));
}

// vLLM's CompilationConfig takes cudagraph_capture_sizes as list[int] (pydantic): a value that
// is not a list, or an entry that is not an integer, fails vLLM's start, so it is refused here
// too, naming the entry as given; each entry must also be a valid capture size.
absl::Status ApplyCompilation(LimitValues& out, const FieldOrigin& from, const json& config) {
  if (auto it = config.find("max_cudagraph_capture_size"); it != config.end() && !it->is_null()) {
    return SetIntLimitFromText(out, "max-cudagraph-capture-size", JsonScalarText(*it),
                               from.Of("max_cudagraph_capture_size"));
  }
  auto it = config.find("cudagraph_capture_sizes");
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  const std::string origin = from.Of("cudagraph_capture_sizes");
  if (!it->is_array()) {
    return absl::InvalidArgumentError(StrCat(origin, "=", ShownValue(JsonScalarText(*it)),
                                             ": expected a list of integers, e.g. [1,2,4,8]"));
  }
  if (it->empty()) return absl::OkStatus();
  LimitValues largest;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    LimitValues one;
    RETURN_IF_ERROR(SetIntLimitFromText(one, "max-cudagraph-capture-size", JsonScalarText(v),
                                        StrCat(origin, "[", i, "]")));
    if (!largest[IntLimit::kMaxCudagraphCaptureSize].has_value() ||
        one[IntLimit::kMaxCudagraphCaptureSize]->value >
            largest[IntLimit::kMaxCudagraphCaptureSize]->value) {
      largest = one;
    }
  }
  int64_t value = largest[IntLimit::kMaxCudagraphCaptureSize]->value;
  // Dotted list values of one flag are concatenated by vLLM's parser
  // (vllm/utils/argparse_utils.py, FlexibleArgumentParser.parse_args: `-cc.cudagraph_capture_sizes+
  // 1024` appends, and two lists of one key join): the largest is the largest of them all.
  if (const auto& prev = out[IntLimit::kMaxCudagraphCaptureSize];
      from.sep == "." && prev.has_value() && prev->origin == origin) {
    value = std::max(value, prev->value);
  }
  out[IntLimit::kMaxCudagraphCaptureSize] = Sourced<int64_t>{value, origin};
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
      ASSIGN_OR_RETURN(json j, ParseJsonArg(shown_flag, value));
      return ApplySpeculative(out, {shown_flag, " "}, j);
    }
    case Kind::kCompilation: {
      // -O3 and -O 3 are optimization levels, not configs.
      if (!value.empty() && value.front() != '{') return absl::OkStatus();
      ASSIGN_OR_RETURN(json j, ParseJsonArg(shown_flag, value));
      return ApplyCompilation(out, {shown_flag, " "}, j);
    }
    case Kind::kHfOverrides: {
      ASSIGN_OR_RETURN(json j, ParseJsonArg(shown_flag, value));
      out.hf_overrides = Sourced<std::string>{j.dump(), StrCat(kOrigin, shown_flag)};
      return absl::OkStatus();
    }
    case Kind::kPerformanceMode:
      // vllm/config/vllm.py, PerformanceMode; vllm/engine/arg_utils.py doubles the batch
      // defaults for throughput.
      if (value != "balanced" && value != "interactivity" && value != "throughput") {
        return absl::InvalidArgumentError(
            StrCat(kOrigin, shown_flag, "=", ShownValue(value),
                   ": not a performance mode; vLLM's are balanced, interactivity, throughput"));
      }
      out.throughput_mode = Sourced<bool>{value == "throughput", StrCat(kOrigin, shown_flag)};
      return absl::OkStatus();
    case Kind::kGraphSizes:
    case Kind::kConfig:
    case Kind::kChunkedPrefill:
      break;  // read by ParseWords: they take several words, a file or none
  }
  return absl::OkStatus();
}

// --cuda-graph-sizes N [N ...] (or one JSON list): vLLM captures these batch sizes (one value N
// means 1, 2, 4 and the multiples of 8 up to N; vllm/config/scheduler.py, cuda_graph_sizes, which
// vllm/config/compilation.py turns into cudagraph_capture_sizes); the largest is the capture
// size. Consumes the integer words after the flag.
absl::Status ApplyGraphSizes(LimitValues& out, std::string_view shown_flag,
                             const std::vector<std::string>& values) {
  int64_t largest = 0;
  for (const std::string& v : values) {
    std::string_view text = v;
    while (!text.empty() && (text.front() == '[' || text.front() == ',')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ']' || text.back() == ',')) text.remove_suffix(1);
    for (std::string_view part : StrSplit(text, ',')) {
      const std::optional<int64_t> n = ParseInt64(StripWhitespace(part));
      if (!n.has_value() || *n < 1) {
        return absl::InvalidArgumentError(StrCat(kOrigin, shown_flag, " ",
                                                 ShownValue(StrJoin(values, " ")),
                                                 ": expected positive integers"));
      }
      largest = std::max(largest, *n);
    }
  }
  if (largest == 0) {
    return absl::InvalidArgumentError(StrCat(kOrigin, shown_flag, ": the flag has no value"));
  }
  return SetIntLimitFromText(out, "max-cudagraph-capture-size", StrCat(largest),
                             StrCat(kOrigin, shown_flag));
}

// Bounds of a --config file, checked on the parser's events before any node is built: yaml-cpp
// shares an aliased node rather than copying it, so an alias to its own anchor is a cycle (a
// SIGSEGV in any walk of it) and a few nested aliases stand for billions of nodes; and each node
// it builds costs about 1.5 KB, so a 16 MiB file of short items would take gigabytes. A serving
// config holds a few dozen flags, so aliases are refused outright.
constexpr int kMaxConfigDepth = 32;
constexpr int64_t kMaxConfigNodes = 1 << 14;

struct ConfigRefused {
  std::string why;
};

class ConfigBounds final : public YAML::EventHandler {
 public:
  // vLLM reads the file with yaml.safe_load, which refuses a stream of several documents
  // ("expected a single document in the stream"); so does this, rather than read the first.
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      throw ConfigRefused{StrCat("line ", mark.line + 1,
                                 ": a second YAML document (---); a config file is one document "
                                 "(vLLM refuses more: expected a single document in the stream)")};
    }
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw ConfigRefused{StrCat("line ", mark.line + 1, ", column ", mark.column + 1,
                               ": a YAML alias (*name); aliases are not accepted in a config "
                               "file (write the value out)")};
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Open(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Open(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Node(const YAML::Mark& mark) {
    if (++nodes_ > kMaxConfigNodes) {
      throw ConfigRefused{StrCat("line ", mark.line + 1, ": more than ", kMaxConfigNodes,
                                 " YAML nodes (a config file holds a few dozen flags)")};
    }
  }
  void Open(const YAML::Mark& mark) {
    Node(mark);
    if (++depth_ > kMaxConfigDepth) {
      throw ConfigRefused{StrCat("line ", mark.line + 1, ", column ", mark.column + 1,
                                 ": nested deeper than ", kMaxConfigDepth, " levels")};
    }
  }
  int depth_ = 0;
  int64_t nodes_ = 0;
  int documents_ = 0;
};

// vLLM's --config FILE (YAML; vllm/utils/argparse_utils.py, FlexibleArgumentParser's
// load_config_file): each key is a flag, read as if it came before the command line (whose flags
// win). A scalar is its value, true a bare flag (false the flag's --no- form), a list several
// words, a mapping its JSON. No aliases, at most kMaxConfigDepth levels and kMaxConfigNodes nodes
// (ConfigBounds).
absl::StatusOr<std::vector<std::string>> ConfigFileWords(const std::string& path) {
  const std::string origin = StrCat(kOrigin, "--config ", path);
  if (absl::Status ok = CheckInputFile(StrCat(kOrigin, "--config"), path, int64_t{16} << 20);
      !ok.ok()) {
    return ok;
  }
  absl::StatusOr<std::string> file = ReadFile(path);
  if (!file.ok()) return absl::InvalidArgumentError(StrCat(origin, ": ", file.status().message()));
  std::vector<std::string> words;
  try {
    {
      std::istringstream in(*file);
      YAML::Parser parser(in);
      ConfigBounds bounds;
      while (parser.HandleNextDocument(bounds)) {
      }
    }
    const YAML::Node root = YAML::Load(*file);
    if (root.IsNull()) return words;
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(
          StrCat(origin, ": expected a YAML mapping of flag names to values"));
    }
    for (const auto& item : root) {
      const std::string key = item.first.as<std::string>();
      const YAML::Node& v = item.second;
      if (v.IsScalar()) {
        const std::string text = v.Scalar();
        if (text == "true" || text == "True") {
          words.push_back("--" + key);
        } else if (text == "false" || text == "False") {
          words.push_back("--no-" + key);  // as vLLM's load_config_file writes a false flag
        } else {
          words.push_back("--" + key);
          words.push_back(text);
        }
      } else if (v.IsSequence()) {
        words.push_back("--" + key);
        for (const auto& e : v) {
          if (!e.IsScalar()) {
            return absl::InvalidArgumentError(
                StrCat(origin, ": ", ShownValue(key), ": expected a list of scalars"));
          }
          words.push_back(e.Scalar());
        }
      } else if (v.IsMap()) {
        words.push_back("--" + key);
        words.push_back(YamlToJson(v).dump());
      }
    }
  } catch (const ConfigRefused& e) {
    return absl::InvalidArgumentError(StrCat(origin, ": ", e.why));
  } catch (const YAML::Exception& e) {
    // The parser's own words and place, without yaml-cpp's "yaml-cpp: error at line ..." prefix.
    if (e.mark.is_null()) return absl::InvalidArgumentError(StrCat(origin, ": ", e.msg));
    return absl::InvalidArgumentError(StrCat(origin, ": malformed YAML at line ", e.mark.line + 1,
                                             ", column ", e.mark.column + 1, ": ", e.msg));
  }
  return words;
}

}  // namespace

namespace {

// Reads the words of a command line (or of a --config file) into `out`; `config_file` receives
// the path of a --config flag (read by the caller).
absl::Status ParseWords(const std::vector<std::string>& w, LimitValues& out,
                        std::string* config_file) {
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& word = w[i];
    if (word.size() < 2 || word[0] != '-') continue;  // positional: vllm, serve, the model
    std::string body = word.substr(word[1] == '-' ? 2 : 1);
    std::optional<std::string> inline_value;
    // -O3: a short flag glued to its value.
    const bool glued = word[1] != '-' && body.size() > 1 && body[0] == 'O' && body[1] != '.';
    if (glued) {
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
    bool append = false;  // --flag.key+ a,b: vLLM appends the list ["a", "b"] to key's
    if (const size_t dot = name.find('.'); dot != std::string::npos) {
      sub_key = ReplaceAll(name.substr(dot + 1), '-', '_');
      name.resize(dot);
      if (sub_key.size() > 1 && sub_key.back() == '+') {
        sub_key.pop_back();
        append = true;
      }
    }
    const Known* known = FindKnown(name);
    if (known == nullptr) {  // a flag prewarm does not use (--port 8000)
      if (word[1] == '-') RETURN_IF_ERROR(CheckUnreadFlag(name, word.substr(0, word.find('='))));
      continue;
    }
    const std::string shown = glued ? word.substr(0, 2) : word.substr(0, word.find('='));
    if (known->kind == Kind::kChunkedPrefill) {  // argparse's BooleanOptionalAction: no value
      if (inline_value.has_value()) {
        return absl::InvalidArgumentError(
            StrCat(kOrigin, ShownValue(word),
                   ": --enable-chunked-prefill takes no value (vLLM refuses one); ",
                   "write --enable-chunked-prefill or --no-enable-chunked-prefill"));
      }
      out.chunked_prefill = Sourced<bool>{name == "enable-chunked-prefill", StrCat(kOrigin, shown)};
      continue;
    }
    if (known->kind == Kind::kGraphSizes) {  // one or more values
      std::vector<std::string> values;
      if (inline_value.has_value()) values.push_back(*inline_value);
      while (i + 1 < w.size() && !w[i + 1].empty() && w[i + 1][0] != '-') values.push_back(w[++i]);
      RETURN_IF_ERROR(ApplyGraphSizes(out, shown, values));
      continue;
    }
    std::string value;
    if (inline_value.has_value()) {
      value = *inline_value;
    } else if (i + 1 < w.size()) {
      value = w[++i];
    } else {
      return absl::InvalidArgumentError(StrCat(kOrigin, word, ": the flag has no value"));
    }
    if (known->kind == Kind::kConfig) {
      if (config_file == nullptr) {
        return absl::InvalidArgumentError(
            StrCat(kOrigin, "--config ", ShownValue(value), ": a config file cannot name another"));
      }
      *config_file = value;
      continue;
    }
    if (!sub_key.empty()) {
      if (known->kind != Kind::kSpeculative && known->kind != Kind::kCompilation) continue;
      // Other speculative fields (model, draft settings) do not change any key; method does.
      if (known->kind == Kind::kSpeculative && sub_key != "num_speculative_tokens" &&
          sub_key != "method") {
        continue;
      }
      if (absl::Status depth = CheckJsonDepth(value); !depth.ok()) {
        return absl::InvalidArgumentError(StrCat(kOrigin, word, ": ", depth.message()));
      }
      json parsed = json::array();
      if (append) {  // the words between commas, as strings (pydantic reads "8" as 8)
        for (std::string_view part : StrSplit(value, ',')) parsed.push_back(std::string(part));
      } else {
        parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
      }
      if (known->kind == Kind::kSpeculative && sub_key == "method") {
        // Dotted method alone: an MTP method with no count so far takes the model's.
        json config = json::object();
        config["method"] = parsed.is_discarded() ? json(value) : parsed;
        if (IsMtpMethod(config) && !out[IntLimit::kNumSpeculativeTokens].has_value()) {
          out.speculative_tokens_from_model = Sourced<bool>{true, StrCat(kOrigin, shown)};
        }
        continue;
      }
      json config = json::object();
      config[sub_key] = parsed.is_discarded() ? json(value) : parsed;
      const std::string base = word.substr(0, word.find('.'));
      const FieldOrigin from{base, "."};
      RETURN_IF_ERROR(known->kind == Kind::kSpeculative ? ApplySpeculative(out, from, config)
                                                        : ApplyCompilation(out, from, config));
      continue;
    }
    RETURN_IF_ERROR(Apply(out, *known, shown, value));
  }
  return absl::OkStatus();
}

// `base` with every value `over` sets replaced by it.
LimitValues Overlay(LimitValues base, const LimitValues& over) {
  for (int i = 0; i < kNumIntLimits; ++i) {
    if (over.ints[i].has_value()) base.ints[i] = over.ints[i];
  }
  if (over.kv_cache_dtype.has_value()) base.kv_cache_dtype = over.kv_cache_dtype;
  if (over.graph_only.has_value()) base.graph_only = over.graph_only;
  if (over.hf_overrides.has_value()) base.hf_overrides = over.hf_overrides;
  if (over.chunked_prefill.has_value()) base.chunked_prefill = over.chunked_prefill;
  if (over.throughput_mode.has_value()) base.throughput_mode = over.throughput_mode;
  if (over[IntLimit::kNumSpeculativeTokens].has_value()) base.speculative_tokens_from_model.reset();
  if (over.speculative_tokens_from_model.has_value()) {
    base.speculative_tokens_from_model = over.speculative_tokens_from_model;
    base[IntLimit::kNumSpeculativeTokens].reset();
  }
  return base;
}

// Origins "--vllm-args --flag" of values read from a config file become
// "--vllm-args --config PATH: --flag".
void MarkConfigOrigins(LimitValues& v, const std::string& path) {
  const std::string from = StrCat(kOrigin, "--config ", path, ": ");
  auto mark = [&](std::string& origin) {
    if (origin.rfind(kOrigin, 0) == 0) origin = from + origin.substr(kOrigin.size());
  };
  for (auto& i : v.ints) {
    if (i.has_value()) mark(i->origin);
  }
  if (v.kv_cache_dtype.has_value()) mark(v.kv_cache_dtype->origin);
  if (v.hf_overrides.has_value()) mark(v.hf_overrides->origin);
  if (v.chunked_prefill.has_value()) mark(v.chunked_prefill->origin);
  if (v.throughput_mode.has_value()) mark(v.throughput_mode->origin);
  if (v.speculative_tokens_from_model.has_value()) mark(v.speculative_tokens_from_model->origin);
}

// ParseVllmArgs with every origin and message in terms of "--vllm-args" (kOrigin).
absl::StatusOr<LimitValues> ParseVllmArgsLine(std::string_view command_line) {
  absl::StatusOr<std::vector<std::string>> words = ShellSplit(command_line);
  if (!words.ok()) {
    return absl::InvalidArgumentError(
        StrCat("--vllm-args \"", ShownValue(command_line), "\": ", words.status().message()));
  }
  LimitValues line;
  std::string config_file;
  RETURN_IF_ERROR(ParseWords(*words, line, &config_file));
  if (config_file.empty()) return line;
  // The config file's flags first, the command line's over them (vLLM's precedence).
  ASSIGN_OR_RETURN(const std::vector<std::string> file_words, ConfigFileWords(config_file));
  LimitValues from_file;
  if (absl::Status s = ParseWords(file_words, from_file, nullptr); !s.ok()) {
    // The flag was a key of the file, not a word of --vllm-args: named once, after the file.
    std::string_view message(s.message().data(), s.message().size());
    if (message.starts_with(kOrigin)) message.remove_prefix(kOrigin.size());
    return absl::InvalidArgumentError(StrCat(kOrigin, "--config ", config_file, ": ", message));
  }
  MarkConfigOrigins(from_file, config_file);
  return Overlay(std::move(from_file), line);
}

// `text` with a leading "--vllm-args" replaced by `origin` (a value from PREWARM_VLLM_ARGS is
// named by the variable, never by a flag it did not come from).
std::string Reorigin(std::string_view text, std::string_view origin) {
  constexpr std::string_view kFlag = "--vllm-args";
  if (origin == kFlag || !text.starts_with(kFlag)) return std::string(text);
  return StrCat(origin, text.substr(kFlag.size()));
}

}  // namespace

absl::StatusOr<LimitValues> ParseVllmArgs(std::string_view command_line, std::string_view origin) {
  absl::StatusOr<LimitValues> v = ParseVllmArgsLine(command_line);
  if (!v.ok())
    return absl::Status(v.status().code(), Reorigin(std::string(v.status().message()), origin));
  for (auto& i : v->ints) {
    if (i.has_value()) i->origin = Reorigin(i->origin, origin);
  }
  for (std::string* o :
       {v->kv_cache_dtype.has_value() ? &v->kv_cache_dtype->origin : nullptr,
        v->graph_only.has_value() ? &v->graph_only->origin : nullptr,
        v->hf_overrides.has_value() ? &v->hf_overrides->origin : nullptr,
        v->speculative_tokens_from_model.has_value() ? &v->speculative_tokens_from_model->origin
                                                     : nullptr}) {
    if (o != nullptr) *o = Reorigin(*o, origin);
  }
  return v;
}

}  // namespace prewarm
