#include "tpc/runtime/backends.h"

#include <map>

#include "absl/strings/str_cat.h"
#if defined(TPC_HAVE_CUDA)
#include "tpc/runtime/cuda/cuda.h"
#endif

namespace tpc::runtime {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendSpec& spec) {
  if (spec.name == "cpu") return MakeCpuBackend(spec.threads);
  if (spec.name == "cuda") {
#if defined(TPC_HAVE_CUDA)
    return cuda::MakeCudaBackend(spec.device, spec.threads, spec.device_collectives,
                                 spec.memory_limit);
#else
    return absl::UnimplementedError(
        "--backend cuda: this build has no CUDA backend (nvcc was not found when it was built)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--backend ", spec.name, ": expected cpu or cuda"));
}

std::unique_ptr<GroupMemory> MakeGroupMemory(Backend& backend) {
  if (backend.host_memory()) return nullptr;
#if defined(TPC_HAVE_CUDA)
  if (backend.name() == "cuda") return cuda::MakeDeviceGroupMemory(backend);
#endif
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectDeviceCommunicator(
    KeyValueStore& store, int rank, int size, Backend& backend, std::chrono::milliseconds timeout) {
#if defined(TPC_HAVE_CUDA)
  if (backend.name() == "cuda") return cuda::ConnectNccl(store, rank, size, backend, timeout);
#endif
  (void)store, (void)rank, (void)size, (void)timeout;
  return absl::UnimplementedError(
      absl::StrCat("no device communicator for the ", backend.name(), " backend"));
}

bool CudaBuiltIn() {
#if defined(TPC_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

int GpuCount() {
#if defined(TPC_HAVE_CUDA)
  return cuda::CudaDeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::string> GpuBusId(int device) {
#if defined(TPC_HAVE_CUDA)
  return cuda::CudaBusId(device);
#else
  return absl::UnimplementedError(absl::StrCat("GPU ", device, ": built without CUDA"));
#endif
}

std::optional<std::pair<int, int>> SharedGpu(const std::vector<std::string>& gpus) {
  std::map<std::string, int> first;
  for (int r = 0; r < static_cast<int>(gpus.size()); ++r) {
    auto [it, fresh] = first.emplace(gpus[static_cast<size_t>(r)], r);
    if (!fresh) return std::pair{it->second, r};
  }
  return std::nullopt;
}

std::vector<std::string> KernelListing() {
  std::vector<std::string> lines;
  for (const std::string& op : CpuKernelOps()) {
    const bool onnx = op.find("::") == std::string::npos;
    lines.push_back(absl::StrCat("cpu ", onnx ? "ai.onnx::" : "", op, " any"));
  }
#if defined(TPC_HAVE_CUDA)
  for (const std::string& line : cuda::CudaKernelListing()) lines.push_back("cuda " + line);
#endif
  return lines;
}

}  // namespace tpc::runtime
