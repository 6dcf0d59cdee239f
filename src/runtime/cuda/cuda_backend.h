// Internal to the CUDA backend: the backend object its kernels reach through
// KernelContext::backend() (device, stream, cuBLAS handle, memory).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tpc/runtime/backend.h"

namespace tpc::runtime::cuda {

class LtPlans;  // lt_gemm.cc

class CudaBackend final : public Backend {
 public:
  // A backend on `device` with one stream; host kernels (operators with no device
  // kernel) get `host_threads` threads.
  // `device_collectives`: the tpc collectives as device kernels (a communicator on device
  // memory), else host kernels.
  // `memory_limit` > 0: Allocate fails past that many bytes held (tp-run --gpu-memory).
  static absl::StatusOr<std::unique_ptr<Backend>> Create(int device, int host_threads,
                                                         bool device_collectives,
                                                         int64_t memory_limit = 0);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  const Kernel* FindKernel(std::string_view domain, std::string_view op_type) const override;
  const Kernel* FindKernelFor(const ir::Node& node) const override;
  const Kernel* FindHostKernel(std::string_view domain, std::string_view op_type) const override;
  // A tpc collective that runs as a device kernel (device_collectives; registry.cc).
  bool IsDeviceCollective(std::string_view domain, std::string_view op_type) const;
  void* Allocate(size_t bytes) override;
  int64_t device_allocations() const override { return device_allocations_; }
  // "GPU 0 (0000:07:00.0) has 1.20 GiB free of 79.11 GiB; this rank's blocks take ...".
  std::string MemoryReport() const override;
  int64_t device_bytes() const override { return held_bytes_; }
  void Free(void* p) override;
  void CopyFromHost(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void Copy(void* dst, const void* src, size_t bytes) override;
  ThreadPool& pool() override { return host_->pool(); }
  bool host_memory() const override { return false; }
  Backend& host_backend() override { return *host_; }
  absl::Status Synchronize() override;
  // CUDA graphs (capture.cc): stream capture in relaxed mode (a cache miss may still
  // cudaMalloc), uploads from pinned buffers of the record's own.
  bool can_capture() const override { return true; }
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<Captured>> EndCapture() override;
  void BeginReplay(Captured& captured) override;
  absl::Status EndReplay() override;
  absl::Status Launch(Captured& captured) override;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  // The GEMMs' one workspace (cuBLAS's, also given to cuBLASLt's calls on the same stream).
  void* gemm_workspace() const { return cublas_workspace_; }
  size_t gemm_workspace_bytes() const;
  // cuBLASLt's descriptors and chosen algorithm by problem (lt_gemm.cc), made on first use.
  std::shared_ptr<LtPlans>& lt_plans() { return lt_plans_; }
  // A check a kernel makes on the device (an index in range): the kernel sets *flag() to
  // the returned code when it fails, and the next Synchronize fails with `error` (the
  // first failing launch's). Codes live until that Synchronize.
  int Expect(std::string error);
  int* flag() const { return flag_device_; }

  // Makes this backend's device current for the calling thread (ranks as threads).
  void Bind() const { cudaSetDevice(device_); }

  // Waits for the stream by polling, so that a collective that never completes (a peer
  // gone) is noticed: `watch` (the NCCL communicator's health) is asked every millisecond
  // and fails the wait with its error; after `timeout` the wait fails and `on_timeout`
  // runs (it aborts the communicator). Without a watch, waits block.
  void SetWatch(std::function<absl::Status()> watch, std::function<void()> on_timeout,
                std::chrono::milliseconds timeout);

 private:
  CudaBackend(int device, std::unique_ptr<Backend> host, bool device_collectives);
  friend class CudaCaptured;
  // Blocks a record uses are not given back to the device (cudaFree) while it lives.
  void PinForRecord(void* p);
  void Unpin(const std::vector<void*>& blocks);
  // An upload while capturing (from a pinned copy) or refilling a record.
  void CaptureUpload(void* dst, const void* src, size_t bytes);
  void RefillUpload(void* dst, const void* src, size_t bytes);
  void Record(cudaError_t e, const char* what);
  // Whether `size` more bytes stay within memory_limit_.
  bool Fits(size_t size) const {
    return memory_limit_ <= 0 || held_bytes_ + static_cast<int64_t>(size) <= memory_limit_;
  }
  // Waits until the stream's work is done (see SetWatch).
  absl::Status WaitStream();
  // Polls `query` (cudaStreamQuery, cudaEventQuery) until it is not cudaErrorNotReady,
  // asking the watch every millisecond and failing after its timeout.
  absl::Status Poll(const std::function<cudaError_t()>& query);

  int device_;
  bool device_collectives_;
  std::unique_ptr<Backend> host_;  // the CPU backend: host kernels and their threads
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::shared_ptr<LtPlans> lt_plans_;
  // Waits for `event` (bounded by the watch, when there is one); false, with the error
  // recorded, when the wait timed out.
  bool WaitEvent(cudaEvent_t event, const char* what);
  int64_t device_allocations_ = 0;  // successful cudaMalloc calls of Allocate
  int64_t held_bytes_ = 0;          // Allocate's cudaMalloc'd blocks not given back
  int64_t memory_limit_ = 0;        // > 0: the most held_bytes_ may reach
  // Pinned staging buffers for uploads and downloads (double-buffered) and their events.
  void* staging_[2] = {nullptr, nullptr};
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  // Freed device blocks by rounded size, reused before cudaMalloc (stream-ordered: every
  // use is on stream_).
  std::map<size_t, std::vector<void*>> free_;
  absl::flat_hash_map<void*, size_t> sizes_;
  // Host kernels standing in for missing device kernels (Kernel::host).
  mutable std::mutex host_kernels_mu_;
  mutable std::map<std::string, std::unique_ptr<Kernel>> host_kernels_;
  cudaError_t error_ = cudaSuccess;  // first failure of a copy
  std::string error_what_;
  int* flag_host_ = nullptr;  // mapped pinned memory: the device writes, the host reads
  int* flag_device_ = nullptr;
  std::vector<std::string> expected_;        // by code - 1
  class CudaCaptured* recording_ = nullptr;  // between BeginCapture and EndCapture
  class CudaCaptured* refilling_ = nullptr;  // between BeginReplay and EndReplay
  size_t refill_next_ = 0;
  bool refill_failed_ = false;
  absl::flat_hash_map<void*, int> pinned_;   // blocks records use, with their count
  absl::flat_hash_map<void*, size_t> held_;  // freed pinned blocks, out of the cache
  std::function<absl::Status()> watch_;
  std::function<void()> on_timeout_;
  std::chrono::milliseconds watch_timeout_{0};
};

}  // namespace tpc::runtime::cuda
