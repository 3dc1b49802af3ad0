#include "prewarm/runtime/msa_index_launch.h"
