// What the cuda_host tests share: a launch checked with the emulator's reason on failure,
// and a launch run in both thread orders.
#pragma once

#include <catch2/catch.hpp>

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
// increasing, then in decreasing order; requires the same result from both.
template <typename F>
auto InBothOrders(F launch) {
  SetOrder(Order::kForward);
  const auto forward = launch();
  SetOrder(Order::kReverse);
  const auto reverse = launch();
  SetOrder(Order::kForward);
  REQUIRE(forward == reverse);
  return forward;
}

}  // namespace cuda_host
