// tp-run --cpus: the list's syntax, each local rank's share, and pinning the calling
// thread (checked with sched_getaffinity).
#include "tpc/runtime/cpus.h"

#include <sched.h>

#include <thread>

#include "catch2/catch.hpp"

namespace tpc::runtime {
namespace {

TEST_CASE("CPU lists and ranges parse, bad ones fail naming the item", "[runtime][cpus]") {
  auto v = ParseCpuList("0-3,8,10-11");
  REQUIRE(v.ok());
  CHECK(*v == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  for (const char* bad : {"", "a", "3-1", "1,1", "2,1", "-1", "0-", "5-x"}) {
    INFO(bad);
    auto r = ParseCpuList(bad);
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find("--cpus") != std::string::npos);
  }
}

TEST_CASE("CPU shares are contiguous and cover the list", "[runtime][cpus]") {
  const std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6};
  std::vector<int> all;
  for (int r = 0; r < 3; ++r) {
    auto s = CpuShare(cpus, r, 3);
    REQUIRE(s.ok());
    CHECK(s->size() == (r == 0 ? 3u : 2u));
    all.insert(all.end(), s->begin(), s->end());
  }
  CHECK(all == cpus);
  CHECK(!CpuShare({0, 1}, 0, 3).ok());
  CHECK(!CpuShare(cpus, 3, 3).ok());
}

TEST_CASE("Pinning restricts the calling thread and the threads it starts", "[runtime][cpus]") {
  cpu_set_t before;
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &before)) first = c;
  REQUIRE(first >= 0);
  std::thread([&] {
    REQUIRE(PinToCpus({first}).ok());
    std::thread([&] {
      cpu_set_t now;
      REQUIRE(sched_getaffinity(0, sizeof(now), &now) == 0);
      CHECK(CPU_COUNT(&now) == 1);
      CHECK(CPU_ISSET(first, &now));
    }).join();
    // A CPU outside the allowed set is refused, naming it.
    int outside = -1;
    for (int c = CPU_SETSIZE - 1; c >= 0 && outside < 0; --c)
      if (!CPU_ISSET(c, &before)) outside = c;
    if (outside >= 0) {
      auto s = PinToCpus({outside});
      CHECK(!s.ok());
      CHECK(std::string(s.message()).find(std::to_string(outside)) != std::string::npos);
    }
  }).join();
}

}  // namespace
}  // namespace tpc::runtime
