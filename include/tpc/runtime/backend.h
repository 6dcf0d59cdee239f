// A backend: where tensors live and the kernels that compute on them. The CPU backend
// keeps tensors in host memory; a CUDA backend implements the same interface with
// device memory and its own kernel table.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "tpc/runtime/kernel.h"
#include "tpc/runtime/thread_pool.h"

namespace tpc::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // The kernel of an operator (domain "" is ai.onnx), or null when there is none.
  virtual const Kernel* FindKernel(std::string_view domain, std::string_view op_type) const = 0;
  // The kernel for this node (a device backend checks the element types its kernel
  // takes, else offers its host kernel); null when there is none.
  virtual const Kernel* FindKernelFor(const ir::Node& node) const {
    return FindKernel(node.domain(), node.op_type());
  }
  // A device backend's host kernel of an operator (Kernel::host), for steps whose inputs
  // are all in host memory and whose outputs are not floats (shape arithmetic); null
  // when there is none or the backend's memory is the host's.
  virtual const Kernel* FindHostKernel(std::string_view /*domain*/,
                                       std::string_view /*op_type*/) const {
    return nullptr;
  }

  // Memory for tensors (the executor's arena, outputs). Aligned to 64 bytes.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  // Copies between host memory and the backend's memory.
  virtual void CopyFromHost(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  // A copy within the backend's memory (ordered with the kernels).
  virtual void Copy(void* dst, const void* src, size_t bytes) = 0;

  // Threads for data-parallel loops inside kernels.
  virtual ThreadPool& pool() = 0;

  // False when tensors live apart from the host (a GPU): the executor then keeps a host
  // copy of the values that host kernels read (Kernel::host, host_inputs).
  virtual bool host_memory() const { return true; }
  // The backend host kernels run with (their copies and threads): this one when its
  // memory is the host's, else the CPU backend it keeps for them.
  virtual Backend& host_backend() { return *this; }
  // Waits for the work queued so far; an error it raised (an asynchronous kernel fault).
  virtual absl::Status Synchronize() { return absl::OkStatus(); }
  // Blocks a device backend obtained from its device's allocator so far (cudaMalloc
  // calls, each a synchronisation of the device); its cache serves the rest. 0 on the host.
  virtual int64_t device_allocations() const { return 0; }
  // What an error for a failed allocation adds (a device's free and total memory and
  // what this backend holds); empty on the host.
  virtual std::string MemoryReport() const { return ""; }
  // Bytes of device memory the backend holds (its blocks in use and cached); 0 on the host.
  virtual int64_t device_bytes() const { return 0; }

  // Capture and replay of a run's device work (CUDA graphs). Between BeginCapture and
  // EndCapture the backend records its kernels, copies and uploads in order without
  // running them; an upload reads from a host buffer of the capture's own, which holds a
  // copy of its source. EndCapture gives the record, which keeps what it needs alive and
  // must go before the backend. Between BeginReplay and EndReplay, uploads must come in
  // the capture's order with the same destinations and sizes: they refill those buffers;
  // Launch queues the whole record (its checks report at the next Synchronize), after
  // EndCapture and after each EndReplay.
  // Device blocks allocated while capturing stay with the backend (never given back to
  // the device) while the record lives. A backend that cannot capture returns false
  // from can_capture() and errors from the rest.
  class Captured {
   public:
    virtual ~Captured() = default;
  };
  virtual bool can_capture() const { return false; }
  virtual absl::Status BeginCapture() {
    return absl::UnimplementedError(name() + " cannot capture its work");
  }
  virtual absl::StatusOr<std::unique_ptr<Captured>> EndCapture() {
    return absl::UnimplementedError(name() + " cannot capture its work");
  }
  virtual void BeginReplay(Captured& /*captured*/) {}
  virtual absl::Status EndReplay() {
    return absl::UnimplementedError(name() + " cannot replay captured work");
  }
  virtual absl::Status Launch(Captured& /*captured*/) {
    return absl::UnimplementedError(name() + " cannot replay captured work");
  }

  // What kernels derive once from a node's constant inputs and keep for later runs (a
  // weight packed for the GEMM library), by node; it lives as long as the backend, which
  // outlives the executors that use it. Null: the backend keeps nothing. Kernels run one
  // at a time on a backend, so the map needs no lock.
  using KernelStates = std::map<const ir::Node*, std::shared_ptr<void>>;
  virtual KernelStates* kernel_states() { return nullptr; }
};

// The CPU backend with `threads` threads for its loops (0: DefaultThreadCount()); BLAS
// is limited to the same count.
std::unique_ptr<Backend> MakeCpuBackend(int threads = 0);

// Op types (`Add`, `tpc::AllReduce`) that have a CPU kernel, sorted.
std::vector<std::string> CpuKernelOps();

}  // namespace tpc::runtime
