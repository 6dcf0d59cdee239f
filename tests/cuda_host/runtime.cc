// The CUDA runtime calls of tpc's CUDA backend, on the host (with blas.cc and nccl.cc):
// linked into a program instead of the toolkit's libraries (their definitions win over the
// shared libraries'), with cuda_host's launches, so that the whole backend (memory, copies,
// kernels, GEMMs, CUDA graphs, collectives) runs without a GPU. Compiled against the
// toolkit's own headers, so every signature is the real one.
//
// One device of 80 GiB ("0000:01:00.0"), or CUDA_HOST_DEVICES of them (a process of a
// multi-process run then takes one, LOCAL_RANK's, as on a machine with that many GPUs; the
// memory is this process's and its 80 GiB are counted once for all). Device memory is host
// memory aligned to 256 bytes, each block between redzones checked after every piece of
// work, and closed to the host outside the device's work (device_work.h's DeviceAccess).
// Streams defer their work until the host waits for it (device_work.h's Submit); work that
// waits (an NCCL collective, nccl.cc) holds up its stream. A stream being captured records
// its work into the graph, and a graph launch runs the record; what CUDA refuses during a
// capture is refused here too (the capture is invalidated): synchronizing or querying the
// stream, and copies to or from host memory that is not pinned.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <thread>

#include "device_work.h"
#include "hooks.h"

using cuda_host::emulated::Steps;
using Start = std::function<Steps()>;  // a piece of work, started (device_work.h)

struct CUstream_st {
  int device = 0;  // the current device when it was made
  bool capturing = false;
  bool invalidated = false;
  std::vector<Start> record;
  // Work queued and not finished (deferred streams): it runs when the host waits for it.
  // The front piece may be started and waiting (`running`).
  struct Pending {
    Start start;
    Steps running;
  };
  std::mutex mutex;
  std::deque<Pending> pending;
  uint64_t queued = 0, done = 0;  // pieces of work queued and finished so far
};
struct CUevent_st {
  cudaStream_t stream = nullptr;  // where it was last recorded, and after how many pieces
  uint64_t at = 0;
};
struct CUgraph_st {
  std::vector<Start> work;
};
struct CUgraphExec_st {
  // Shared with its launches still queued: CUDA lets an exec go while they run.
  std::shared_ptr<const std::vector<Start>> work;
};

