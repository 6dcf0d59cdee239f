// Arena planning by value lifetimes: every buffer gets an offset in one arena so that
// buffers alive at the same time never overlap, and the arena is as small as the greedy
// best-fit placement makes it.
#pragma once

#include <cstdint>
#include <vector>

namespace tpc::runtime {

struct BufferRequest {
  int64_t bytes = 0;
  // Steps [first, last] during which the buffer is alive (defined at `first`, last read
  // at `last`).
  int64_t first = 0;
  int64_t last = 0;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request
  int64_t arena_bytes = 0;       // the peak: end of the highest placed buffer
  int64_t total_bytes = 0;       // sum of all (aligned) requests: the cost without reuse
};

// Places buffers largest first, each at the lowest-waste gap among the buffers already
// placed whose lifetimes overlap its own (best fit). Offsets are multiples of `alignment`.
MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

}  // namespace tpc::runtime
