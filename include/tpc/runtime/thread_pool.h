// A small pool of worker threads for data-parallel loops (elementwise, softmax, norms).
#pragma once

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

 private:
  void WorkerLoop();
  void RunChunks(std::unique_lock<std::mutex>& lock);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::mutex job_mu_;  // one ParallelFor at a time
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0, chunks_left_ = 0;
  int64_t generation_ = 0;
  bool stop_ = false;
};

// Threads to use by default: TPC_NUM_THREADS when set, else the hardware's count.
int DefaultThreadCount();

}  // namespace tpc::runtime
