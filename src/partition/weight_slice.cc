#include "tpc/partition/weight_slice.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tpc/util/half.h"

namespace tpc::partition {

int64_t SliceBytes(const ir::Tensor& full, const ir::Placement& p, int64_t n) {
  const int64_t bytes = static_cast<int64_t>(full.nbytes());
  return bytes / p.Parts(n);
}

absl::Status WriteSlice(const ir::Tensor& full, const ir::Placement& p, int64_t rank, int64_t n,
                        std::ostream& out) {
  return WriteSlice(full, p, rank, n, out, full.dtype());
}

absl::Status WriteSlice(const ir::Tensor& full, const ir::Placement& p, int64_t rank, int64_t n,
                        std::ostream& out, ir::DType to) {
  const bool convert = to != full.dtype();
  if (convert &&
      !(full.dtype() == ir::DType::kF32 && (to == ir::DType::kF16 || to == ir::DType::kBF16))) {
    return absl::InternalError(absl::StrCat("cannot write a ", ir::DTypeName(full.dtype()),
                                            " weight as ", ir::DTypeName(to)));
  }
  std::vector<uint16_t> halves;
  absl::Status status = ForEachSliceRun(full, p, rank, n, [&](const uint8_t* data, int64_t bytes) {
    if (!convert) {
      out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(bytes));
      return;
    }
    // f32 -> f16/bf16 in chunks of 64 Ki elements (a run may be a whole weight).
    const int64_t count = bytes / 4;
    for (int64_t at = 0; at < count; at += 65536) {
      const int64_t k = std::min<int64_t>(65536, count - at);
      halves.resize(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) {
        float f;
        std::memcpy(&f, data + (at + i) * 4, 4);
        halves[static_cast<size_t>(i)] =
            to == ir::DType::kF16 ? FloatToHalfSaturated(f) : FloatToBFloat16Saturated(f);
      }
      out.write(reinterpret_cast<const char*>(halves.data()), static_cast<std::streamsize>(k * 2));
    }
  });
  if (!status.ok()) return status;
  if (!out) return absl::DataLossError("writing a weight slice failed");  // named by the caller
  return absl::OkStatus();
}

}  // namespace tpc::partition
