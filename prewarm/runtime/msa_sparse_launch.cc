#include "prewarm/runtime/msa_sparse_launch.h"
