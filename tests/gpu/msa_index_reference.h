// Placeholder: filled by the MSA kernels' work (issue 27).
#ifndef TESTS_GPU_MSA_INDEX_REFERENCE_H_
#define TESTS_GPU_MSA_INDEX_REFERENCE_H_

namespace prewarm::reference {}  // namespace prewarm::reference

#endif  // TESTS_GPU_MSA_INDEX_REFERENCE_H_
