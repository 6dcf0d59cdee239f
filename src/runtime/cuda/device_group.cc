// The in-process communicator's buffers on one GPU (ranks as threads sharing it): the
// ranks read each other's device memory directly, each on its own stream; a rank's
// stream is drained before it posts (its inputs are ready) and before it leaves (its
// reads of the others' buffers are done), so no buffer is reused while another rank reads.
#include "absl/strings/str_cat.h"
#include "cuda_backend.h"
#include "ops.h"
#include "tpc/runtime/cuda/cuda.h"
#include "tpc/runtime/inprocess_communicator.h"

namespace tpc::runtime::cuda {
namespace {

class DeviceGroupMemory final : public GroupMemory {
 public:
  explicit DeviceGroupMemory(CudaBackend& backend) : backend_(backend) {}

  absl::Status Ready() override { return backend_.Synchronize(); }
  absl::Status Done() override { return backend_.Synchronize(); }

  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    if (dst == src || bytes == 0) return absl::OkStatus();
    return Launched(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, backend_.stream()));
  }

  absl::Status Reduce(ir::DType dtype, const std::vector<const uint8_t*>& srcs,
                      const std::vector<uint8_t*>& dsts, int64_t begin, int64_t end,
                      ReduceOp op) override {
    const std::optional<FloatKind> kind = KindOf(dtype);
    if (!kind) {
      return absl::UnimplementedError(absl::StrCat("a collective on the GPU of ",
                                                   ir::DTypeName(dtype), " (f32, f16, bf16 only)"));
    }
    if (srcs.size() > static_cast<size_t>(math::kMaxRanks) ||
        dsts.size() > static_cast<size_t>(math::kMaxRanks)) {
      return absl::UnimplementedError(
          absl::StrCat("more than ", math::kMaxRanks, " ranks on one GPU"));
    }
    math::RankPointers p;
    p.n = static_cast<int>(srcs.size());
    for (size_t k = 0; k < srcs.size(); ++k) p.in[k] = srcs[k];
    p.n_out = static_cast<int>(dsts.size());
    for (size_t k = 0; k < dsts.size(); ++k) p.out[k] = dsts[k];
    const int code = op == ReduceOp::kMax ? 1 : op == ReduceOp::kMin ? 2 : 0;
    return Launched(
        LaunchReduceRanks(*kind, code, op == ReduceOp::kAvg, p, begin, end, backend_.stream()));
  }

 private:
  absl::Status Launched(cudaError_t e) {
    if (e == cudaSuccess) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("cuda device ", backend_.device(),
                     ": a collective's copy failed: ", cudaGetErrorString(e)));
  }
  CudaBackend& backend_;
};

}  // namespace

std::unique_ptr<GroupMemory> MakeDeviceGroupMemory(Backend& backend) {
  return std::make_unique<DeviceGroupMemory>(static_cast<CudaBackend&>(backend));
}

}  // namespace tpc::runtime::cuda
