// Whether OpenBLAS's GEMM kernels fit this CPU. A DYNAMIC_ARCH OpenBLAS (Debian's) picks
// its kernels from the CPU's identity at load time; a CPU model it does not know (a
// virtual machine's generic "Intel Xeon Processor", the lent H100's host) gets its SSE3
// ("Prescott") kernels even on an AVX-512 core, and every GEMM the CPU backend sends to
// BLAS (those not by a constant weight, which take oneDNN) runs slower. Only the
// environment variable OPENBLAS_CORETYPE, read when the library loads, changes the
// choice, so tp-run says which to set.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tpc::runtime {

// The OPENBLAS_CORETYPE value whose kernels this CPU runs best when OpenBLAS took
// `core` (openblas_get_corename(), case-insensitive) on a CPU with these features:
// "SkylakeX" (AVX-512 F/BW/DQ/VL), "Haswell" (AVX2 and FMA); nullopt when `core`
// already uses AVX2 or AVX-512 kernels, or the CPU has neither.
std::optional<std::string> BetterBlasCore(std::string_view core, bool avx512, bool avx2);

// This process's advice, one sentence naming the core OpenBLAS took and the setting that
// would serve better; nullopt when OPENBLAS_CORETYPE is set (the user chose), or the core
// fits (BetterBlasCore).
std::optional<std::string> BlasCoreAdvice();

}  // namespace tpc::runtime
