#include "tpc/runtime/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace tpc::runtime {

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

void ThreadPool::RunChunks(std::unique_lock<std::mutex>& lock) {
  while (next_ < n_) {
    int64_t begin = next_;
    int64_t end = std::min(n_, begin + chunk_);
    next_ = end;
    const auto* fn = fn_;
    lock.unlock();
    (*fn)(begin, end);
    lock.lock();
    if (--chunks_left_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::WorkerLoop() {
  int64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    RunChunks(lock);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  if (workers_.empty() || n < 2 * min_chunk) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> job(job_mu_);
  const int64_t parts = std::min<int64_t>(size() * 4, n / min_chunk);
  std::unique_lock<std::mutex> lock(mu_);
  fn_ = &fn;
  n_ = n;
  chunk_ = (n + parts - 1) / parts;
  next_ = 0;
  chunks_left_ = (n + chunk_ - 1) / chunk_;
  ++generation_;
  work_cv_.notify_all();
  RunChunks(lock);
  done_cv_.wait(lock, [&] { return chunks_left_ == 0; });
  fn_ = nullptr;
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("TPC_NUM_THREADS")) {
    int v = std::atoi(env);
    if (v > 0) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace tpc::runtime
