// prewarm replay: dispatches each step of a trace and reports the keys each launcher reaches.
// Out-of-range and malformed steps are reported with the rule they break; the exit code is 2
// when there was any, after every step has been reported. An entry that is present but cannot
// be read (an errno: EIO, EACCES, EMFILE) is an ERROR naming the path and why, counted apart from
// hits and misses, and the exit code is then 1 (an I/O error, DESIGN.md section 7).
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

#include "nlohmann/json.hpp"
#include "prewarm/catalog/catalog.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/toolchain/code_object.h"
#include "prewarm/util/files.h"
#include "prewarm/util/json.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

// The longest trace line read: a step of max_num_seqs' largest value (65536 requests) written
// out as JSON Lines is under 4 MiB. A longer line is reported as malformed and skipped without
// being held: nlohmann's parse of a line costs about 12 times its size.
constexpr size_t kMaxTraceLineBytes = size_t{8} << 20;

// Lines of a stream, each at most kMaxTraceLineBytes; a longer one is read through to its end
// and returned empty with `too_long` set.
class TraceLines {
 public:
  explicit TraceLines(std::istream& in) : in_(in) {}
  bool Next(std::string& line, bool& too_long) {
    line.clear();
    too_long = false;
    bool any = false;
    for (;;) {
      if (pos_ == end_) {
        in_.read(buf_, sizeof(buf_));
        end_ = static_cast<size_t>(in_.gcount());
        pos_ = 0;
        if (end_ == 0) return any;
      }
      any = true;
      const char* start = buf_ + pos_;
      const void* nl = std::memchr(start, '\n', end_ - pos_);
      const size_t n = nl == nullptr ? end_ - pos_ : static_cast<const char*>(nl) - start;
      if (!too_long && line.size() + n > kMaxTraceLineBytes) {
        too_long = true;
        line.clear();
        line.shrink_to_fit();
      }
      if (!too_long) line.append(start, n);
      pos_ += n;
      if (nl != nullptr) {
        ++pos_;
        return true;
      }
    }
  }

 private:
  std::istream& in_;
  char buf_[1 << 16];
  size_t pos_ = 0, end_ = 0;
};

