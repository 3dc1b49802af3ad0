#include "prewarm/util/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>

#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<DynamicLibrary> DynamicLibrary::Open(const std::vector<std::string>& names) {
  std::string errors;
  for (const std::string& name : names) {
    void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      StrAppend(errors, "\n  ", e != nullptr ? e : name.c_str());
      continue;
    }
    DynamicLibrary lib;
    lib.handle_ = h;
    link_map* map = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
      std::error_code ec;
      const auto real = std::filesystem::canonical(map->l_name, ec);
      lib.path_ = ec ? std::string(map->l_name) : real.string();
    } else {
      lib.path_ = name;
    }
    return lib;
  }
  return absl::FailedPreconditionError(
      StrCat("cannot load any of: ", StrJoin(names, ", "), errors));
}

void* DynamicLibrary::Lookup(const char* symbol) const { return ::dlsym(handle_, symbol); }

absl::Status DynamicLibrary::MissingSymbol(const char* symbol) const {
  return absl::FailedPreconditionError(StrCat(path_, " has no symbol ", symbol));
}

}  // namespace prewarm