namespace {

constexpr size_t kDeviceBytes = size_t{80} << 30;
constexpr size_t kAlign = 256;
// Each device block sits between redzones of kCanary bytes (kRedzone before it; from its
// requested end to kRedzone past its rounded end), checked after every piece of work: a
// kernel, copy, memset or GEMM that writes just outside its block stops the program saying
// so. Copies, memsets, GEMMs and collectives also have their operands' ranges checked
// against the blocks before they run (reads included). Not seen: an overrun from one value
// into the next inside one block (the executor's arena). A stray access far from every
// block faults when it lands where no block ever was (past g_space_end), and is unseen in
// a freed block's range.
constexpr size_t kRedzone = 256;
constexpr unsigned char kCanary = 0xcb;

struct Block {
  size_t bytes, rounded;  // as asked for; rounded up to kAlign
  int device;             // current when it was allocated
};
std::mutex g_mutex;                // the maps below (ranks may be threads)
std::map<char*, Block> g_device;   // device allocations by start
std::map<char*, size_t> g_pinned;  // pinned host allocations: start → bytes
size_t g_device_used = 0;
// Every device block, with its redzones, lies in one reservation of address space, which
// is closed to the host (PROT_NONE) outside the device's work: host code that touches
// device memory, which on a GPU reads garbage or faults, faults here too, saying so
// (OnSegv). CUDA_HOST_UNPROTECTED=1 leaves it open.
constexpr size_t kReserve = 2 * kDeviceBytes;  // address space only
char* g_space = nullptr;                       // under g_mutex; set once
size_t g_space_end = 0;                        // under g_mutex: the end of what blocks have used
std::map<size_t, size_t> g_holes;  // under g_mutex: freed ranges below it, offset → bytes
thread_local cudaError_t g_runtime_error = cudaSuccess;
thread_local int g_current_device = 0;
constexpr int kMaxDevices = 64;
// CUDA_HOST_DEVICES (1 to 64; default 1).
int DeviceCount() {
  static const int count = [] {
    const char* v = std::getenv("CUDA_HOST_DEVICES");
    const int n = v == nullptr ? 1 : std::atoi(v);
    return std::clamp(n, 1, kMaxDevices);
  }();
  return count;
}
// A kernel that failed in work run later than its launch (a queued or replayed kernel):
// returned by the next synchronization, as an asynchronous error is, and kept (sticky).
// One per device (a device's failure is not another's).
std::atomic<cudaError_t> g_async_error[kMaxDevices] = {};
std::string g_async_message[kMaxDevices];  // under g_mutex
// Under g_mutex: every stream, owned here (a wait holds one while a thread destroys it).
std::map<cudaStream_t, std::shared_ptr<CUstream_st>> g_streams;
// Streams defer their work until the host waits for it (the default), as a GPU runs it
// behind the host: a missing wait shows as stale or overwritten data. CUDA_HOST_SYNC=1
// runs all work when it is queued.
const bool g_deferred = [] {
  const char* v = std::getenv("CUDA_HOST_SYNC");
  return v == nullptr || std::string(v) != "1";
}();

cudaError_t Fail(cudaError_t e) {
  g_runtime_error = e;
  return e;
}

bool Intact(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (static_cast<unsigned char>(p[i]) != kCanary) return false;
  return true;
}

[[noreturn]] void Stop(const std::string& message) {
  std::fprintf(stderr, "cuda_host: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

const bool g_protected = [] {
  const char* v = std::getenv("CUDA_HOST_UNPROTECTED");
  return v == nullptr || std::string(v) != "1";
}();
std::mutex g_access_mutex;
int g_access_count = 0;           // under g_access_mutex: device work running, on any thread
std::atomic<bool> g_open{false};  // g_access_count > 0, for the SIGSEGV handler
size_t g_open_end = 0;  // under g_access_mutex: the extent of g_space its protection covers
// The handler OnSegv hands a fault on to: written (under g_access_mutex) into the slot the
// handler is not reading, then published.
struct sigaction g_previous_segv[2];
std::atomic<int> g_previous_at{0};

void Protect(size_t begin, size_t end, bool open) {
  if (begin < end &&
      ::mprotect(g_space + begin, end - begin, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
    Stop("mprotect of device memory failed: " + std::string(std::strerror(errno)));
  }
}

// A fault in device memory is named; then the fault repeats, to the handler before this
// one (Catch2's, a debugger's, or the default). A SIGSEGV raised or sent (not a fault)
// ends the process: a handler that re-raises must not bounce back here for ever.
void OnSegv(int, siginfo_t* info, void*) {
  const int saved_errno = errno;
  if (info->si_code <= 0) {
    ::signal(SIGSEGV, SIG_DFL);
    errno = saved_errno;
    return;
  }
  const char* at = static_cast<const char*>(info->si_addr);
  if (g_space != nullptr && at >= g_space && at < g_space + kReserve) {
    static constexpr char kHost[] =
        "cuda_host: host code touched device memory outside the device's work (a kernel, "
        "copy, GEMM or collective): on a GPU that is an invalid access "
        "(CUDA_HOST_UNPROTECTED=1 leaves device memory open to the host)\n";
    static constexpr char kDevice[] =
        "cuda_host: device work (or host code while it ran) touched device memory where no "
        "block ever was\n";
    if (g_open.load()) {
      (void)!::write(STDERR_FILENO, kDevice, sizeof kDevice - 1);
    } else {
      (void)!::write(STDERR_FILENO, kHost, sizeof kHost - 1);
    }
  }
  ::sigaction(SIGSEGV, &g_previous_segv[g_previous_at.load()], nullptr);
  errno = saved_errno;
}
// Under g_access_mutex. Again when another handler took SIGSEGV since (Catch2 installs and
// restores its own around every test case).
void InstallOnSegv() {
  struct sigaction current {};
  ::sigaction(SIGSEGV, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == OnSegv) return;
  struct sigaction mine {};
  mine.sa_sigaction = OnSegv;
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&mine.sa_mask);
  const int slot = 1 - g_previous_at.load();
  g_previous_segv[slot] = current;
  g_previous_at = slot;
  ::sigaction(SIGSEGV, &mine, nullptr);
}

// Blocks now reach `end` (bytes from g_space): the new part takes the protection of the rest.
void Extend(size_t end) {
  std::lock_guard<std::mutex> lock(g_access_mutex);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  end = (end + page - 1) / page * page;
  if (end <= g_open_end) return;
  if (!g_protected || g_access_count > 0) Protect(g_open_end, end, true);
  g_open_end = end;
}

// `bytes` (a multiple of kAlign) of g_space: the first freed range that holds them, else
// past the end. Under g_mutex.
char* Take(size_t bytes) {
  if (g_space == nullptr) {
    void* p =
        ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      Stop("cannot reserve " + std::to_string(kReserve >> 30) +
           " GiB of address space for device memory: " + std::strerror(errno));
    }
    g_space = static_cast<char*>(p);
  }
  for (auto it = g_holes.begin(); it != g_holes.end(); ++it) {
    if (it->second < bytes) continue;
    const auto [at, size] = *it;
    g_holes.erase(it);
    if (size > bytes) g_holes[at + bytes] = size - bytes;
    return g_space + at;
  }
  if (g_space_end + bytes > kReserve) return nullptr;
  const size_t at = g_space_end;
  g_space_end += bytes;
  Extend(g_space_end);
  return g_space + at;
}
// Gives back what Take gave, joined with the freed ranges beside it; its whole pages go
// back to the system. Under g_mutex.
void Give(char* p, size_t bytes) {
  size_t at = static_cast<size_t>(p - g_space);
  auto next = g_holes.lower_bound(at);
  if (next != g_holes.end() && next->first == at + bytes) {
    bytes += next->second;
    next = g_holes.erase(next);
  }
  if (next != g_holes.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == at) {
      at = before->first;
      bytes += before->second;
      g_holes.erase(before);
    }
  }
  if (at + bytes == g_space_end) {
    g_space_end = at;  // the top comes back (g_open_end stays: its protection follows)
  } else {
    g_holes[at] = bytes;
  }
  cuda_host::emulated::Discard(g_space + at, bytes);
}

// Stops the program when `what` has written into a redzone.
void CheckRedzones(const char* what) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& [p, b] : g_device) {
    const bool before = Intact(p - kRedzone, kRedzone);
    const bool after = Intact(p + b.bytes, b.rounded - b.bytes + kRedzone);
    if (!before || !after) {
      char where[32];
      std::snprintf(where, sizeof where, "%p", static_cast<void*>(p));
      Stop(std::string(what) + " wrote " + (before ? "past the end of" : "before the start of") +
           " the device block of " + std::to_string(b.bytes) + " bytes at " + where +
           " (its redzone's bytes changed)");
    }
  }
}

