#include "tests/gpu/msa_sparse_reference.h"
