#include "prewarm/util/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace prewarm {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level = level; }
void SetLogFormat(LogFormat format) { g_format = format; }

void Log(LogLevel level, std::string_view message) {
  if (level < g_level.load()) return;
  std::string line;
  if (g_format.load() == LogFormat::kJson) {
    nlohmann::json j = {
        {"ts", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone())},
        {"level", LevelName(level)},
        {"msg", message}};
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = "prewarm: ";
    if (level != LogLevel::kInfo) {
      line += LevelName(level);
      line += ": ";
    }
    line += message;
  }
  line += '\n';
  // One write per line so concurrent lines never interleave.
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

}  // namespace prewarm
