// The CUDA backend's entry points (built when nvcc is found: TPC_HAVE_CUDA).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/runtime/kv_store.h"

namespace tpc::runtime::cuda {

// A CUDA backend on `device` (FailedPrecondition naming the reason when there is no
// usable GPU); operators without a device kernel run on `host_threads` host threads.
// `device_collectives`: the tpc collectives run as device kernels on a communicator whose
// buffers are device memory (NCCL, MakeDeviceGroupMemory); else as host kernels.
// `memory_limit` > 0: the most device memory its blocks may take.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device, int host_threads,
                                                         bool device_collectives = false,
                                                         int64_t memory_limit = 0);
// The in-process communicator's buffers on the GPU of `backend` (a CUDA backend): for
// ranks as threads on one GPU.
std::unique_ptr<GroupMemory> MakeDeviceGroupMemory(Backend& backend);
// Rank `rank` of `size` processes, one GPU each, connected by NCCL on `backend` (a CUDA
// backend, made with device_collectives): the unique id travels through `store`; waits
// on the backend's stream fail after `timeout` when a collective does not complete.
absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(KeyValueStore& store, int rank, int size,
                                                          Backend& backend,
                                                          std::chrono::milliseconds timeout);
// Visible CUDA devices; 0 without a driver or a GPU.
int CudaDeviceCount();
// Visible device `device`'s PCI bus id ("0000:07:00.0"): the same physical GPU has the
// same one in every process of a machine, whatever CUDA_VISIBLE_DEVICES numbers it.
absl::StatusOr<std::string> CudaBusId(int device);
// `domain::op dtypes` for every operator of the CPU backend: the dtypes of its device
// kernel, or `host` when the CPU kernel runs on host copies.
std::vector<std::string> CudaKernelListing();

// The kernel table's choice for `node`, without a device: whether a device kernel takes
// it (else the CPU kernel runs on host copies) and which inputs that kernel reads on the
// host (bit k: input k). For tests and tools that ask where a plan's steps run.
struct DevicePlacement {
  bool device = false;
  uint32_t host_inputs = 0;
};
DevicePlacement PlaceOnDevice(const ir::Node& node, bool device_collectives);

}  // namespace tpc::runtime::cuda
