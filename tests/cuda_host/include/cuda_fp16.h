// cuda_host's stand-in for the CUDA toolkit's header of this name (tests/cuda_host): the
// type as storage (the kernels convert through tpc's own bit arithmetic).
#pragma once

#include <cstdint>

#include "../cuda_host.h"

struct __half {
  uint16_t x;
};
