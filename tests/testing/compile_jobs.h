// Jobs and code objects for the compile tests: the fp8_bmm key of a decode step, and what an ELF
// file says it is for.
#ifndef PREWARM_TESTS_TESTING_COMPILE_JOBS_H_
#define PREWARM_TESTS_TESTING_COMPILE_JOBS_H_

#include <string>

#include "prewarm/arch/arch.h"
#include "prewarm/launchers/plan.h"

namespace prewarm::testing {

// e_machine of an ELF file (little-endian), or -1.
inline int ElfMachine(const std::string& code) {
  if (code.size() < 20 || code.compare(0, 4,
                                       "\x7f"
                                       "ELF") != 0)
    return -1;
  return static_cast<unsigned char>(code[18]) | (static_cast<unsigned char>(code[19]) << 8);
}
inline constexpr int kEmAmdgpu = 224;
inline constexpr int kEmCuda = 190;

// The q_absorb key of a step with m decode tokens.
inline Key Fp8BmmKey(const Arch& arch, int64_t m) {
  const ModelConfig model = SeedsModelConfig();
  const Shape shape = *ShapeForRank(model, 1);
  StepStats stats;
  stats.decode_tokens = m;
  stats.total_tokens = m;
  stats.max_decode_ctx = m;
  return FindLauncher("fp8_bmm")->Dispatch(stats, {shape, arch, {}}).front();
}

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_COMPILE_JOBS_H_
