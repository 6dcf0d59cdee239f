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

// The size a device backend's block for a value of `bytes` gets when the value's size
// follows the input shapes (a value outside the arena, the arena itself): multiples of
// 512 bytes up to 4 KiB, then eight classes between powers of two (at most 12.5% over).
// A value that grows a little each run (a decoder's KV cache, a decode step's scores)
// then fits a block of its class, back in the backend's cache of freed blocks, for
// several runs: growing from S to S' it crosses at most 8·log2(S'/S) classes, where exact
// sizes would take a new device allocation every run.
int64_t SizeClass(int64_t bytes);

}  // namespace tpc::runtime
