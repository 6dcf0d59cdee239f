// CUDA graphs for the CUDA backend (Backend::BeginCapture and the rest): a run's work
// recorded by stream capture, its uploads read from pinned buffers of the record's own
// that replays refill, launched as one graph.
//
// What a record depends on, and how each stays valid until it goes:
// - device blocks its kernels use: the arena (the executor drops its records before it
//   frees the arena) and blocks allocated while capturing, which are pinned: once freed
//   they are held out of the cache until no record uses them (another executor's
//   constant allocated there would be overwritten by a replay), and never given back to
//   the device;
// - uploads: the executor refills them in the recorded order before each Launch; the run
//   before ended with a Synchronize, so no launch still reads them;
// - device checks (Expect): their codes are the kernels' arguments, so the record keeps
//   their messages and Launch makes them the backend's again.
#include <cuda_runtime.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "cuda_backend.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime::cuda {

class CudaCaptured final : public Backend::Captured {
 public:
  explicit CudaCaptured(CudaBackend* backend) : backend_(backend) {}
  ~CudaCaptured() override {
    backend_->Bind();
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    for (const Upload& u : uploads) cudaFreeHost(u.host);
    backend_->Unpin(blocks);
  }

  struct Upload {
    void* host;  // pinned, the record's
    void* dst;
    size_t bytes;
  };
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<Upload> uploads;
  std::vector<void*> blocks;  // pinned device blocks
  std::vector<std::string> expected;
  bool failed = false;  // an upload could not be recorded

 private:
  CudaBackend* backend_;
};

void CudaBackend::PinForRecord(void* p) {
  recording_->blocks.push_back(p);
  ++pinned_[p];
}

void CudaBackend::Unpin(const std::vector<void*>& blocks) {
  for (void* p : blocks) {
    auto it = pinned_.find(p);
    if (it == pinned_.end() || --it->second > 0) continue;
    pinned_.erase(it);
    if (auto held = held_.find(p); held != held_.end()) {  // free, and no record uses it
      free_[held->second].push_back(p);
      held_.erase(held);
    }
  }
}

absl::Status CudaBackend::BeginCapture() {
  if (recording_ != nullptr || refilling_ != nullptr) {
    return absl::FailedPreconditionError("cuda: a capture inside a capture or a replay");
  }
  // The work before is done and its checks reported: the record starts clean.
  TPC_RETURN_IF_ERROR(Synchronize());
  auto* record = new CudaCaptured(this);
  const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    cudaGetLastError();
    delete record;
    return absl::InternalError(
        absl::StrCat("cuda device ", device_, ": cudaStreamBeginCapture: ", cudaGetErrorString(e)));
  }
  recording_ = record;
  return absl::OkStatus();
}

void CudaBackend::CaptureUpload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  void* host = nullptr;
  if (cudaMallocHost(&host, bytes) != cudaSuccess) {
    cudaGetLastError();
    recording_->failed = true;
    return;
  }
  std::memcpy(host, src, bytes);
  recording_->uploads.push_back({host, dst, bytes});
  Record(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_), "a captured upload");
}

absl::StatusOr<std::unique_ptr<Backend::Captured>> CudaBackend::EndCapture() {
  if (recording_ == nullptr) return absl::FailedPreconditionError("cuda: no capture to end");
  Bind();
  std::unique_ptr<CudaCaptured> record(recording_);
  recording_ = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &record->graph);
  // Errors while capturing belong to the record, not to the next run.
  const cudaError_t during = error_;
  const std::string during_what = error_what_;
  error_ = cudaSuccess;
  std::vector<std::string> expected = std::move(expected_);
  expected_.clear();
  auto fail = [&](const std::string& what, cudaError_t e) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("cuda device ", device_, ": ", what,
                                                      " while capturing: ", cudaGetErrorString(e)));
  };
  if (during != cudaSuccess) return fail(during_what, during);
  if (record->failed) return fail("a pinned upload buffer", cudaErrorMemoryAllocation);
  if (ended != cudaSuccess) return fail("cudaStreamEndCapture", ended);
  if (const cudaError_t e = cudaGraphInstantiate(&record->exec, record->graph, 0);
      e != cudaSuccess) {
    return fail("cudaGraphInstantiate", e);
  }
  record->expected = std::move(expected);
  // Blocks the recording freed go out of the cache while the record lives (see Free).
  for (auto& [size, blocks] : free_) {
    std::vector<void*> kept;
    for (void* q : blocks) {
      if (pinned_.contains(q)) {
        held_[q] = size;
      } else {
        kept.push_back(q);
      }
    }
    blocks = std::move(kept);
  }
  return std::unique_ptr<Captured>(std::move(record));
}

void CudaBackend::BeginReplay(Captured& captured) {
  refilling_ = &static_cast<CudaCaptured&>(captured);
  refill_next_ = 0;
  refill_failed_ = false;
}

void CudaBackend::RefillUpload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (refill_next_ >= refilling_->uploads.size() || refilling_->uploads[refill_next_].dst != dst ||
      refilling_->uploads[refill_next_].bytes != bytes) {
    refill_failed_ = true;
    return;
  }
  std::memcpy(refilling_->uploads[refill_next_++].host, src, bytes);
}

absl::Status CudaBackend::EndReplay() {
  if (refilling_ == nullptr) return absl::FailedPreconditionError("cuda: no replay to end");
  const bool complete = !refill_failed_ && refill_next_ == refilling_->uploads.size();
  refilling_ = nullptr;
  if (!complete) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda device ", device_, ": the run's uploads differ from the record's"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Launch(Captured& captured) {
  Bind();
  auto& record = static_cast<CudaCaptured&>(captured);
  expected_ = record.expected;
  Record(cudaGraphLaunch(record.exec, stream_), "cudaGraphLaunch");
  return absl::OkStatus();  // a failure reports at the next Synchronize
}

}  // namespace tpc::runtime::cuda
