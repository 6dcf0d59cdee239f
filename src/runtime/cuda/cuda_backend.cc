// The CUDA backend: device memory (a caching allocator over cudaMalloc), one stream,
// uploads and downloads through pinned staging buffers, and the kernel table (registry.cc) with the
// CPU backend's kernels standing in, on host copies, for operators it has no kernel for.
#include "cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/runtime/cuda/cuda.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime::cuda {
namespace {

constexpr size_t kStagingBytes = size_t{8} << 20;  // per staging buffer
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// Block sizes: multiples of 512 bytes, so that nearby sizes share the free lists.
size_t RoundUp(size_t bytes) { return (std::max<size_t>(bytes, 1) + 511) / 512 * 512; }

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CudaBackend::Create(int device, int host_threads,
                                                             bool device_collectives,
                                                             int64_t memory_limit) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--backend cuda: no CUDA device (",
        e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices", ")"));
  }
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("--backend cuda: device ", device, " asked for, but ", count,
                     " device(s) are visible (LOCAL_RANK or CUDA_VISIBLE_DEVICES)"));
  }
  std::unique_ptr<CudaBackend> b(
      new CudaBackend(device, MakeCpuBackend(host_threads), device_collectives));
  b->memory_limit_ = memory_limit;
  auto check = [&](cudaError_t err, const char* what) -> absl::Status {
    if (err == cudaSuccess) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("--backend cuda: ", what, " on device ", device, ": ",
                                            cudaGetErrorString(err)));
  };
  if (auto s = check(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  if (auto s =
          check(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      !s.ok())
    return s;
  for (int i = 0; i < 2; ++i) {
    if (auto s = check(cudaMallocHost(&b->staging_[i], kStagingBytes), "cudaMallocHost"); !s.ok())
      return s;
    if (auto s = check(cudaEventCreateWithFlags(&b->staged_[i], cudaEventDisableTiming),
                       "cudaEventCreate");
        !s.ok())
      return s;
  }
  if (auto s = check(
          cudaHostAlloc(reinterpret_cast<void**>(&b->flag_host_), sizeof(int), cudaHostAllocMapped),
          "cudaHostAlloc");
      !s.ok())
    return s;
  *b->flag_host_ = 0;
  if (auto s = check(
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&b->flag_device_), b->flag_host_, 0),
          "cudaHostGetDevicePointer");
      !s.ok())
    return s;
  if (cublasCreate(&b->cublas_) != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("--backend cuda: cublasCreate failed on device ", device));
  }
  cublasSetStream(b->cublas_, b->stream_);
  // One workspace for every GEMM, set once: a run recorded as a CUDA graph then finds the
  // same workspace as its queued runs (cuBLAS would otherwise get one per capture).
  if (auto s = check(cudaMalloc(&b->cublas_workspace_, kCublasWorkspaceBytes), "cudaMalloc");
      !s.ok())
    return s;
  if (cublasSetWorkspace(b->cublas_, b->cublas_workspace_, kCublasWorkspaceBytes) !=
      CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("--backend cuda: cublasSetWorkspace failed on device ", device));
  }
  if (cublasLtCreate(&b->cublaslt_) != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("--backend cuda: cublasLtCreate failed on device ", device));
  }
  return std::unique_ptr<Backend>(std::move(b));
}

size_t CudaBackend::gemm_workspace_bytes() const { return kCublasWorkspaceBytes; }

