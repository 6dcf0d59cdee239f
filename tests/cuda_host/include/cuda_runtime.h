// cuda_host's stand-in for the CUDA toolkit's header of this name (tests/cuda_host).
#pragma once

#include "../cuda_host.h"
