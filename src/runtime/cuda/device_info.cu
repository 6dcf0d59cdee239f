// The CUDA build path: a first kernel so nvcc (sm_80, sm_90) stays part of every build.
// The CUDA backend of the runtime grows from here.
#include <cuda_runtime.h>

#include "tpc/runtime/cuda/device_info.h"

namespace tpc::runtime::cuda {
namespace {

__global__ void FillKernel(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

}  // namespace

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

bool FillOnDevice(float value, int n, float* host_out) {
  float* dev = nullptr;
  if (cudaMalloc(&dev, sizeof(float) * n) != cudaSuccess) return false;
  FillKernel<<<(n + 255) / 256, 256>>>(dev, value, n);
  bool ok = cudaMemcpy(host_out, dev, sizeof(float) * n, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(dev);
  return ok;
}

}  // namespace tpc::runtime::cuda