CudaBackend::CudaBackend(int device, std::unique_ptr<Backend> host, bool device_collectives)
    : device_(device), device_collectives_(device_collectives), host_(std::move(host)) {}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  lt_plans_.reset();  // its descriptors before the handle
  if (cublaslt_ != nullptr) cublasLtDestroy(cublaslt_);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) cudaFree(p);
  }
  for (auto& [p, size] : sizes_) cudaFree(p);  // blocks still out (none after a run)
  for (auto& [p, size] : held_) cudaFree(p);
  for (int i = 0; i < 2; ++i) {
    if (staged_[i] != nullptr) cudaEventDestroy(staged_[i]);
    if (staging_[i] != nullptr) cudaFreeHost(staging_[i]);
  }
  if (flag_host_ != nullptr) cudaFreeHost(flag_host_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

int CudaBackend::Expect(std::string error) {
  expected_.push_back(std::move(error));
  return static_cast<int>(expected_.size());
}

void CudaBackend::Record(cudaError_t e, const char* what) {
  if (e != cudaSuccess) cudaGetLastError();  // not left for the next launch's check
  if (e != cudaSuccess && error_ == cudaSuccess) {
    error_ = e;
    error_what_ = what;
  }
}

void* CudaBackend::Allocate(size_t bytes) {
  Bind();
  const size_t size = RoundUp(bytes);
  void* p = nullptr;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else if (Fits(size) && cudaMalloc(&p, size) == cudaSuccess) {
    ++device_allocations_;
    held_bytes_ += static_cast<int64_t>(size);
  } else {
    cudaGetLastError();
    // Out of memory: give the cached blocks back (not while capturing, which cannot wait,
    // and not those a record uses) and try once more.
    if (recording_ != nullptr) return nullptr;
    cudaStreamSynchronize(stream_);
    for (auto& [s, blocks] : free_) {
      std::vector<void*> kept;
      for (void* q : blocks) {
        if (pinned_.contains(q)) {
          kept.push_back(q);
        } else {
          cudaFree(q);
          held_bytes_ -= static_cast<int64_t>(s);
        }
      }
      blocks = std::move(kept);
    }
    p = nullptr;
    if (!Fits(size)) return nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    ++device_allocations_;
    held_bytes_ += static_cast<int64_t>(size);
  }
  sizes_[p] = size;
  if (recording_ != nullptr) PinForRecord(p);
  return p;
}

std::string CudaBackend::MemoryReport() const {
  Bind();
  size_t free = 0, total = 0;
  const auto gib = [](double b) { return absl::StrFormat("%.2f GiB", b / (1 << 30)); };
  std::string device = absl::StrCat("GPU ", device_);
  if (auto bus = CudaBusId(device_); bus.ok()) absl::StrAppend(&device, " (", *bus, ")");
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return absl::StrCat(device, ": its free memory unknown; this rank's blocks take ",
                        gib(static_cast<double>(held_bytes_)));
  }
  return absl::StrCat(
      device, " has ", gib(static_cast<double>(free)), " free of ", gib(static_cast<double>(total)),
      "; this rank's blocks take ", gib(static_cast<double>(held_bytes_)),
      memory_limit_ > 0 ? absl::StrCat(" of the ", gib(static_cast<double>(memory_limit_)),
                                       " --gpu-memory allows")
                        : "",
      " (weights, values, freed blocks kept for reuse; besides the CUDA context "
      "and cuBLAS's workspace). A plan for more ranks (tp-compile --tp) or in half "
      "precision (--dtype f16) needs less of each GPU");
}

void CudaBackend::Free(void* p) {
  if (p == nullptr) return;
  auto it = sizes_.find(p);
  if (it == sizes_.end()) return;
  // A block a record uses is kept from other users until the record goes (a value
  // allocated there now would be overwritten by the next replay); while recording, the
  // record itself may use it again.
  if (recording_ == nullptr && pinned_.contains(p)) {
    held_[p] = it->second;
  } else {
    free_[it->second].push_back(p);
  }
  sizes_.erase(it);
}

void CudaBackend::CopyFromHost(void* dst, const void* src, size_t bytes) {
  Bind();
  if (recording_ != nullptr) return CaptureUpload(dst, src, bytes);
  if (refilling_ != nullptr) return RefillUpload(dst, src, bytes);
  if (bytes <= 64 * 1024) {  // small: the driver stages it
    Record(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "upload");
    return;
  }
  // Chunks through two pinned buffers: the copy of one overlaps the fill of the other.
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t off = 0, i = 0; off < bytes; off += kStagingBytes, i ^= 1) {
    const size_t n = std::min(kStagingBytes, bytes - off);
    // Its previous copy is done; behind a hung collective that wait is bounded too.
    if (!WaitEvent(staged_[i], "upload")) return;
    std::memcpy(staging_[i], s + off, n);
    Record(cudaMemcpyAsync(d + off, staging_[i], n, cudaMemcpyHostToDevice, stream_), "upload");
    Record(cudaEventRecord(staged_[i], stream_), "upload");
  }
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  Bind();
  if (recording_ != nullptr) {  // the executor records only runs without waits
    Record(cudaErrorStreamCaptureUnsupported, "a download while capturing");
    return;
  }
  if (watch_) {
    // Only once the queued work (collectives among it) is done: a hung collective must
    // fail the wait, not block inside the copy.
    absl::Status waited = WaitStream();
    if (!waited.ok()) {
      if (error_ == cudaSuccess) {
        error_ = cudaErrorLaunchTimeout;
        error_what_ = std::string(waited.message());
      }
      return;
    }
  }
  if (bytes <= 64 * 1024) {
    Record(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "download");
    Record(cudaStreamSynchronize(stream_), "download");
    return;
  }
  // Chunks through the two pinned buffers (a copy from device to pageable memory goes at a
  // few GB/s): chunk k's copy into one buffer overlaps the host copy of chunk k - 1 out of
  // the other. A buffer is refilled only after it was copied out (the loop drains the
  // other buffer before it moves on), and an upload that used it is ahead in the stream.
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  size_t pending_off = 0, pending_n = 0;
  int pending = -1;
  auto drain = [&] {  // false when the wait timed out (recorded): the copy stops there
    if (pending < 0) return true;
    if (!WaitEvent(staged_[pending], "download")) return false;
    std::memcpy(d + pending_off, staging_[pending], pending_n);
    return true;
  };
  for (size_t off = 0, i = 0; off < bytes; off += kStagingBytes, i ^= 1) {
    const size_t n = std::min(kStagingBytes, bytes - off);
    Record(cudaMemcpyAsync(staging_[i], s + off, n, cudaMemcpyDeviceToHost, stream_), "download");
    Record(cudaEventRecord(staged_[i], stream_), "download");
    if (!drain()) return;
    pending = static_cast<int>(i);
    pending_off = off;
    pending_n = n;
  }
  drain();
}

