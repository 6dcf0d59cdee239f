// The CUDA kernels' own text, run on the host: what nvcc's device side would execute,
// compiled by the host compiler against this header instead of the CUDA toolkit's.
//
// tests/cuda_host/to_host.cmake turns each src/runtime/cuda/*.cu into a .cc that includes
// this header first and writes each launch `K<<<grid, block, shared, stream>>>(args)` as
// `K | cuda_host::Config(grid, block, shared, stream) | cuda_host::Args(args)`. A launch
// runs at once (streams are in order anyway): block after block, each block's threads as
// fibers of the calling thread (ucontext), switched only at the synchronization points:
// __syncthreads, __syncwarp, the warp shuffles and the WMMA collectives. Between two of
// them a thread runs alone, so the order in which the threads run (`SetOrder`) is the
// order of their memory accesses: a result that changes with the order is a race.
//
// Stricter than the hardware, on purpose: a barrier that some thread of its block (or,
// for the warp ones, of its warp) has exited before, or that threads reach at different
// barriers, fails the launch (cudaErrorLaunchFailure; `LastError()` says where), and warp
// operations take only the full mask. `__shared__` variables are function statics, one
// per host thread: each copy reused by every block in turn (blocks never run at once here),
// and filled with 0xff bytes (NaN in every float type) when a block first reaches its
// declaration (to_host.cmake adds CUDA_HOST_POISON after each): a read of what the block
// never wrote finds NaN, not zeros or the previous block's values. Not modelled: the
// `__CUDA_ARCH__` branches of the shared math (the host branch runs), dynamic shared memory,
// several streams. Out-of-bounds accesses are the host's: the sanitizer build finds them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "hooks.h"

// ---- The runtime API's types ----
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
struct CUstream_st;
using cudaStream_t = CUstream_st*;

// ---- Qualifiers ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// `__shared__` as to_host.cmake writes it (cuda_host.h defines no `__shared__`).
#define CUDA_HOST_SHARED static thread_local
#define __align__(n) __attribute__((aligned(n)))

namespace cuda_host {

// Where the block's threads run between synchronization points, in increasing or
// decreasing thread index (and blocks in increasing or decreasing order).
enum class Order { kForward, kReverse };
void SetOrder(Order order);

// The coordinates of the thread running now (only inside a launch).
struct ThreadState {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
};
const ThreadState& Current();

// The launch error of the last launch, and what went wrong in words ("" when none).
cudaError_t TakeLastError();
// Launches so far (for tests that a launch happened).
int64_t Launches();

// Synchronization points (the fiber yields): the whole block, or the calling thread's warp.
void BlockBarrier(const char* what);
void WarpBarrier(const char* what);
// Lane `src` of the calling warp's `bytes` from each lane's `mine` (a warp barrier before
// and after), into `out`.
void WarpExchange(const void* mine, std::size_t bytes, int src, void* out);
int Lane();
// Fails the launch: something the emulation does not model (a partial warp mask, ...), or
// something the hardware does not allow (`Invalid`: a misaligned WMMA pointer, ...).
void Unsupported(const char* what);
void Invalid(const char* what);

// Fills `bytes` at `p`, a `__shared__` variable, with 0xff bytes unless the running block
// has already reached its declaration (`seen` holds the last block that did).
void PoisonShared(void* p, std::size_t bytes, std::uint64_t* seen);
#define CUDA_HOST_POISON(name)                                   \
  static thread_local ::std::uint64_t cuda_host_seen_##name = 0; \
  ::cuda_host::PoisonShared(&(name), sizeof(name), &cuda_host_seen_##name)

struct Config {
  dim3 grid, block;
  std::size_t shared = 0;
  cudaStream_t stream = nullptr;
  Config(dim3 g, dim3 b, std::size_t s = 0, cudaStream_t st = nullptr)
      : grid(g), block(b), shared(s), stream(st) {}
};

// Runs `body` for every thread of the launch: at once, or when the stream's work runs
// (hooks.h's submitter decides).
void Launch(const Config& config, std::function<void()> body);

template <typename... P>
struct Bound {
  void (*kernel)(P...);
  Config config;
};
template <typename... P>
Bound<P...> operator|(void (*kernel)(P...), const Config& config) {
  return Bound<P...>{kernel, config};
}
template <typename... A>
struct ArgPack {
  std::tuple<A...> args;
};
template <typename... A>
ArgPack<std::decay_t<A>...> Args(A&&... a) {
  return ArgPack<std::decay_t<A>...>{std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
}
// The launch: each thread calls the kernel with its own copy of the arguments, converted
// to the parameters' types as a launch converts them.
template <typename... P, typename... A>
void operator|(const Bound<P...>& k, const ArgPack<A...>& a) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launch with the wrong argument count");
  const std::tuple<P...> params =
      std::apply([](const A&... v) { return std::tuple<P...>(static_cast<P>(v)...); }, a.args);
  Launch(k.config, [kernel = k.kernel, params] {
    std::tuple<P...> mine = params;
    std::apply(kernel, mine);
  });
}

}  // namespace cuda_host

#define threadIdx (::cuda_host::Current().thread_idx)
#define blockIdx (::cuda_host::Current().block_idx)
#define blockDim (::cuda_host::Current().block_dim)
#define gridDim (::cuda_host::Current().grid_dim)

inline cudaError_t cudaGetLastError() {
  return static_cast<cudaError_t>(::cuda_host::LastErrorForKernels());
}

inline void __syncthreads() { ::cuda_host::BlockBarrier("__syncthreads"); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu) ::cuda_host::Unsupported("__syncwarp with a partial mask");
  ::cuda_host::WarpBarrier("__syncwarp");
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  if (mask != 0xffffffffu || width != 32)
    ::cuda_host::Unsupported("__shfl_xor_sync with a partial mask or width");
  T out;
  ::cuda_host::WarpExchange(&v, sizeof v, ::cuda_host::Lane() ^ lane_mask, &out);
  return out;
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  if (mask != 0xffffffffu || width != 32)
    ::cuda_host::Unsupported("__shfl_sync with a partial mask or width");
  T out;
  ::cuda_host::WarpExchange(&v, sizeof v, src & 31, &out);
  return out;
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  if (mask != 0xffffffffu || width != 32)
    ::cuda_host::Unsupported("__shfl_down_sync with a partial mask or width");
  const int lane = ::cuda_host::Lane();
  const int src = lane + static_cast<int>(delta) < 32 ? lane + static_cast<int>(delta) : lane;
  T out;
  ::cuda_host::WarpExchange(&v, sizeof v, src, &out);
  return out;
}

// Atomics: the threads never run at once here, so a plain read-modify-write is atomic.
template <typename T>
T atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> value) {
  const T old = *address;
  if (old == compare) *address = value;
  return old;
}
template <typename T>
T atomicAdd(T* address, std::type_identity_t<T> value) {
  const T old = *address;
  *address = old + value;
  return old;
}
