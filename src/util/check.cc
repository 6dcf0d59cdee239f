#include <cstdio>
#include <cstdlib>

#include "tpc/util/status_macros.h"

namespace tpc::internal {

void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "tpc internal error: %s:%d: check failed: %s\n", file, line, cond);
  std::abort();
}

}  // namespace tpc::internal
