// The CUDA backend's own behaviour (the kernels' results are the node tests', through
// the CUDA backend): on a GPU only; without one the tests say so and pass.
#include <string>

#include "catch2/catch.hpp"
#include "one_op.h"
#include "tpc/runtime/backends.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::I64;
using testing::OneOp;

std::unique_ptr<Backend> CudaOrSkip() {
  if (!CudaBuiltIn()) {
    WARN("skipped: this build has no CUDA backend");
    return nullptr;
  }
  if (GpuCount() == 0) {
    WARN("skipped: no GPU here (tools/gpu_check.sh runs this on a GPU machine)");
    return nullptr;
  }
  auto b = MakeBackend({.name = "cuda", .threads = 1});
  REQUIRE(b.ok());
  return std::move(*b);
}

TEST_CASE("A Gather index out of range fails the run on the GPU, naming the node",
          "[runtime][cuda]") {
  auto cuda = CudaOrSkip();
  if (!cuda) return;
  {
    OneOp o;
    o.Input("x", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
    o.Input("i", I64({2}, {2, -3}));
    auto out = o.TryRun("Gather", {}, 1, "", cuda.get());
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    CHECK(testing::Floats((*out)[0]) == std::vector<float>{5, 6, 1, 2});
  }
  for (int64_t bad : {3, -4}) {
    OneOp o;
    o.Input("x", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
    o.Input("i", I64({2}, {0, bad}));
    auto out = o.TryRun("Gather", {}, 1, "", cuda.get());
    REQUIRE(!out.ok());
    CHECK_THAT(std::string(out.status().message()),
               Catch::Contains("the_op") && Catch::Contains("out of range"));
  }
  // The failure does not stick: the next run is fine.
  OneOp o;
  o.Input("x", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
  o.Input("i", I64({1}, {1}));
  auto out = o.TryRun("Gather", {}, 1, "", cuda.get());
  INFO(out.status().ToString());
  REQUIRE(out.ok());
}

}  // namespace
}  // namespace tpc::runtime