// What StepFromJson does not bound: the requests of one step (it reads any number) and the
// integers (an unsigned one past int64 would wrap to a negative one). InvalidArgument naming
// the field.
absl::Status CheckStepBounds(const nlohmann::json& j) {
  if (!j.is_object()) return absl::OkStatus();
  const auto requests = j.find("requests");
  if (requests == j.end() || !requests->is_array()) return absl::OkStatus();
  if (requests->size() > static_cast<size_t>(kMaxNumSeqsCap)) {
    return absl::InvalidArgumentError(StrCat(requests->size(), " requests, more than ",
                                             kMaxNumSeqsCap, " (the largest max_num_seqs)"));
  }
  for (size_t i = 0; i < requests->size(); ++i) {
    const nlohmann::json& r = (*requests)[i];
    if (!r.is_object()) continue;
    for (const char* field : {"q_len", "ctx"}) {
      const auto it = r.find(field);
      if (it != r.end() && it->is_number_unsigned() &&
          it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(StrCat("requests[", i, "].", field, ": ", it->dump(),
                                                 "; expected an integer below 2^63"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int RunReplay(const Config& config, std::ostream& out) {
  if (config.trace.empty()) {
    return ReportError(absl::InvalidArgumentError("replay needs --trace FILE (JSON Lines)"));
  }
  // Without --arch, the arch the cache was filled for (its manifest), else a visible GPU's.
  absl::StatusOr<Inputs> in =
      ResolveInputs(config, AutoArchPolicy::kFallBackToGfx942, /*archs_from_manifest=*/true);
  if (!in.ok()) return ReportError(in.status());
  if (in->archs.size() != 1) {
    std::vector<std::string> names;
    for (const Arch& a : in->archs) names.push_back(a.name);
    return ReportError(absl::InvalidArgumentError(StrCat(
        config.arch_origin.empty() ? in->arch_note
                                   : StrCat(config.arch_origin, "=", ShownValue(config.arch)),
        ": replay dispatches for one arch; pass --arch with one of ", StrJoin(names, ", "))));
  }
  const Arch& arch = in->archs.front();
  // A trace is a line per step; 1 GB holds millions of them.
  if (absl::Status ok = CheckInputFile("--trace", config.trace, int64_t{1} << 30); !ok.ok()) {
    return ReportError(ok);
  }
  std::ifstream file(config.trace);
  if (!file) {
    return ReportError(
        absl::InvalidArgumentError(StrCat("--trace ", config.trace, ": cannot open the file")));
  }
  if (!in->arch_note.empty()) out << "arch: " << in->arch_note << "\n";
  Toolchains toolchains;
  ManagerKeys manager_keys;
  const CacheStore store(config.cache_dir, CheckCodeObject);
  int64_t hits = 0, misses = 0, lookups = 0;
  std::vector<std::string> unread;  // "launcher key: why", lookups an I/O error kept from an answer
  std::string line;
  bool too_long = false;
  int64_t line_no = 0, steps = 0, bad = 0;
  std::set<std::string> distinct;
  TraceLines lines(file);
  while (lines.Next(line, too_long)) {
    ++line_no;
    const std::string where = StrCat(config.trace, ":", line_no);
    if (too_long) {
      ++steps;
      ++bad;
      out << where << ": malformed step: the line is longer than " << kMaxTraceLineBytes
          << " bytes (a step holds at most " << kMaxNumSeqsCap << " requests)\n";
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++steps;
    absl::StatusOr<nlohmann::json> j = ParseJson(line);
    if (j.ok()) {
      if (absl::Status bounds = CheckStepBounds(*j); !bounds.ok()) j = bounds;
    }
    absl::StatusOr<Step> step = j.ok() ? StepFromJson(*j) : absl::StatusOr<Step>(j.status());
    if (!step.ok()) {
      ++bad;
      out << where << ": malformed step: " << step.status().message() << "\n";
      continue;
    }
    if (absl::Status range = CheckStep(*step, in->limits); !range.ok()) {
      ++bad;
      out << where << ": out of range: " << range.message() << "\n";
      continue;
    }
    out << where << ": " << DescribeStep(*step) << "\n";
    for (const DispatchedLauncher& d : DispatchStep(*step, in->limits, in->shape, arch)) {
      absl::StatusOr<std::string> mk = manager_keys.Get(toolchains, arch, d.name);
      if (!mk.ok()) return ReportError(absl::InternalError(mk.status().message()));
      for (const Key& key : d.keys) {
        const EntryRef ref{d.name, *mk, key.String(), arch.name};
        const CacheStore::Lookup l = store.Read(ref, CacheStore::ReadLock::kWait);
        ++lookups;
        distinct.insert(StrCat(d.name, " ", key.String()));
        if (l.read_failed) {
          // Present but not read: neither a hit nor a miss (an absent or rejected entry).
          const std::string path = store.EntryPath(ref);
          unread.push_back(StrCat(
              d.name, " ", key.String(), ": ",
              l.detail.find(path) == std::string::npos ? StrCat(path, ": ", l.detail) : l.detail));
          out << "  ERROR " << unread.back() << "\n";
          continue;
        }
        const bool hit = l.state == CacheStore::State::kHit;
        (hit ? hits : misses) += 1;
        out << (hit ? "  hit  " : "  MISS ") << d.name << " " << key.String();
        if (l.state == CacheStore::State::kRejected) out << " (rejected: " << l.detail << ")";
        out << "\n";
      }
    }
  }
  if (file.bad()) {
    return ReportError(absl::InternalError(StrCat("--trace ", config.trace, ": read error")));
  }
  out << "replay: " << steps << " steps, " << steps - bad << " in range, " << bad
      << " out of range or malformed; " << distinct.size() << " distinct keys; " << hits
      << " hits, " << misses << " misses";
  if (!unread.empty()) out << ", " << unread.size() << " not read (I/O error)";
  out << " in " << config.cache_dir << "\n";
  const std::string strict_misses =
      config.strict && misses > 0
          ? StrCat(misses, " launches missed the cache in ", config.cache_dir, " (--strict)")
          : "";
  // An entry that is there but cannot be read is an I/O error (exit 1): not a miss, which says
  // the entry is absent or bad, and not something prewarm run would cure.
  const std::string io_error =
      unread.empty() ? ""
                     : StrCat(unread.size(), " of ", lookups,
                              " lookups could not read their entry in ", config.cache_dir,
                              " (ERROR above): an I/O error, not a miss", FirstItems(unread, 3),
                              strict_misses.empty() ? "" : StrCat("; besides, ", strict_misses));
  if (bad > 0) {
    if (!io_error.empty()) LogError(io_error);
    return ReportError(
        absl::InvalidArgumentError(StrCat(config.trace, ": ", bad, " of ", steps,
                                          " steps are out of range or malformed (listed above)")));
  }
  if (!io_error.empty()) return ReportError(absl::InternalError(io_error));
  if (!strict_misses.empty()) return ReportError(absl::NotFoundError(strict_misses));
  return kExitOk;
}

}  // namespace prewarm
