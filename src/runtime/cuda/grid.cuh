// The grid of the element-wise CUDA launches: kThreads threads a block, enough blocks to
// cover n elements (at most 65536: the kernels' grid-stride loops cover the rest), 64-bit
// indices. Internal to the .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tpc::runtime::cuda {

constexpr int kThreads = 256;

inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

// A thread's first element, and the stride of its loop.
__device__ inline int64_t First() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t Step() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace tpc::runtime::cuda
