// A backend: where tensors live and the kernels that compute on them. The CPU backend
// keeps tensors in host memory; a CUDA backend implements the same interface with
// device memory and its own kernel table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "tpc/runtime/kernel.h"
#include "tpc/runtime/thread_pool.h"

namespace tpc::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // The kernel of an operator (domain "" is ai.onnx), or null when there is none.
  virtual const Kernel* FindKernel(std::string_view domain, std::string_view op_type) const = 0;

  // Memory for tensors (the executor's arena, outputs). Aligned to 64 bytes.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  // Copies between host memory and the backend's memory.
  virtual void CopyFromHost(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;

  // Threads for data-parallel loops inside kernels.
  virtual ThreadPool& pool() = 0;
};

// The CPU backend with `threads` threads for its loops (0: DefaultThreadCount()); BLAS
// is limited to the same count.
std::unique_ptr<Backend> MakeCpuBackend(int threads = 0);

// Op types (`Add`, `tpc::AllReduce`) that have a CPU kernel, sorted.
std::vector<std::string> CpuKernelOps();

}  // namespace tpc::runtime
