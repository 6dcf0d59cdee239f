#include "tpc/runtime/blas_core.h"

#include <cstdlib>

#include "catch2/catch.hpp"
#include "test_util.h"

namespace tpc::runtime {
namespace {

TEST_CASE("OpenBLAS's fallback kernels on an AVX-512 or AVX2 CPU get advice", "[runtime][blas]") {
  // The lent H100's host: an AVX-512 CPU OpenBLAS did not recognise.
  CHECK(BetterBlasCore("Prescott", true, true) == "SkylakeX");
  CHECK(BetterBlasCore("Nehalem", false, true) == "Haswell");
  CHECK(BetterBlasCore("Sandybridge", true, true) == "SkylakeX");  // AVX without AVX2
  CHECK(BetterBlasCore("Unknown", false, true) == "Haswell");
  // Kernels that use the vector units already: no advice, whatever the case.
  for (const char* fits : {"Haswell", "Zen", "SkylakeX", "COOPERLAKE", "sapphirerapids"}) {
    INFO(fits);
    CHECK_FALSE(BetterBlasCore(fits, true, true).has_value());
  }
  // A CPU without AVX2 has nothing better to take.
  CHECK_FALSE(BetterBlasCore("Prescott", false, false).has_value());
}

// tp-run says nothing when OPENBLAS_CORETYPE is set: the user chose the kernels (here
// the SSE3 ones on a CPU that has AVX2 or better, which the advice would otherwise name).
TEST_CASE("tp-run gives no BLAS advice when OPENBLAS_CORETYPE is set", "[tools][blas]") {
  const std::string plan = tpc::testing::TempDir("blas_note") + "/plan";
  REQUIRE(tpc::testing::RunTpCompile(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + plan +
                                     " --quiet")
              .exit_code == 0);
  const tpc::testing::CommandResult r = [&] {
    const tpc::testing::ScopedEnv core("OPENBLAS_CORETYPE", "Prescott");
    return tpc::testing::RunTpRun(plan);
  }();
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("OPENBLAS_CORETYPE=") == std::string::npos);
}

}  // namespace
}  // namespace tpc::runtime
