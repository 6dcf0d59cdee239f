#include "tpc/runtime/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tpc::runtime {

MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  const size_t n = requests.size();
  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  auto aligned = [&](int64_t b) { return (b + alignment - 1) / alignment * alignment; };
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by earlier definition so the plan does not depend on sort luck.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const int64_t size = aligned(std::max<int64_t>(r.bytes, 1));
    plan.total_bytes += size;
    // Intervals [offset, end) of placed buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.first <= r.last && r.first <= q.last) {
        busy.emplace_back(plan.offsets[p],
                          plan.offsets[p] + aligned(std::max<int64_t>(q.bytes, 1)));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_waste = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin - cursor >= size && begin - cursor - size < best_waste) {
        best = cursor;
        best_waste = begin - cursor - size;
      }
      cursor = std::max(cursor, end);
    }
    plan.offsets[idx] = best >= 0 ? best : cursor;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[idx] + size);
    placed.push_back(idx);
  }
  return plan;
}

int64_t SizeClass(int64_t bytes) {
  constexpr int64_t kSmall = 4096;
  if (bytes <= kSmall) return (std::max<int64_t>(bytes, 1) + 511) / 512 * 512;
  int64_t power = kSmall;  // the largest power of two below `bytes`
  while (power < (bytes + 1) / 2) power *= 2;
  const int64_t step = power / 8;
  if (bytes > std::numeric_limits<int64_t>::max() - step) return bytes;
  return (bytes + step - 1) / step * step;
}

}  // namespace tpc::runtime
