// How many CPUs this process may use: the cgroup v2 quota (cpu.max "200000 100000" -> 2,
// rounded up) when one is set, else the CPUs in the affinity mask.
#ifndef PREWARM_UTIL_CPU_H_
#define PREWARM_UTIL_CPU_H_

#include <string>

namespace prewarm {

// `cgroup_cpu_max`: the cpu.max file to read (tests point it elsewhere).
int AvailableCpus(const std::string& cgroup_cpu_max = "/sys/fs/cgroup/cpu.max");

}  // namespace prewarm

#endif  // PREWARM_UTIL_CPU_H_
