// A small pool of worker threads for data-parallel loops (elementwise, softmax, norms,
// blocks of a GEMM).
//
// A loop is handed over without a lock: workers spin for a short while after each loop
// (kSpinMicros) before they sleep on a condition variable, so that the next kernel's loop
// starts without a wake-up (tens of microseconds on a VM, more than many kernels take).
// A loop started from inside another loop of the same pool runs inline on its thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tpc::runtime {

class ThreadPool {
 public:
  // `threads` in total, the calling thread included (1: everything runs inline).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n); ranges hold at least
  // `min_chunk` items, so small loops run inline on the caller. Returns when all are done.
  void ParallelFor(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);
  // Calls fn(part) for each part in [0, parts), one range each (blocks of a GEMM).
  void ParallelParts(int64_t parts, const std::function<void(int64_t)>& fn);

  // How long an idle worker polls for the next loop before it sleeps.
  static constexpr int64_t kSpinMicros = 200;

 private:
  struct Job;
  void WorkerLoop();
  void Work(Job& job);
  void Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);

  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards the sleeps, not the loops
  std::condition_variable work_cv_, done_cv_;
  std::mutex job_mu_;  // one loop at a time
  std::atomic<Job*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};  // workers that may be reading job_
  std::atomic<bool> stop_{false};
};

// Threads to use by default: TPC_NUM_THREADS when set, else the hardware's count.
int DefaultThreadCount();

// The most threads a process takes (--threads, TPC_NUM_THREADS): 100000 threads per rank
// exhausted the machine's thread limit for every process on it.
inline constexpr int kMaxThreads = 1024;

}  // namespace tpc::runtime
