// libFuzzer entry point; the harness is tpc::fuzz::FuzzExternalData (targets.h).
#include <cstddef>
#include <cstdint>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tpc::fuzz::FuzzExternalData(data, size);
}
