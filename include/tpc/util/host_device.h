// TPC_HOST_DEVICE marks the math that CPU kernels and CUDA kernels share: `__host__
// __device__` under nvcc, nothing elsewhere.
#pragma once

#if defined(__CUDACC__)
#define TPC_HOST_DEVICE __host__ __device__
#else
#define TPC_HOST_DEVICE
#endif
