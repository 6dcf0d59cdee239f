// cuda_host itself: what a launch runs, and that it finds what it is there to find (a race
// shows as a different result in the other order; a barrier that not every thread reaches
// fails the launch, naming it).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_host.h"

namespace {

__global__ void Coordinates(int* out) {
  const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
  const unsigned t = threadIdx.x + blockDim.x * threadIdx.y;
  out[b * blockDim.x * blockDim.y + t] = static_cast<int>(1000 * b + t);
}

// Each thread's neighbour's value: right with the barrier, a race without it.
__global__ void Neighbour(int* out, bool barrier) {
  CUDA_HOST_SHARED int slot[64];  // `__shared__`, as to_host.cmake writes it
  slot[threadIdx.x] = static_cast<int>(threadIdx.x) + 1;
  if (barrier) __syncthreads();
  out[threadIdx.x] = slot[(threadIdx.x + 1) % blockDim.x];
  if (barrier) {
    __syncthreads();
    slot[threadIdx.x] = 0;
  }
}

__global__ void Shuffles(int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int x = __shfl_xor_sync(0xffffffffu, 100 + lane, 1);
  const int down = __shfl_down_sync(0xffffffffu, 100 + lane, 3);
  const int from5 = __shfl_sync(0xffffffffu, 100 + lane, 5);
  out[3 * threadIdx.x] = x;
  out[3 * threadIdx.x + 1] = down;
  out[3 * threadIdx.x + 2] = from5;
}

__global__ void HalfBlockBarrier(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
    out[threadIdx.x] = 1;
  }
}

__global__ void ShuffleAfterExit(int* out) {
  if (threadIdx.x % 32 == 7) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}

// Lane 0 at two __syncwarp, the others at a shuffle from it: barriers that do not pair.
__global__ void MismatchedWarpBarriers(int* out) {
  if (threadIdx.x == 0) {
    __syncwarp();
    __syncwarp();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 5, 0);
  }
}

// Slot `write` of the block's shared row set to `v` (none when negative), then slot `read`.
__device__ float Slot(int write, int read, float v) {
  CUDA_HOST_SHARED float slot[64];
  CUDA_HOST_POISON(slot);  // as to_host.cmake writes after every declaration
  if (write >= 0) slot[write] = v;
  __syncthreads();
  const float r = slot[read];
  __syncthreads();
  return r;
}

// Per block: the even threads write their slots, every thread reads an odd one (which this
// block never wrote: the previous block did, in the second call); then the odd threads
// write, every thread reads an even one (the first call's, kept within the block).
__global__ void Unwritten(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  const float b = static_cast<float>(blockIdx.x);
  out[blockIdx.x * 128 + t] = Slot(t % 2 == 0 ? t : -1, t | 1, 1.0f + b);
  out[blockIdx.x * 128 + 64 + t] = Slot(t % 2 == 1 ? t : -1, t & ~1, 10.0f + b);
}

std::vector<int> RunNeighbour(bool barrier, cuda_host::Order order) {
  cuda_host::SetOrder(order);
  std::vector<int> out(64, -1);
  Neighbour | cuda_host::Config(1, 64) | cuda_host::Args(out.data(), barrier);
  cuda_host::SetOrder(cuda_host::Order::kForward);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  return out;
}

TEST_CASE("A launch runs every thread of every block once, with its coordinates",
          "[cuda_host][emulator]") {
  std::vector<int> out(3 * 2 * 40, -1);
  const int64_t before = cuda_host::Launches();
  Coordinates | cuda_host::Config(dim3(3, 2), dim3(20, 2)) | cuda_host::Args(out.data());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(cuda_host::Launches() == before + 1);
  for (int b = 0; b < 6; ++b)
    for (int t = 0; t < 40; ++t) CHECK(out[b * 40 + t] == 1000 * b + t);
}

TEST_CASE("A missing __syncthreads shows as results that depend on the threads' order",
          "[cuda_host][emulator]") {
  const std::vector<int> fwd = RunNeighbour(false, cuda_host::Order::kForward);
  const std::vector<int> rev = RunNeighbour(false, cuda_host::Order::kReverse);
  CHECK(fwd != rev);
  const std::vector<int> good = RunNeighbour(true, cuda_host::Order::kReverse);
  CHECK(good == RunNeighbour(true, cuda_host::Order::kForward));
  for (int t = 0; t < 64; ++t) CHECK(good[t] == (t + 1) % 64 + 1);
}

TEST_CASE("Warp shuffles read the named lane", "[cuda_host][emulator]") {
  std::vector<int> out(3 * 64, -1);
  Shuffles | cuda_host::Config(1, 64) | cuda_host::Args(out.data());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    CHECK(out[3 * t] == 100 + (lane ^ 1));
    CHECK(out[3 * t + 1] == 100 + (lane + 3 < 32 ? lane + 3 : lane));
    CHECK(out[3 * t + 2] == 105);
  }
}

TEST_CASE("Barriers that some threads never reach fail the launch, saying where",
          "[cuda_host][emulator]") {
  std::vector<int> out(64, 0);
  HalfBlockBarrier | cuda_host::Config(1, 64) | cuda_host::Args(out.data());
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK_THAT(cuda_host::LastError(),
             Catch::Contains("waits at __syncthreads while thread") && Catch::Contains("exited"));
  CHECK(cudaGetLastError() == cudaSuccess);  // read once, as the runtime's

  ShuffleAfterExit | cuda_host::Config(1, 32) | cuda_host::Args(out.data());
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK_THAT(cuda_host::LastError(), Catch::Contains("a warp shuffle while lane 7 had exited"));

  MismatchedWarpBarriers | cuda_host::Config(1, 32) | cuda_host::Args(out.data());
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK_THAT(cuda_host::LastError(),
             Catch::Contains("lane 0 waits at __syncwarp while lane 1 waits at a warp shuffle"));
}

TEST_CASE("Shared memory a block never wrote reads as NaN, not the last block's values",
          "[cuda_host][emulator]") {
  std::vector<float> out(2 * 128, 0.0f);
  Unwritten | cuda_host::Config(2, 64) | cuda_host::Args(out.data());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 64; ++t) {
      uint32_t bits = 0;
      std::memcpy(&bits, &out[static_cast<size_t>(b * 128 + t)], sizeof bits);
      CHECK(bits == 0xffffffffu);
      CHECK(out[static_cast<size_t>(b * 128 + 64 + t)] == 1.0f + static_cast<float>(b));
    }
  }
}

TEST_CASE("Launch configurations the hardware refuses are refused", "[cuda_host][emulator]") {
  std::vector<int> out(4096, 0);
  Coordinates | cuda_host::Config(1, 2048) | cuda_host::Args(out.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  Coordinates | cuda_host::Config(dim3(1, 70000), 32) | cuda_host::Args(out.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  Coordinates | cuda_host::Config(0, 32) | cuda_host::Args(out.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
}

}  // namespace