bool CudaBackend::WaitEvent(cudaEvent_t event, const char* what) {
  if (!watch_) {
    Record(cudaEventSynchronize(event), what);
    return true;
  }
  absl::Status waited = Poll([event] { return cudaEventQuery(event); });
  if (!waited.ok()) {
    if (error_ == cudaSuccess) {
      error_ = cudaErrorLaunchTimeout;
      error_what_ = std::string(waited.message());
    }
    return false;
  }
  return true;
}

void CudaBackend::SetWatch(std::function<absl::Status()> watch, std::function<void()> on_timeout,
                           std::chrono::milliseconds timeout) {
  watch_ = std::move(watch);
  on_timeout_ = std::move(on_timeout);
  watch_timeout_ = timeout;
}

absl::Status CudaBackend::WaitStream() {
  if (!watch_) {
    Record(cudaStreamSynchronize(stream_), "a kernel");
    return absl::OkStatus();
  }
  return Poll([this] { return cudaStreamQuery(stream_); });
}

absl::Status CudaBackend::Poll(const std::function<cudaError_t()>& query) {
  const auto start = std::chrono::steady_clock::now();
  auto last_watch = start;
  for (;;) {
    const cudaError_t q = query();
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) {
      Record(q, "a kernel");
      return absl::OkStatus();  // reported by Synchronize
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_watch >= std::chrono::milliseconds(1)) {
      last_watch = now;
      TPC_RETURN_IF_ERROR(watch_());
    }
    if (now - start > watch_timeout_) {
      if (on_timeout_) on_timeout_();
      return absl::DeadlineExceededError(absl::StrCat(
          "cuda device ", device_, ": the queued work (a collective) did not finish within ",
          watch_timeout_.count(), " ms; a peer rank may have stopped"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void CudaBackend::Copy(void* dst, const void* src, size_t bytes) {
  Bind();
  Record(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "device copy");
}

absl::Status CudaBackend::Synchronize() {
  Bind();
  if (recording_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda device ", device_, ": a wait for the stream while capturing"));
  }
  TPC_RETURN_IF_ERROR(WaitStream());
  // The device's checks since the last synchronisation: the stream is drained, so their
  // writes to the mapped flag are visible.
  const int failed = __atomic_load_n(flag_host_, __ATOMIC_ACQUIRE);
  std::string expected_error;
  if (failed > 0 && static_cast<size_t>(failed) <= expected_.size()) {
    expected_error = expected_[static_cast<size_t>(failed) - 1];
  }
  __atomic_store_n(flag_host_, 0, __ATOMIC_RELEASE);
  expected_.clear();
  if (failed != 0) return absl::InvalidArgumentError(expected_error);
  if (error_ == cudaSuccess) return absl::OkStatus();
  const cudaError_t e = error_;
  error_ = cudaSuccess;  // reported once
  return absl::InternalError(
      absl::StrCat("cuda device ", device_, ": ", error_what_, " failed: ", cudaGetErrorString(e)));
}

const Kernel* CudaBackend::FindHostKernel(std::string_view domain, std::string_view op_type) const {
  // A collective on a device communicator has no host kernel (it would be given host
  // pointers): the executor keeps the device one even for shape arithmetic.
  if (IsDeviceCollective(domain, op_type)) return nullptr;
  const Kernel* k = host_->FindKernel(domain, op_type);
  if (k == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(host_kernels_mu_);
  const std::string key = absl::StrCat(std::string(domain), "::", std::string(op_type));
  auto& slot = host_kernels_[key];
  if (!slot) {
    slot = std::make_unique<Kernel>(*k);
    slot->host = true;
  }
  return slot.get();
}

}  // namespace tpc::runtime::cuda