// Whether [p, p + bytes) lies inside one block of `blocks` (start → entry, `size` gives an
// entry's bytes). Under g_mutex.
template <typename Blocks, typename Size>
bool InsideOne(const Blocks& blocks, const void* p, size_t bytes, Size size) {
  const char* c = static_cast<const char*>(p);
  auto it = blocks.upper_bound(const_cast<char*>(c));
  if (it == blocks.begin()) return false;
  --it;
  return c >= it->first && c + bytes <= it->first + size(it->second);
}
size_t PinnedBytes(size_t bytes) { return bytes; }
size_t DeviceBytes(const Block& b) { return b.bytes; }

// Whether [p, p + bytes) lies in pinned host memory; in one device block or pinned memory
// (which the device reaches too); and whether it overlaps any device block or its redzones.
bool IsPinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return InsideOne(g_pinned, p, bytes, PinnedBytes);
}
bool InDeviceMemory(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return InsideOne(g_device, p, bytes, DeviceBytes) || InsideOne(g_pinned, p, bytes, PinnedBytes);
}
bool TouchesDeviceMemory(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_device.lower_bound(const_cast<char*>(c) + bytes);
  if (it == g_device.begin()) return false;
  --it;
  return it->first + it->second.rounded + kRedzone > c;
}

}  // namespace

