#include "tpc/runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tpc::runtime {
namespace {

// The pool whose loop this thread is running a range of (nested loops run inline).
thread_local const ThreadPool* tls_running = nullptr;

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls `ready` for up to ThreadPool::kSpinMicros; true when it became true.
template <typename F>
bool SpinUntil(F ready) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      Pause();
    }
    if (std::chrono::steady_clock::now() > deadline) return ready();
  }
}

}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 0, chunks = 0;
  std::atomic<int64_t> next{0}, done{0};
};

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Work(Job& job) {
  const ThreadPool* outer = tls_running;
  tls_running = this;
  for (int64_t c = job.next.fetch_add(1); c < job.chunks; c = job.next.fetch_add(1)) {
    const int64_t begin = c * job.chunk;
    (*job.fn)(begin, std::min(job.n, begin + job.chunk));
    if (job.done.fetch_add(1) + 1 == job.chunks) {
      // The caller may be asleep on done_cv_: notify under the lock it checks under.
      { std::lock_guard<std::mutex> lock(mu_); }
      done_cv_.notify_all();
    }
  }
  tls_running = outer;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    auto ready = [&] { return generation_.load() != seen || stop_.load(); };
    if (!SpinUntil(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, ready);
    }
    if (stop_) return;
    seen = generation_.load();
    // Dekker-style with Run's end: either this worker sees the job cleared, or the caller
    // sees it active and waits for it to leave (both sequentially consistent).
    active_.fetch_add(1);
    if (Job* job = job_.load()) Work(*job);
    active_.fetch_sub(1);
  }
}

void ThreadPool::Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  std::lock_guard<std::mutex> one(job_mu_);
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = chunk;
  job.chunks = (n + chunk - 1) / chunk;
  job_.store(&job);
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker going to sleep sees the generation
    generation_.fetch_add(1);
  }
  work_cv_.notify_all();
  Work(job);
  auto done = [&] { return job.done.load() == job.chunks; };
  if (!SpinUntil(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
  job_.store(nullptr);
  while (active_.load() != 0) std::this_thread::yield();  // stragglers leaving `job`
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  if (workers_.empty() || n < 2 * min_chunk || tls_running == this) {
    fn(0, n);
    return;
  }
  const int64_t parts = std::min<int64_t>(size() * 4, n / min_chunk);
  Run(n, (n + parts - 1) / parts, fn);
}

void ThreadPool::ParallelParts(int64_t parts, const std::function<void(int64_t)>& fn) {
  if (parts <= 0) return;
  const std::function<void(int64_t, int64_t)> each = [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) fn(p);
  };
  if (workers_.empty() || parts == 1 || tls_running == this) {
    each(0, parts);
    return;
  }
  Run(parts, 1, each);
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("TPC_NUM_THREADS")) {
    int v = std::atoi(env);
    if (v > 0) return std::min(v, kMaxThreads);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace tpc::runtime
