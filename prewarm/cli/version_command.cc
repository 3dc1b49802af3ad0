// prewarm --version: the version and the identity of each compiler it would compile with (part
// of every manager key, so two prewarms whose lines differ fill different cache directories).
// A compiler that cannot be opened is shown with the reason; that is not an error here.
#include "prewarm/cache/store.h"
#include "prewarm/cli/commands.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {

int RunVersion(std::ostream& out) {
  out << "prewarm " << kPrewarmVersion << "\n";
  const std::pair<Platform, const char*> platforms[] = {{Platform::kAmd, "AMD (hipRTC)"},
                                                        {Platform::kNvidia, "NVIDIA (NVRTC)"}};
  for (const auto& [platform, name] : platforms) {
    absl::StatusOr<std::unique_ptr<Toolchain>> tc = OpenToolchain(platform);
    out << "  " << name << ": ";
    if (tc.ok()) {
      out << (*tc)->Identity() << "\n";
    } else {
      out << "not available: " << tc.status().message() << "\n";
    }
  }
  return kExitOk;
}

}  // namespace prewarm
