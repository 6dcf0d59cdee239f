// What the cuda_host tests share: a launch checked with the emulator's reason on failure,
// and a launch run in both thread orders.
#pragma once

#include <catch2/catch.hpp>

#include <exception>
#include <thread>

#include "cuda_host.h"

// Requires `launch` (an expression giving a cudaError_t) to be cudaSuccess, saying why not.
#define REQUIRE_LAUNCH(launch)                     \
  do {                                             \
    const cudaError_t tpc_launch_error = (launch); \
    INFO(::cuda_host::LastError());                \
    REQUIRE(tpc_launch_error == cudaSuccess);      \
  } while (false)

namespace cuda_host {

// Runs `launch` (which fills and returns its output) with the threads resumed in
// increasing, then in decreasing order; requires the same result from both. Each run is on
// a new host thread, so that nothing per host thread (`__shared__` memory among it, which
// also starts as NaN bytes in each block) carries over from the other run.
template <typename F>
auto InBothOrders(F launch) {
  auto in_thread = [&](Order order) {
    decltype(launch()) out;
    std::exception_ptr failed;
    std::thread t([&] {
      SetOrder(order);
      try {
        out = launch();
      } catch (...) {
        failed = std::current_exception();
      }
      SetOrder(Order::kForward);
    });
    t.join();
    if (failed) std::rethrow_exception(failed);
    return out;
  };
  const auto forward = in_thread(Order::kForward);
  const auto reverse = in_thread(Order::kReverse);
  REQUIRE(forward == reverse);
  return forward;
}

}  // namespace cuda_host