namespace cuda_host::emulated {

void Discard(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

DeviceAccess::DeviceAccess() {
  if (!g_protected) return;
  std::lock_guard<std::mutex> lock(g_access_mutex);
  if (g_access_count++ == 0) {
    Protect(0, g_open_end, true);
    g_open = true;
  }
}
DeviceAccess::~DeviceAccess() {
  if (!g_protected) return;
  std::lock_guard<std::mutex> lock(g_access_mutex);
  if (--g_access_count == 0) {
    g_open = false;
    Protect(0, g_open_end, false);
    InstallOnSegv();
  }
}

void CheckOperand(const char* what, const char* operand, const void* p, size_t bytes, bool device) {
  if (bytes == 0) return;
  if (device ? InDeviceMemory(p, bytes) : !TouchesDeviceMemory(p, bytes)) return;
  char range[64];
  std::snprintf(range, sizeof range, "[%p, +%zu)", p, bytes);
  Stop(std::string(what) + ": its " + operand + " " + range +
       (device ? " is not inside one device block"
               : " is device memory, where host memory belongs"));
}

void CheckOnDevice(const char* what, const char* operand, const void* p, size_t bytes, int device) {
  if (bytes == 0) return;
  int found = -1;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const char* c = static_cast<const char*>(p);
    auto it = g_device.upper_bound(const_cast<char*>(c));
    if (it != g_device.begin() && InsideOne(g_device, p, bytes, DeviceBytes)) {
      found = std::prev(it)->second.device;
    }
  }
  if (found == device) return;
  char range[64];
  std::snprintf(range, sizeof range, "[%p, +%zu)", p, bytes);
  Stop(std::string(what) + ": its " + operand + " " + range +
       (found < 0 ? std::string(" is not inside one device block")
                  : " is memory of device " + std::to_string(found) + ", not of device " +
                        std::to_string(device)));
}

}  // namespace cuda_host::emulated

namespace {

using cuda_host::emulated::CheckOperand;
using cuda_host::emulated::DeviceAccess;

// `start`'s work as it runs on `device`: once finished, the redzones checked, and a
// kernel's failure left as the device's asynchronous error.
Start AsDeviceWork(Start start, const char* what, int device) {
  return [start = std::move(start), what, device] {
    return Steps([steps = start(), what, device] {
      if (!steps()) return false;
      CheckRedzones(what);
      if (const int e = cuda_host::TakeLastErrorCode(); e != 0) {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_async_error[device] == cudaSuccess) {
          g_async_error[device] = static_cast<cudaError_t>(e);
          g_async_message[device] = cuda_host::LastError();
        }
      }
      return true;
    });
  };
}

// Runs `stream`'s queued work, on the calling thread, until `upto` pieces have finished or
// one waits; whether they have finished.
bool RunUpTo(cudaStream_t stream, uint64_t upto) {
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->done >= upto || stream->pending.empty()) return true;
  DeviceAccess open;
  while (stream->done < upto && !stream->pending.empty()) {
    CUstream_st::Pending& next = stream->pending.front();
    if (!next.running) next.running = next.start();
    if (!next.running()) return false;
    stream->pending.pop_front();
    ++stream->done;
  }
  return true;
}
bool RunAll(cudaStream_t stream) { return RunUpTo(stream, UINT64_MAX); }
// Until `steps` has finished (a host wait, which work that waits on other ranks holds up).
// Device memory stays open meanwhile (closing and opening it at every poll would cost
// more than the wait). The first call runs unopened: `steps` opens its own (RunUpTo) or
// its caller has (SubmitSteps).
void Finish(const Steps& steps) {
  if (steps()) return;
  DeviceAccess open;
  while (!steps()) std::this_thread::sleep_for(std::chrono::microseconds(20));
}
// As RunUpTo, waiting for the work that waits.
void WaitUpTo(cudaStream_t stream, uint64_t upto) {
  Finish([stream, upto] { return RunUpTo(stream, upto); });
}
void WaitAll(cudaStream_t stream) { WaitUpTo(stream, UINT64_MAX); }
// The current device's streams, waited for (as cudaFree waits for its device).
void WaitDevice() {
  std::vector<std::shared_ptr<CUstream_st>> mine;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& [handle, stream] : g_streams)
      if (stream->device == g_current_device) mine.push_back(stream);
  }
  for (const auto& s : mine) WaitAll(s.get());
}

}  // namespace

