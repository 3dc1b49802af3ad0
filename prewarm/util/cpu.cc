#include "prewarm/util/cpu.h"

#include <sched.h>

#include <algorithm>
#include <fstream>

namespace prewarm {

int AvailableCpus(const std::string& cgroup_cpu_max) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = 1;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  std::ifstream in(cgroup_cpu_max);
  std::string quota;
  long long period = 0;
  if (in >> quota >> period && quota != "max" && period > 0) {
    try {
      const long long q = std::stoll(quota);
      if (q > 0) return static_cast<int>(std::max(1LL, (q + period - 1) / period));
    } catch (...) {
      // A malformed cpu.max is ignored: the affinity count is a safe answer.
    }
  }
  return cpus;
}

}  // namespace prewarm
