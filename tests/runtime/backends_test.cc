// The choice between NCCL and the host's collectives for ranks as processes on GPUs.
#include "tpc/runtime/backends.h"

#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace tpc::runtime {
namespace {

TEST_CASE("SharedGpu names the first two ranks on one GPU of one machine", "[runtime][cuda]") {
  // Each rank its own GPU: on one machine, or the same bus id on two machines (a launcher
  // that shows each process one GPU numbers them all 0; the bus ids still differ).
  CHECK_FALSE(SharedGpu({"a 0000:07:00.0", "a 0000:08:00.0", "a 0000:09:00.0"}).has_value());
  CHECK_FALSE(SharedGpu({"a 0000:07:00.0", "b 0000:07:00.0"}).has_value());
  CHECK_FALSE(SharedGpu({"a 0000:07:00.0"}).has_value());
  // Four ranks on two GPUs (LOCAL_RANK % GPUs): ranks 0 and 2 share the first.
  const auto shared =
      SharedGpu({"a 0000:07:00.0", "a 0000:08:00.0", "a 0000:07:00.0", "a 0000:08:00.0"});
  REQUIRE(shared.has_value());
  CHECK(shared->first == 0);
  CHECK(shared->second == 2);
}

TEST_CASE("GpuBusId fails for a GPU that is not there", "[runtime][cuda]") {
  // No GPU here (or none at this index anywhere): an error, never an empty id that two
  // ranks would then share.
  CHECK_FALSE(GpuBusId(GpuCount() + 7).ok());
}

}  // namespace
}  // namespace tpc::runtime
