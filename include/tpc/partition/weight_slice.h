// Weight slicing: one rank's part of a per-rank constant (a constant with an S(d)
// sharding), written straight from the mapped source in contiguous runs, so slicing a
// large model never holds a copy of a weight in memory.
#pragma once

#include <cstdint>
#include <ostream>

#include "absl/status/status.h"
#include "tpc/ir/sharding.h"
#include "tpc/ir/tensor.h"

namespace tpc::partition {

// Bytes of rank `rank`'s part of `full` placed `p` over `n` ranks.
int64_t SliceBytes(const ir::Tensor& full, const ir::Placement& p, int64_t n);

// Calls `write(pointer, bytes)` for each contiguous run of the slice, in order.
template <typename Write>
absl::Status ForEachSliceRun(const ir::Tensor& full, const ir::Placement& p, int64_t rank,
                             int64_t n, Write&& write);

// Writes the slice to `out`, as `to` (the tensor's own type, or f16/bf16 for an f32
// tensor: converted on the way, a run at a time).
absl::Status WriteSlice(const ir::Tensor& full, const ir::Placement& p, int64_t rank, int64_t n,
                        std::ostream& out, ir::DType to);
absl::Status WriteSlice(const ir::Tensor& full, const ir::Placement& p, int64_t rank, int64_t n,
                        std::ostream& out);

// ---- implementation ----

template <typename Write>
absl::Status ForEachSliceRun(const ir::Tensor& full, const ir::Placement& p, int64_t rank,
                             int64_t n, Write&& write) {
  if (!full.has_data()) return absl::FailedPreconditionError("a sliced constant has no data");
  const uint8_t* base = full.data();
  if (p.kind != ir::Placement::Kind::kShard) {
    write(base, static_cast<int64_t>(full.nbytes()));
    return absl::OkStatus();
  }
  const auto& shape = full.shape();
  const int64_t d = p.dim;
  if (d < 0 || d >= static_cast<int64_t>(shape.size())) {
    return absl::InvalidArgumentError("a constant's split does not fit its shape");
  }
  const std::vector<ir::DimRun> runs =
      ir::PartRuns(p, shape[static_cast<size_t>(d)], p.PartOf(rank, n), p.Parts(n));
  if (runs.empty()) return absl::InvalidArgumentError("a constant's split does not fit its shape");
  int64_t outer = 1;
  for (int64_t i = 0; i < d; ++i) outer *= shape[static_cast<size_t>(i)];
  int64_t inner = ir::DTypeSize(full.dtype());
  for (size_t i = static_cast<size_t>(d) + 1; i < shape.size(); ++i) inner *= shape[i];
  ir::ForEachPartRun(runs, outer, shape[static_cast<size_t>(d)],
                     [&](int64_t at, int64_t length) { write(base + at * inner, length * inner); });
  return absl::OkStatus();
}

}  // namespace tpc::partition
