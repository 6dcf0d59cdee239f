// What the emulated CUDA libraries (runtime.cc, blas.cc, nccl.cc) share: queueing work on
// a stream, and checking an operand against the device's memory. Compiled against the
// toolkit's headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace cuda_host::emulated {

// Queues `work` (named `what` in messages) on `stream`: deferred until the host waits for
// it, recorded into the stream's capture, or run now (the legacy default stream, or
// CUDA_HOST_SYNC=1). After it runs the device blocks' redzones are checked, and a kernel's
// failure is left as the asynchronous error.
void Submit(cudaStream_t stream, std::function<void()> work, const char* what);

// Device work that may wait, as an NCCL collective waits for its peers: each call runs what
// can run now and answers whether the work is finished; the stream calls it again until it
// is, and the work after it waits. A query of the stream answers cudaErrorNotReady
// meanwhile, and a synchronization waits (for ever, as CUDA's does for a hung kernel).
using Steps = std::function<bool()>;
// Queues such work: `start` makes its Steps when the work reaches the front of the stream
// (the work before it done), once per run: a CUDA graph that recorded it starts it anew at
// every launch.
void SubmitSteps(cudaStream_t stream, std::function<Steps()> start, const char* what);

// While one lives, on any thread, device memory is open to the host; otherwise it is closed
// (PROT_NONE), so that host code touching it faults, as on a GPU, and is named. The
// device's work runs inside one: a stream's work as it runs, and nccl.cc's collectives on
// their communicator's thread.
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// Gives the whole pages of [p, p + bytes), device memory nothing reads, back to the system
// (they read as zeros after): cuBLAS's workspace, which the emulated GEMMs never use, so
// that opening and closing device memory need not walk its pages.
void Discard(void* p, size_t bytes);

// Stops the program unless `operand` of `what`, [p, p + bytes), lies inside one device block
// or pinned memory (`device`), or touches no device block (not).
void CheckOperand(const char* what, const char* operand, const void* p, size_t bytes, bool device);
// Stops the program unless [p, p + bytes) lies inside one block of `device`'s memory (not
// pinned host memory): NCCL's buffers, on the communicator's GPU.
void CheckOnDevice(const char* what, const char* operand, const void* p, size_t bytes, int device);

}  // namespace cuda_host::emulated
