// A dlopen'ed library with typed symbol lookup. The handle is never closed: the compilers
// keep global state that does not survive dlclose.
#ifndef PREWARM_UTIL_DYNAMIC_LIBRARY_H_
#define PREWARM_UTIL_DYNAMIC_LIBRARY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

class DynamicLibrary {
 public:
  // The first of `names` that loads. FailedPrecondition listing every name and dlerror().
  static absl::StatusOr<DynamicLibrary> Open(const std::vector<std::string>& names);
  // FailedPrecondition naming the symbol when it is missing.
  template <typename Fn>
  absl::Status Get(const char* symbol, Fn*& out) const {
    void* p = Lookup(symbol);
    if (p == nullptr) return MissingSymbol(symbol);
    out = reinterpret_cast<Fn*>(p);
    return absl::OkStatus();
  }
  // The real file the library was loaded from ("/usr/lib/.../libamdhip64.so.5.2.21153").
  const std::string& path() const { return path_; }

 private:
  void* Lookup(const char* symbol) const;
  absl::Status MissingSymbol(const char* symbol) const;
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace prewarm

#endif  // PREWARM_UTIL_DYNAMIC_LIBRARY_H_
