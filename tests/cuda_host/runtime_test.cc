// The emulated CUDA runtime and NCCL (runtime.cc, nccl.cc) find what they are there to
// find: a missing wait shows as stale data, and what CUDA and NCCL leave undefined (a copy
// past a block, device memory named as host memory, a write into a redzone, host code
// reading device memory, overlapping NCCL buffers, a buffer on another GPU, a nonblocking
// call not yet settled) stops the program, naming it. Linked into tpc_tests_cuda_host only:
// with the real libraries these calls are undefined behaviour, not checks. Each stop runs
// in a child process (this executable, re-run on one hidden test case), which must die by
// SIGABRT saying why (SIGSEGV for host code reading device memory).
#include <cuda_runtime_api.h>
#include <limits.h>
#include <nccl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

// This executable's path (for the children).
std::string Self() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  REQUIRE(n > 0);
  return std::string(path, static_cast<size_t>(n));
}

// This executable re-run on the hidden test case `name`: 2 emulated GPUs, the emulation's
// checks all on, no core file, and under ASan its SIGSEGV handler off (the fault must end
// the child by SIGSEGV).
tpc::testing::CommandResult RunMisuse(const std::string& name) {
  const std::string self = Self();
  REQUIRE(name.find('\'') == std::string::npos);  // quoted for the shell below
  REQUIRE(self.find('\'') == std::string::npos);
  return tpc::testing::RunCommand(
      "ulimit -c 0; exec env -u CUDA_HOST_UNPROTECTED -u CUDA_HOST_SYNC CUDA_HOST_DEVICES=2 "
      "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0\" '" +
      self + "' '" + name + "'");
}

// A child that neither stops nor returns dies by SIGALRM (not the signal expected).
void Deadline() { ::alarm(60); }

void* DeviceBlock(size_t bytes, int device = 0) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  return p;
}

// A communicator of one rank on GPU 0.
ncclComm_t WorldOfOne() {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  return comm;
}

}  // namespace

TEST_CASE("The emulated runtime: a missing wait shows as stale data", "[cuda][cuda_host]") {
  if (const char* sync = std::getenv("CUDA_HOST_SYNC");
      sync != nullptr && std::string(sync) == "1") {
    WARN("skipped: CUDA_HOST_SYNC=1 runs all work when it is queued");
    return;
  }
  // Pinned buffers, so that neither copy waits by itself.
  float* up = nullptr;
  float* down = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&up), 64 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&down), 64 * sizeof(float)) == cudaSuccess);
  for (int i = 0; i < 64; ++i) {
    up[i] = static_cast<float>(i);
    down[i] = -1.0f;
  }
  void* block = DeviceBlock(64 * sizeof(float));
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(block, up, 64 * sizeof(float), cudaMemcpyHostToDevice, stream) ==
          cudaSuccess);
  REQUIRE(cudaMemcpyAsync(down, block, 64 * sizeof(float), cudaMemcpyDeviceToHost, stream) ==
          cudaSuccess);
  CHECK(down[5] == -1.0f);  // not waited for: as a GPU still running behind the host
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(down[5] == 5.0f);
  CHECK(down[63] == 63.0f);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  REQUIRE(cudaFree(block) == cudaSuccess);
  REQUIRE(cudaFreeHost(up) == cudaSuccess);
  REQUIRE(cudaFreeHost(down) == cudaSuccess);
}

TEST_CASE("The emulated runtime and NCCL stop what CUDA and NCCL leave undefined, naming it",
          "[cuda][cuda_host]") {
  struct Case {
    const char* name;        // the hidden test case that does it
    const char* message;     // what the child must say
    int signal = SIGABRT;    // what it must die by
    const char* after = "";  // what the child must say before it
  };
  const Case cases[] = {
      {"misuse: a copy past the end of a device block", "is not inside one device block"},
      {"misuse: device memory as the host memory of a copy",
       "is device memory, where host memory belongs"},
      {"misuse: a write past the end of a device block",
       "cudaMemcpyAsync wrote past the end of the device block of 64 bytes"},
      {"misuse: host code reading device memory",
       "host code touched device memory outside the device's work", SIGSEGV,
       "the device's own reads and writes worked; now the host reads"},
      {"misuse: overlapping NCCL buffers", "which NCCL leaves undefined"},
      {"misuse: an NCCL buffer on another GPU", "is memory of device 1, not of device 0"},
      {"misuse: a nonblocking NCCL call before the last one settled",
       "on a nonblocking communicator whose last call has not settled"},
  };
  for (const Case& c : cases) {
    const tpc::testing::CommandResult child = RunMisuse(c.name);
    INFO(c.name << ":\n" << child.output);
    CHECK(child.signal == c.signal);
    const size_t said = child.output.find(c.message);
    CHECK(said != std::string::npos);
    if (*c.after != '\0') CHECK(child.output.find(c.after) < said);
    CHECK_THAT(child.output, Catch::Contains(std::string("cuda_host: ")) &&
                                 Catch::Contains(std::string(c.message)));
    CHECK_THAT(child.output, !Catch::Contains(std::string("returned: not stopped")));
  }
}

