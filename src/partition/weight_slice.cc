#include "tpc/partition/weight_slice.h"

namespace tpc::partition {

int64_t SliceBytes(const ir::Tensor& full, const ir::Placement& p, int64_t n) {
  const int64_t bytes = static_cast<int64_t>(full.nbytes());
  return bytes / p.Parts(n);
}

absl::Status WriteSlice(const ir::Tensor& full, const ir::Placement& p, int64_t rank, int64_t n,
                        std::ostream& out) {
  absl::Status status = ForEachSliceRun(full, p, rank, n, [&](const uint8_t* data, int64_t bytes) {
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  });
  if (!status.ok()) return status;
  if (!out) return absl::DataLossError("writing a weight slice failed (disk full?)");
  return absl::OkStatus();
}

}  // namespace tpc::partition
