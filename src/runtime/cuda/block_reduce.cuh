// The reduction of a thread block of the row kernels (one block of kThreads threads per
// row): every thread contributes a value, every thread gets the combination. Internal to
// the .cu files.
#pragma once

#include <cuda_runtime.h>

#include "grid.cuh"

namespace tpc::runtime::cuda {

static_assert((kThreads & (kThreads - 1)) == 0, "BlockReduce halves the block");

// Every thread of the block gets the combination of all threads' `v`. All threads of
// the block must call it (it synchronizes): every thread writes its own slot, then
// halving steps, each followed by __syncthreads(), in which only threads below the step
// write (their own slot, reading one no thread writes in that step); a last
// __syncthreads() after every thread read buf[0], so the next call cannot overwrite it early.
template <typename T, typename F>
__device__ T BlockReduce(T v, F combine) {
  __shared__ T buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s)
      buf[threadIdx.x] = combine(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = buf[0];
  __syncthreads();  // buf is reused by the next call
  return r;
}

}  // namespace tpc::runtime::cuda
