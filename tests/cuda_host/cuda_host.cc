// The launches of cuda_host.h: a block's threads as ucontext fibers of the launching
// thread, resumed in the chosen order until each reaches its next synchronization point;
// then the barriers that everyone they wait for has reached are released.
#include "cuda_host.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_host {
namespace {

enum class Wait { kNone, kWarp, kBlock, kDone };

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr int kWarp = 32;
constexpr std::size_t kSlotBytes = 16;

struct Fiber {
  ucontext_t context;
  ThreadState state;
  Wait wait = Wait::kNone;
  const char* at = "";
  char* stack = nullptr;  // kStackBytes above a guard page
};

// The launch in progress.
struct Run {
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  int current = -1;
  ucontext_t scheduler;
  std::vector<std::array<unsigned char, kSlotBytes>> slots;  // a warp's exchange, per thread
  std::string error;
  const void* main_bottom = nullptr;  // the launching thread's stack (for the sanitizer)
  std::size_t main_size = 0;
};

thread_local Run* g_run = nullptr;
std::atomic<Order> g_order{Order::kForward};
thread_local cudaError_t g_last = cudaSuccess;  // per host thread, as the runtime's
thread_local std::string g_message;
std::atomic<int64_t> g_launches{0};
std::atomic<Submitter> g_submit{nullptr};

// ---- Context switches, told to AddressSanitizer when it is on ----
void StartSwitch([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                 [[maybe_unused]] std::size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}
void FinishSwitch([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** bottom,
                  [[maybe_unused]] std::size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#endif
}

Run& Running() {
  if (g_run == nullptr || g_run->current < 0) {
    std::fprintf(stderr, "cuda_host: a device function called outside a launch\n");
    std::abort();
  }
  return *g_run;
}

// From the running fiber back to the scheduler; returns when the scheduler resumes it.
// A fiber that is done or failed is never resumed (`last`: its fake stack can go).
void Yield(bool last = false) {
  Run& r = Running();
  Fiber& f = r.fibers[r.current];
  void* fake = nullptr;
  StartSwitch(last ? nullptr : &fake, r.main_bottom, r.main_size);
  swapcontext(&f.context, &r.scheduler);
  FinishSwitch(fake, nullptr, nullptr);
}

void FiberMain() {
  Run& r = *g_run;
  FinishSwitch(nullptr, &r.main_bottom, &r.main_size);
  (*r.body)();
  r.fibers[r.current].wait = Wait::kDone;
  Yield(/*last=*/true);
  std::abort();  // never resumed
}

void Fail(Run& r, std::string message) {
  if (r.error.empty()) r.error = std::move(message);
}

std::string Coordinates(const uint3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

const char* WaitName(const Fiber& f) {
  switch (f.wait) {
    case Wait::kDone:
      return "had exited";
    case Wait::kNone:
      return "was running";
    default:
      return f.at;
  }
}

// Runs warp [w0, w1) until each of its threads waits at __syncthreads or is done: its
// threads in order until they block, its warp barrier released once all have reached it.
// False when the launch failed.
bool RunWarp(Run& r, int w0, int w1, const uint3& block) {
  for (;;) {
    bool ran = false;
    for (int k = w0; k < w1; ++k) {
      const int i = g_order == Order::kForward ? k : w0 + w1 - 1 - k;
      if (r.fibers[i].wait != Wait::kNone) continue;
      r.current = i;
      void* fake = nullptr;
      StartSwitch(&fake, r.fibers[i].stack, kStackBytes);
      swapcontext(&r.scheduler, &r.fibers[i].context);
      FinishSwitch(fake, nullptr, nullptr);
      r.current = -1;
      if (!r.error.empty()) return false;
      ran = true;
    }
    if (ran) continue;
    int at = w0;
    while (at < w1 && r.fibers[at].wait != Wait::kWarp) ++at;
    if (at == w1) return true;  // at __syncthreads or done
    for (int i = w0; i < w1; ++i) {
      if (r.fibers[i].wait != Wait::kWarp) {
        Fail(r, std::string("block ") + Coordinates(block) + ", warp " +
                    std::to_string(w0 / kWarp) + ": lane " + std::to_string(at - w0) +
                    " waits at " + r.fibers[at].at + " while lane " + std::to_string(i - w0) + " " +
                    WaitName(r.fibers[i]));
        return false;
      }
    }
    for (int i = w0; i < w1; ++i) r.fibers[i].wait = Wait::kNone;
  }
}

// Runs one block to its end; false when the launch failed.
bool RunBlock(Run& r, const Config& c, const uint3& block) {
  const int n = static_cast<int>(r.fibers.size());
  for (int i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    const unsigned u = static_cast<unsigned>(i);
    f.state.thread_idx =
        uint3{u % c.block.x, u / c.block.x % c.block.y, u / (c.block.x * c.block.y)};
    f.state.block_idx = block;
    f.state.block_dim = c.block;
    f.state.grid_dim = c.grid;
    f.wait = Wait::kNone;
    f.at = "";
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, FiberMain, 0);
  }
  // Each warp in turn as far as it goes (the first one runs ahead of the others up to
  // the next __syncthreads: the widest skew between warps that the barriers allow).
  const int warps = (n + kWarp - 1) / kWarp;
  for (;;) {
    for (int k = 0; k < warps; ++k) {
      const int w = g_order == Order::kForward ? k : warps - 1 - k;
      if (!RunWarp(r, w * kWarp, std::min(n, (w + 1) * kWarp), block)) return false;
    }
    int done = 0;
    for (const Fiber& f : r.fibers) done += f.wait == Wait::kDone;
    if (done == n) return true;
    for (int i = 0; i < n; ++i) {
      if (r.fibers[i].wait == Wait::kDone) {
        int at = 0;
        while (r.fibers[at].wait != Wait::kBlock) ++at;
        Fail(r, std::string("block ") + Coordinates(block) + ": thread " + std::to_string(at) +
                    " waits at " + r.fibers[at].at + " while thread " + std::to_string(i) +
                    " had exited");
        return false;
      }
    }
    for (Fiber& f : r.fibers) f.wait = Wait::kNone;  // every thread is at __syncthreads
  }
}

void SetLast(cudaError_t e, std::string message) {
  g_last = e;
  g_message = std::move(message);
}

// A launch whose configuration was checked: every block, in the chosen order.
void RunLaunch(const Config& c, const std::function<void()>& body) {
  const uint64_t threads = static_cast<uint64_t>(c.block.x) * c.block.y * c.block.z;
  if (g_run != nullptr) {
    std::fprintf(stderr, "cuda_host: a launch from inside a launch\n");
    std::abort();
  }
  Run r;
  r.body = &body;
  r.fibers.resize(threads);
  r.slots.resize(threads);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t each = kStackBytes + page;
  char* stacks = static_cast<char*>(mmap(nullptr, each * threads, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (stacks == MAP_FAILED) {
    std::fprintf(stderr, "cuda_host: no memory for %llu fiber stacks\n",
                 static_cast<unsigned long long>(threads));
    std::abort();
  }
  for (uint64_t i = 0; i < threads; ++i) {
    mprotect(stacks + i * each, page, PROT_NONE);  // an overflow faults instead of corrupting
    r.fibers[i].stack = stacks + i * each + page;
  }
  g_run = &r;
  const uint64_t blocks = static_cast<uint64_t>(c.grid.x) * c.grid.y * c.grid.z;
  bool ok = true;
  for (uint64_t k = 0; k < blocks && ok; ++k) {
    const uint64_t b = g_order == Order::kForward ? k : blocks - 1 - k;
    const uint3 block{static_cast<unsigned>(b % c.grid.x),
                      static_cast<unsigned>(b / c.grid.x % c.grid.y),
                      static_cast<unsigned>(b / (static_cast<uint64_t>(c.grid.x) * c.grid.y))};
    ok = RunBlock(r, c, block);
  }
  g_run = nullptr;
  munmap(stacks, each * threads);
  if (!ok) SetLast(cudaErrorLaunchFailure, r.error);
}

}  // namespace

void SetOrder(Order order) { g_order = order; }

const ThreadState& Current() {
  Run& r = Running();
  return r.fibers[r.current].state;
}

cudaError_t TakeLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
const std::string& LastError() { return g_message; }
int64_t Launches() { return g_launches; }

int Lane() {
  Run& r = Running();
  return r.current % kWarp;
}

void BlockBarrier(const char* what) {
  Run& r = Running();
  r.fibers[r.current].wait = Wait::kBlock;
  r.fibers[r.current].at = what;
  Yield();
}

void WarpBarrier(const char* what) {
  Run& r = Running();
  r.fibers[r.current].wait = Wait::kWarp;
  r.fibers[r.current].at = what;
  Yield();
}

void Unsupported(const char* what) {
  Run& r = Running();
  Fail(r, std::string("thread ") + std::to_string(r.current) + ": " + what +
              " (not modelled by cuda_host)");
  Yield(/*last=*/true);
  std::abort();  // never resumed
}

void Invalid(const char* what) {
  Run& r = Running();
  Fail(r, std::string("thread ") + std::to_string(r.current) + ": " + what);
  Yield(/*last=*/true);
  std::abort();  // never resumed
}

void WarpExchange(const void* mine, std::size_t bytes, int src, void* out) {
  Run& r = Running();
  if (bytes > kSlotBytes) Unsupported("a shuffle of more than 16 bytes");
  const int me = r.current, base = me - me % kWarp;
  std::memcpy(r.slots[me].data(), mine, bytes);
  WarpBarrier("a warp shuffle");
  const int from = base + src;
  if (src < 0 || src >= kWarp || from >= static_cast<int>(r.fibers.size())) {
    Fail(r, "thread " + std::to_string(me) + ": a shuffle from lane " + std::to_string(src) +
                ", which its warp does not have");
    Yield(/*last=*/true);
  }
  std::memcpy(out, r.slots[from].data(), bytes);
  WarpBarrier("a warp shuffle");  // every lane has read before the slots are written again
}

void SetSubmitter(Submitter submit) { g_submit = submit; }

void Launch(const Config& c, std::function<void()> body) {
  ++g_launches;
  const uint64_t threads = static_cast<uint64_t>(c.block.x) * c.block.y * c.block.z;
  if (threads == 0 || threads > 1024 || c.block.z > 64 || c.grid.x == 0 || c.grid.y == 0 ||
      c.grid.z == 0 || c.grid.y > 65535 || c.grid.z > 65535 || c.grid.x > 2147483647u) {
    SetLast(cudaErrorInvalidConfiguration,
            "launch of grid " + Coordinates(uint3{c.grid.x, c.grid.y, c.grid.z}) + ", block " +
                Coordinates(uint3{c.block.x, c.block.y, c.block.z}));
    return;
  }
  if (c.shared != 0) {
    SetLast(cudaErrorInvalidValue, "dynamic shared memory is not modelled by cuda_host");
    return;
  }
  const Submitter submit = g_submit;
  if (submit == nullptr) {
    RunLaunch(c, body);
  } else {
    submit(c.stream, [c, body = std::move(body)] { RunLaunch(c, body); });
  }
}

}  // namespace cuda_host
