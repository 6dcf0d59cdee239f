// Backends by name, as tp-run's --backend and the tests choose them.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/runtime/kv_store.h"

namespace tpc::runtime {

struct BackendSpec {
  std::string name = "cpu";  // cpu or cuda
  int threads = 0;           // CPU threads (cuda: of the host kernels); 0: all cores
  int device = 0;            // cuda: the GPU (a process's LOCAL_RANK)
  // cuda: the communicator's buffers are device memory (NCCL, ranks as threads on one
  // GPU with MakeDeviceGroupMemory), so the tpc collectives run as device kernels.
  bool device_collectives = false;
  // cuda: the most device memory the backend's blocks may take (0: the GPU's); past it an
  // allocation fails as on a full GPU.
  int64_t memory_limit = 0;
};

// The backend, or: InvalidArgument for an unknown name, Unimplemented when this build
// has no CUDA, FailedPrecondition when there is no usable GPU.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendSpec& spec);

// Where an in-process group of ranks on `backend` exchanges buffers: null for a backend
// on host memory (the group's default), device memory for a CUDA backend.
std::unique_ptr<GroupMemory> MakeGroupMemory(Backend& backend);

// The device communicator of one process per GPU (NCCL) on `backend` (a CUDA backend
// made with device_collectives); Unimplemented without CUDA.
absl::StatusOr<std::unique_ptr<Communicator>> ConnectDeviceCommunicator(
    KeyValueStore& store, int rank, int size, Backend& backend, std::chrono::milliseconds timeout);

// True when this build has the CUDA backend.
bool CudaBuiltIn();
// Visible GPUs (0 without CUDA, a driver or a GPU).
int GpuCount();
// Visible GPU `device`'s PCI bus id, the same in every process of a machine; an error
// without CUDA or that GPU.
absl::StatusOr<std::string> GpuBusId(int device);
// Of every rank's GPU, by rank (its machine and bus id as one string): the first two
// ranks on one GPU, or nothing when each has its own (NCCL then connects them; it
// refuses two ranks on one GPU).
std::optional<std::pair<int, int>> SharedGpu(const std::vector<std::string>& gpus);

// tp-run --list-kernels: `backend domain::op dtypes`, per backend built in.
std::vector<std::string> KernelListing();

}  // namespace tpc::runtime
