// The kernels' thread pool: every index once per loop, across many short loops handed
// over while workers still spin from the last one and long ones after they sleep; loops
// started inside a loop run inline instead of waiting for the pool they occupy.
#include "tpc/runtime/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace tpc::runtime {
namespace {

TEST_CASE("ParallelFor covers every index once, loop after loop", "[runtime][pool]") {
  const int threads = GENERATE(1, 2, 3, 5);
  ThreadPool pool(threads);
  std::vector<std::atomic<int>> hits(1000);
  for (int loop = 0; loop < 2000; ++loop) {
    const int64_t n = 1 + (loop * 37) % 1000;
    for (int64_t i = 0; i < n; ++i) hits[i] = 0;
    pool.ParallelFor(n, 1 + loop % 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += hits[i] != 1;
    INFO("loop " << loop << ", n " << n);
    REQUIRE(wrong == 0);
    if (loop % 500 == 0) {
      // Past the spin: the workers are asleep for the next loop.
      std::this_thread::sleep_for(std::chrono::microseconds(3 * ThreadPool::kSpinMicros));
    }
  }
}

TEST_CASE("ParallelParts runs each part once, on several threads", "[runtime][pool]") {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(7);
  std::vector<std::thread::id> ran(7);
  pool.ParallelParts(7, [&](int64_t p) {
    hits[p].fetch_add(1);
    ran[p] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // so that no thread takes all
  });
  for (auto& h : hits) CHECK(h == 1);
  int distinct = 0;
  for (size_t i = 0; i < ran.size(); ++i) {
    bool first = true;
    for (size_t j = 0; j < i; ++j) first = first && ran[j] != ran[i];
    distinct += first;
  }
  CHECK(distinct >= 2);
}

TEST_CASE("A loop inside a loop runs inline instead of deadlocking", "[runtime][pool]") {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(100, 1, [&](int64_t ib, int64_t ie) {
        for (int64_t j = ib; j < ie; ++j) sum.fetch_add(i * 100 + j);
      });
    }
  });
  CHECK(sum == 6400 * 6399 / 2);
}

TEST_CASE("Two pools run loops at once from different threads", "[runtime][pool]") {
  // Ranks as threads: each rank's backend has its own pool.
  ThreadPool a(2), b(2);
  std::atomic<int64_t> total{0};
  auto drive = [&](ThreadPool& pool) {
    for (int loop = 0; loop < 500; ++loop) {
      pool.ParallelFor(100, 1, [&](int64_t lo, int64_t hi) { total.fetch_add(hi - lo); });
    }
  };
  std::thread ta([&] { drive(a); }), tb([&] { drive(b); });
  ta.join();
  tb.join();
  CHECK(total == 2 * 500 * 100);
}

}  // namespace
}  // namespace tpc::runtime
