// The launches of cuda_host.h: a block's threads as fibers of the launching
// thread, resumed in the chosen order until each reaches its next synchronization point;
// then the barriers that everyone they wait for has reached are released.
#include "cuda_host.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if !defined(__x86_64__)
#error "cuda_host switches its fibers with x86-64 code (tests/CMakeLists.txt builds it there only)"
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_host {
namespace {

enum class Wait { kNone, kWarp, kBlock, kDone };

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr int kWarp = 32;
constexpr std::size_t kSlotBytes = 16;

// ---- The context switch (x86-64 System V): the callee-saved registers, the SSE and x87
// control words and the stack pointer; no system call (swapcontext saves the signal mask
// with one each time, which was most of a model run's time). ----
extern "C" void cuda_host_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl cuda_host_switch
  .type cuda_host_switch, @function
cuda_host_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_host_switch, .-cuda_host_switch
)");

void Switch(void** save, void* load) { cuda_host_switch(save, load); }

void FiberMain();

// A fresh stack [base, base + bytes) whose first switch enters FiberMain as if called: the
// saved words cuda_host_switch pops (control words, six registers), then FiberMain's
// address where `ret` finds it, 16-byte aligned so that FiberMain starts with the stack
// a call would give it.
void* StartStack(char* base, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  // The frames a previous fiber left here are dead: their redzones would be false reports.
  __asan_unpoison_memory_region(base, bytes);
#endif
  uintptr_t top = (reinterpret_cast<uintptr_t>(base) + bytes) & ~uintptr_t{15};
  uint64_t* sp = reinterpret_cast<uint64_t*>(top) - 2;  // FiberMain's return slot above
  sp[1] = 0;
  sp[0] = reinterpret_cast<uint64_t>(&FiberMain);  // at a multiple of 16
  sp -= 7;
  for (int i = 1; i < 7; ++i) sp[i] = 0;  // r15, r14, r13, r12, rbx, rbp
  uint32_t csr;
  uint16_t cw;
  asm volatile("stmxcsr %0" : "=m"(csr));
  asm volatile("fnstcw %0" : "=m"(cw));
  sp[0] = csr | (uint64_t{cw} << 32);
  return sp;
}

struct Fiber {
  void* sp = nullptr;  // its stack pointer while it is switched out
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
  void* scheduler = nullptr;  // the launching thread's stack pointer while a fiber runs
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
std::atomic<ErrorSource> g_error_source{nullptr};

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
  Switch(&f.sp, r.scheduler);
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
    case Wait::kWarp:
      return f.at;
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
      Switch(&r.scheduler, r.fibers[i].sp);
      FinishSwitch(fake, nullptr, nullptr);
      r.current = -1;
      if (!r.error.empty()) return false;
      ran = true;
    }
    if (ran) continue;
    int at = w0;
    while (at < w1 && r.fibers[at].wait != Wait::kWarp) ++at;
    if (at == w1) return true;  // at __syncthreads or done
    // Every lane at the same warp barrier (a shuffle does not pair with a __syncwarp).
    for (int i = w0; i < w1; ++i) {
      if (r.fibers[i].wait != Wait::kWarp || std::strcmp(r.fibers[i].at, r.fibers[at].at) != 0) {
        Fail(r, std::string("block ") + Coordinates(block) + ", warp " +
                    std::to_string(w0 / kWarp) + ": lane " + std::to_string(at - w0) +
                    " waits at " + r.fibers[at].at + " while lane " + std::to_string(i - w0) +
                    (r.fibers[i].wait == Wait::kWarp ? " waits at " : " ") + WaitName(r.fibers[i]));
        return false;
      }
    }
    for (int i = w0; i < w1; ++i) r.fibers[i].wait = Wait::kNone;
  }
}

// The block running on this host thread: a number no earlier block here had (0: none).
thread_local uint64_t g_block_serial = 0;
thread_local uint64_t g_blocks_run = 0;

// Runs one block to its end; false when the launch failed.
bool RunBlock(Run& r, const Config& c, const uint3& block) {
  g_block_serial = ++g_blocks_run;
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
    f.sp = StartStack(f.stack, kStackBytes);
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

// "block (x,y,z), thread t: " of the running fiber.
std::string Where(const Run& r) {
  return "block " + Coordinates(r.fibers[r.current].state.block_idx) + ", thread " +
         std::to_string(r.current) + ": ";
}

void SetLast(cudaError_t e, std::string message) {
  g_last = e;
  g_message = std::move(message);
}

size_t StackSpacing() {
  static const size_t spacing = kStackBytes + static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return spacing;
}

// The fiber stacks of this host thread's launches, kept for the next launch: `threads`
// stacks of kStackBytes, each above a guard page (an overflow faults instead of
// corrupting its neighbour).
class StackPool {
 public:
  ~StackPool() {
    if (base_ != nullptr) munmap(base_, threads_ * StackSpacing());
  }
  char* For(uint64_t threads) {
    if (threads > threads_) {
      if (base_ != nullptr) munmap(base_, threads_ * StackSpacing());
      const size_t each = StackSpacing(), page = each - kStackBytes;
      void* m = mmap(nullptr, each * threads, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) {
        std::fprintf(stderr, "cuda_host: no memory for %llu fiber stacks\n",
                     static_cast<unsigned long long>(threads));
        std::abort();
      }
      base_ = static_cast<char*>(m);
      threads_ = threads;
      for (uint64_t i = 0; i < threads; ++i) mprotect(base_ + i * each, page, PROT_NONE);
    }
    return base_ + (StackSpacing() - kStackBytes);
  }

 private:
  char* base_ = nullptr;
  uint64_t threads_ = 0;
};

char* StacksFor(uint64_t threads) {
  thread_local StackPool pool;
  return pool.For(threads);
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
  char* const stacks = StacksFor(threads);
  for (uint64_t i = 0; i < threads; ++i) r.fibers[i].stack = stacks + i * StackSpacing();
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
  if (!ok) SetLast(cudaErrorLaunchFailure, r.error);
}

}  // namespace

void SetOrder(Order order) { g_order = order; }

void PoisonShared(void* p, std::size_t bytes, std::uint64_t* seen) {
  if (*seen == g_block_serial) return;
  std::memset(p, 0xff, bytes);
  *seen = g_block_serial;
}

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
int TakeLastErrorCode() { return static_cast<int>(TakeLastError()); }
void SetErrorSource(ErrorSource source) { g_error_source = source; }
int LastErrorForKernels() {
  const ErrorSource source = g_error_source;
  return source != nullptr ? source() : TakeLastErrorCode();
}
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
  Fail(r, Where(r) + what + " (not modelled by cuda_host)");
  Yield(/*last=*/true);
  std::abort();  // never resumed
}

void Invalid(const char* what) {
  Run& r = Running();
  Fail(r, Where(r) + what);
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
    Fail(r, Where(r) + "a shuffle from lane " + std::to_string(src) +
                ", which its warp does not have");
    Yield(/*last=*/true);
  }
  std::memcpy(out, r.slots[from].data(), bytes);
  WarpBarrier("a warp shuffle");  // every lane has read before the slots are written again
}

void SetSubmitter(Submitter submit) { g_submit = submit; }

void Launch(const Config& c, std::function<void()> body) {
  ++g_launches;
  g_message.clear();  // a message names the last failure, never an earlier one
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