void cuda_host::emulated::SubmitSteps(cudaStream_t stream, Start start, const char* what) {
  Start device =
      AsDeviceWork(std::move(start), what, stream != nullptr ? stream->device : g_current_device);
  if (stream != nullptr && stream->capturing) {
    stream->record.push_back(std::move(device));
  } else if (stream != nullptr && g_deferred) {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->pending.push_back({std::move(device), nullptr});
    ++stream->queued;
  } else {
    DeviceAccess open;
    Finish(device());
  }
}

void cuda_host::emulated::Submit(cudaStream_t stream, std::function<void()> work,
                                 const char* what) {
  auto shared = std::make_shared<std::function<void()>>(std::move(work));
  SubmitSteps(
      stream,
      [shared] {
        return Steps([shared] {
          (*shared)();
          return true;
        });
      },
      what);
}

namespace {

using cuda_host::emulated::Submit;

void SubmitLaunch(cudaStream_t stream, std::function<void()> work) {
  Submit(stream, std::move(work), "a kernel");
}

// An operation a capture does not allow: the capture is invalidated.
cudaError_t RefusedInCapture(cudaStream_t stream) {
  stream->invalidated = true;
  return Fail(cudaErrorStreamCaptureUnsupported);
}

// After a synchronization: the asynchronous error, if one is left.
cudaError_t Synchronized() {
  const cudaError_t e = g_async_error[g_current_device];
  return e != cudaSuccess ? Fail(e) : cudaSuccess;
}

int LastErrorForLaunch() { return static_cast<int>(cudaGetLastError()); }

struct Installed {
  Installed() {
    cuda_host::SetSubmitter(SubmitLaunch);
    cuda_host::SetErrorSource(LastErrorForLaunch);
  }
} g_installed;

}  // namespace

extern "C" {

// ---- Devices and errors ----
cudaError_t cudaGetDeviceCount(int* count) {
  *count = DeviceCount();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= DeviceCount()) return Fail(cudaErrorInvalidDevice);
  g_current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_current_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int device) {
  if (device < 0 || device >= DeviceCount()) return Fail(cudaErrorInvalidDevice);
  std::snprintf(id, static_cast<size_t>(len), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const int launch = cuda_host::TakeLastErrorCode();
  const cudaError_t async = g_async_error[g_current_device];
  const cudaError_t e = launch != 0            ? static_cast<cudaError_t>(launch)
                        : async != cudaSuccess ? async
                                               : g_runtime_error;
  g_runtime_error = cudaSuccess;
  return e;
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorLaunchFailure:
      return (g_async_error[g_current_device] != cudaSuccess ? g_async_message[g_current_device]
                                                             : cuda_host::LastError())
          .c_str();
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    default:
      return "cuda_host: an error of the emulated runtime";
  }
}

// ---- Memory ----
cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (bytes > kDeviceBytes) return Fail(cudaErrorMemoryAllocation);
  const size_t size = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_device_used + size > kDeviceBytes) return Fail(cudaErrorMemoryAllocation);
  char* raw = Take(size + 2 * kRedzone);
  if (raw == nullptr) return Fail(cudaErrorMemoryAllocation);
  {
    // The whole block, so that what a kernel reads before anything wrote it is 0xcb
    // bytes, not zeros (cuBLAS's workspace, never used here, gives its pages back:
    // Discard).
    DeviceAccess open;
    std::memset(raw, kCanary, size + 2 * kRedzone);
  }
  char* c = raw + kRedzone;
  g_device[c] = Block{bytes, size, g_current_device};
  g_device_used += size;
  *p = c;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  WaitDevice();  // cudaFree waits for the device
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_device.find(static_cast<char*>(p));
  if (it == g_device.end()) return Fail(cudaErrorInvalidValue);  // not a block's start
  g_device_used -= it->second.rounded;
  Give(static_cast<char*>(p) - kRedzone, it->second.rounded + 2 * kRedzone);
  g_device.erase(it);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *total = kDeviceBytes;
  *free = kDeviceBytes - g_device_used;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  if (bytes > kDeviceBytes) return Fail(cudaErrorMemoryAllocation);
  char* c = static_cast<char*>(
      std::aligned_alloc(kAlign, std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign)));
  if (c == nullptr) return Fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pinned[c] = bytes;
  *p = c;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }
