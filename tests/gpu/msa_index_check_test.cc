#include "tests/gpu/msa_index_reference.h"
