// A small logger (this Abseil has no absl/log). Lines go to stderr as
//   text: "prewarm: <level>: <message>"        (the default)
//   json: {"ts":"...","level":"...","msg":"..."}
// Thread-safe: each line is formatted first and written with one write(2).
#ifndef PREWARM_UTIL_LOG_H_
#define PREWARM_UTIL_LOG_H_

#include <string_view>

namespace prewarm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// Global settings; set once at start-up before other threads exist.
void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);

void Log(LogLevel level, std::string_view message);
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(std::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }

}  // namespace prewarm

#endif  // PREWARM_UTIL_LOG_H_