cudaError_t cudaFreeHost(void* p) {
  WaitDevice();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_pinned.erase(static_cast<char*>(p)) == 0) return Fail(cudaErrorInvalidValue);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  if (!IsPinned(host, 1)) return Fail(cudaErrorInvalidValue);
  *device = host;
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (stream != nullptr && stream->capturing &&
      ((kind == cudaMemcpyHostToDevice && !IsPinned(src, bytes)) ||
       (kind == cudaMemcpyDeviceToHost && !IsPinned(dst, bytes)))) {
    return RefusedInCapture(stream);
  }
  if (kind != cudaMemcpyDefault) {
    const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    CheckOperand("cudaMemcpyAsync", "source", src, bytes, from_device);
    CheckOperand("cudaMemcpyAsync", "destination", dst, bytes, to_device);
  }
  if (kind == cudaMemcpyHostToDevice && !IsPinned(src, bytes) &&
      (stream == nullptr || !stream->capturing)) {
    // From pageable memory: the source is staged before the call returns (the caller may
    // reuse it at once); the device writes it later.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    Submit(
        stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); },
        "cudaMemcpyAsync");
    return cudaSuccess;
  }
  if (kind == cudaMemcpyDeviceToHost && !IsPinned(dst, bytes) && stream != nullptr &&
      !stream->capturing) {
    // Into pageable memory: the call returns once the copy is done, after the stream's
    // earlier work.
    WaitAll(stream);
    DeviceAccess open;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  Submit(
      stream, [dst, src, bytes] { std::memmove(dst, src, bytes); }, "cudaMemcpyAsync");
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  CheckOperand("cudaMemsetAsync", "destination", p, bytes, true);
  Submit(
      stream, [p, value, bytes] { std::memset(p, value, bytes); }, "cudaMemsetAsync");
  return cudaSuccess;
}

// ---- Streams, events, graphs ----
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  auto stream = std::make_shared<CUstream_st>();
  stream->device = g_current_device;
  *s = stream.get();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_streams[*s] = std::move(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  WaitAll(s);  // its queued work still runs
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_streams.erase(s) == 1 ? cudaSuccess : Fail(cudaErrorInvalidValue);
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s != nullptr && s->capturing) return RefusedInCapture(s);
  if (s != nullptr) WaitAll(s);
  return Synchronized();
}
// Work still queued: not ready (and the work runs, up to work that waits, so that a later
// query finds it done: a poll sees both answers).
cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (s != nullptr && s->capturing) return RefusedInCapture(s);
  if (s != nullptr) {
    bool busy;
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      busy = !s->pending.empty();
    }
    if (busy) {
      RunAll(s);
      return cudaErrorNotReady;
    }
  }
  return Synchronized();
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (s == nullptr || s->capturing) return Fail(cudaErrorIllegalState);
  s->capturing = true;
  s->invalidated = false;
  s->record.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (s == nullptr || !s->capturing) return Fail(cudaErrorIllegalState);
  s->capturing = false;
  if (s->invalidated) {
    *graph = nullptr;
    s->record.clear();
    return Fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(s->record)};
  s->record.clear();
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return Fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{std::make_shared<const std::vector<Start>>(graph->work)};
  return cudaSuccess;
}
// The record's pieces in order, each started when the one before has finished.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return Fail(cudaErrorInvalidValue);
  cuda_host::emulated::SubmitSteps(
      stream,
      [work = exec->work] {
        return Steps([work, next = size_t{0}, running = Steps()]() mutable {
          for (; next < work->size(); ++next) {
            if (!running) running = (*work)[next]();
            if (!running()) return false;
            running = nullptr;
          }
          return true;
        });
      },
      "cudaGraphLaunch");
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (s != nullptr && s->capturing) return cudaSuccess;  // a node of the graph
  e->stream = s;
  if (s != nullptr) {
    std::lock_guard<std::mutex> lock(s->mutex);
    e->at = s->queued;
  }
  return cudaSuccess;
}
// As cudaStreamQuery: not ready while the work before it is queued (which then runs).
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e->stream != nullptr) {
    bool busy;
    {
      std::lock_guard<std::mutex> lock(e->stream->mutex);
      busy = e->stream->done < e->at;
    }
    if (busy) {
      RunUpTo(e->stream, e->at);
      return cudaErrorNotReady;
    }
  }
  return Synchronized();
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e->stream != nullptr) WaitUpTo(e->stream, e->at);
  return Synchronized();
}

}  // extern "C"
