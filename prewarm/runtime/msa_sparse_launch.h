// Placeholder: filled by the MSA kernels' work (issue 27).
#ifndef PREWARM_RUNTIME_MSA_SPARSE_LAUNCH_H_
#define PREWARM_RUNTIME_MSA_SPARSE_LAUNCH_H_

namespace prewarm {}  // namespace prewarm

#endif  // PREWARM_RUNTIME_MSA_SPARSE_LAUNCH_H_
