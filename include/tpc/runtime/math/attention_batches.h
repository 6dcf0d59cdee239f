// How a device runs tpc::AttentionCore (and any Q·Kᵀ → softmax → P·V over broadcast
// batch dims) as batched GEMMs over the flattened batch entries: index arithmetic of the
// launch, on the host, tested there (device_attention_math_test.cc).
//
// The trailing `fold` entries over which K and V repeat (their dims are 1 there: GQA's
// group of query heads, or one K and V head for all) while Q has each, stack their query
// rows into one [fold·s, d] matrix against one K and V: Q's, the scores' and Y's entries
// are contiguous, so the stacked rows are too, and row r of GEMM entry e is row
// e·fold·s + r of the unstacked ones. GEMM entry e then reads Q, K and V at e times
// their stride; where some operand broadcasts over some dims only (its stride is
// nullopt), at the offsets of batch entry e·fold (one GEMM per entry).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tpc::runtime::math {

struct AttentionBatches {
  int64_t fold = 1;                // batch entries per GEMM entry (divides their count)
  std::optional<int64_t> q, k, v;  // element strides between GEMM entries
};

// `batch`: the broadcast batch dims; bq, bk, bv: each operand's own (right-aligned, 1s
// where they broadcast); Q [.., s, d], K [.., t, d] or [.., d, t], V [.., t, dv].
inline AttentionBatches PlanAttentionBatches(const std::vector<int64_t>& batch,
                                             const std::vector<int64_t>& bq,
                                             const std::vector<int64_t>& bk,
                                             const std::vector<int64_t>& bv, int64_t s, int64_t t,
                                             int64_t d, int64_t dv) {
  const auto elements = [](const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t x : dims) n *= x;
    return n;
  };
  const size_t nb = batch.size();
  // An operand's dim aligned with batch dim i (1 where it has fewer dims).
  const auto dim = [&](const std::vector<int64_t>& own, size_t i) {
    const size_t lead = nb - own.size();
    return i < lead ? int64_t{1} : own[i - lead];
  };
  AttentionBatches p;
  const int64_t count = elements(batch);
  if (count > 0 && elements(bq) == count) {
    for (size_t i = nb; i > 0 && dim(bk, i - 1) == 1 && dim(bv, i - 1) == 1; --i) {
      p.fold *= batch[i - 1];
    }
  }
  const int64_t entries = count / p.fold;
  // The stride of an operand with one matrix per GEMM entry, or one for all.
  const auto stride = [&](const std::vector<int64_t>& own,
                          int64_t matrix) -> std::optional<int64_t> {
    const int64_t n = elements(own);
    if (n == 1) return 0;
    if (n == entries) return matrix;
    return std::nullopt;
  };
  p.q = p.fold > 1 ? std::optional<int64_t>(p.fold * s * d) : stride(bq, s * d);
  p.k = stride(bk, t * d);
  p.v = stride(bv, t * dv);
  return p;
}

}  // namespace tpc::runtime::math
