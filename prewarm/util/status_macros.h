// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr<T>.
// Abseil 20220623 ships neither, so these are ours. Both evaluate their argument once.
#ifndef PREWARM_UTIL_STATUS_MACROS_H_
#define PREWARM_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PREWARM_CONCAT_INNER_(a, b) a##b
#define PREWARM_CONCAT_(a, b) PREWARM_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                \
  do {                                       \
    ::absl::Status prewarm_status_ = (expr); \
    if (!prewarm_status_.ok()) {             \
      return prewarm_status_;                \
    }                                        \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  PREWARM_ASSIGN_OR_RETURN_IMPL_(PREWARM_CONCAT_(prewarm_statusor_, __LINE__), lhs, expr)

#define PREWARM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) {                                     \
    return std::move(statusor).status();                    \
  }                                                         \
  lhs = *std::move(statusor)

#endif  // PREWARM_UTIL_STATUS_MACROS_H_