// The children. Each must not return: reaching the end is reported.
#define NOT_STOPPED() FAIL("returned: not stopped")

TEST_CASE("misuse: a copy past the end of a device block", "[.misuse]") {
  Deadline();
  void* block = DeviceBlock(64);
  std::vector<char> host(128, 1);
  (void)cudaMemcpyAsync(block, host.data(), host.size(), cudaMemcpyHostToDevice, nullptr);
  NOT_STOPPED();
}

TEST_CASE("misuse: device memory as the host memory of a copy", "[.misuse]") {
  Deadline();
  void* block = DeviceBlock(64);
  void* other = DeviceBlock(64);
  (void)cudaMemcpyAsync(other, block, 64, cudaMemcpyHostToDevice, nullptr);
  NOT_STOPPED();
}

TEST_CASE("misuse: a write past the end of a device block", "[.misuse]") {
  Deadline();
  // cudaMemcpyDefault: no kind to check the operands against, as a kernel's stray write.
  void* block = DeviceBlock(64);
  std::vector<char> host(72, 1);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  (void)cudaMemcpyAsync(block, host.data(), host.size(), cudaMemcpyDefault, stream);
  (void)cudaStreamSynchronize(stream);
  NOT_STOPPED();
}

TEST_CASE("misuse: host code reading device memory", "[.misuse]") {
  Deadline();
  // The device's own reads and writes work (a memset, and a copy into pageable memory);
  // then the host reads the block itself.
  auto* block = static_cast<float*>(DeviceBlock(64));
  REQUIRE(cudaMemsetAsync(block, 0, 64, nullptr) == cudaSuccess);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  std::vector<float> copy(16, -1.0f);
  REQUIRE(cudaMemcpyAsync(copy.data(), block, 64, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  REQUIRE(copy[3] == 0.0f);
  std::fprintf(stderr, "the device's own reads and writes worked; now the host reads\n");
  std::fflush(stderr);
  const float x = static_cast<volatile float*>(block)[3];  // SIGSEGV: closed to the host
  WARN("read " << x);
  NOT_STOPPED();
}

TEST_CASE("misuse: overlapping NCCL buffers", "[.misuse]") {
  Deadline();
  ncclComm_t comm = WorldOfOne();
  char* block = static_cast<char*>(DeviceBlock(256));
  (void)ncclAllReduce(block, block + 4, 16, ncclFloat32, ncclSum, comm, nullptr);
  NOT_STOPPED();
}

TEST_CASE("misuse: an NCCL buffer on another GPU", "[.misuse]") {
  Deadline();
  ncclComm_t comm = WorldOfOne();
  void* far = DeviceBlock(64, 1);
  (void)ncclAllReduce(far, far, 16, ncclFloat32, ncclSum, comm, nullptr);
  NOT_STOPPED();
}

TEST_CASE("misuse: a nonblocking NCCL call before the last one settled", "[.misuse]") {
  Deadline();
  // Two ranks as threads, nonblocking: each joins (polled until settled), then rank 0 calls
  // twice without polling in between.
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  auto rank = [&id](int r) {
    (void)cudaSetDevice(r);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t state = ncclCommInitRankConfig(&comm, 2, id, r, &config);
    while (state == ncclInProgress) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      (void)ncclCommGetAsyncError(comm, &state);
    }
    if (state != ncclSuccess) return;
    void* buffer = nullptr;
    (void)cudaMalloc(&buffer, 64);
    cudaStream_t stream = nullptr;
    (void)cudaStreamCreate(&stream);
    (void)ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, comm, stream);
    if (r == 0) (void)ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, comm, stream);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // the process stops first
  };
  std::thread one(rank, 1);
  rank(0);
  one.join();
  NOT_STOPPED();
}
