// libFuzzer entry point; the harness is tpc::fuzz::FuzzPlanLoader (targets.h).
#include <cstddef>
#include <cstdint>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tpc::fuzz::FuzzPlanLoader(data, size);
}
