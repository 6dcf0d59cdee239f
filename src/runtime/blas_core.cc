#include "tpc/runtime/blas_core.h"

#include <cblas.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tpc::runtime {

std::optional<std::string> BetterBlasCore(std::string_view core, bool avx512, bool avx2) {
  const std::string name = absl::AsciiStrToLower(std::string(core));
  // The x86-64 cores whose GEMM kernels are AVX2 or AVX-512 (Zen takes Haswell's).
  for (const char* fits : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}) {
    if (name == fits) return std::nullopt;
  }
  if (avx512) return "SkylakeX";
  if (avx2) return "Haswell";
  return std::nullopt;
}

std::optional<std::string> BlasCoreAdvice() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return std::nullopt;
  const char* core = openblas_get_corename();
  if (core == nullptr) return std::nullopt;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx512 = false, avx2 = false;
#endif
  const std::optional<std::string> better = BetterBlasCore(core, avx512, avx2);
  if (!better) return std::nullopt;
  return absl::StrCat("OpenBLAS does not recognise this CPU and took its '", core,
                      "' kernels, though the CPU has ", avx512 ? "AVX-512" : "AVX2",
                      ": set OPENBLAS_CORETYPE=", *better, " for faster CPU GEMMs");
}

}  // namespace tpc::runtime
