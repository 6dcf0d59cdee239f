// One MatMulNBits decode step on one thread, its two CPU paths side by side: the exact f32
// one (EvenOddPairs + Int4ColumnsDot: accuracy_level 0) and accuracy_level 4's (A rounded
// to int8 per block, QuantizeInt8Activations + Int8PanelsDot on the weight rearranged
// once by PackCodePanels, whose time is reported too: AVX-512 VNNI). Random int4
// codes in blocks of --block, K × N, no zero points (the builder's int4) or packed ones
// (--zero-points), --rows rows of A. Every round times each path once, K calls each, in
// an order that alternates; reported: the median and the minimum over --rounds of the time
// per call, and the bytes of codes and scales read per second at the median. A weight
// larger than the last-level cache (--n 65536) measures memory, a small one (--n 512) the
// loop.
//
// --copies=W cycles through W different weights (a decode step's layers, read from memory
// when they exceed the caches); --huge puts them on 2 MiB pages, as MatMulNBits' copies and
// panels are (cpu/huge_pages.h).
//
//   build/bench/bench_nbits [--k=1024] [--n=3072] [--rows=1] [--block=32] [--rounds=9]
//                           [--calls=200] [--copies=1] [--huge] [--zero-points]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "runtime/cpu/int8_blocks.h"
#include "runtime/cpu/isa_loops.h"
#include "runtime/cpu/line_aligned.h"

namespace {

namespace cpu = tpc::runtime::cpu;
using Clock = std::chrono::steady_clock;

int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoll(argv[i] + prefix.size());
    }
  }
  return fallback;
}

bool Has(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == std::string("--") + name) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t k = Flag(argc, argv, "k", 1024), n = Flag(argc, argv, "n", 3072);
  const int64_t rows = Flag(argc, argv, "rows", 1), block = Flag(argc, argv, "block", 32);
  const int64_t rounds = Flag(argc, argv, "rounds", 9), calls = Flag(argc, argv, "calls", 200);
  const bool zero_points = Has(argc, argv, "zero-points");
  // Distinct weights called in turn (a decode step's layers: each comes from memory).
  const int64_t copies = Flag(argc, argv, "copies", 1);
  if (k % block != 0 || block % 32 != 0 || rows < 1 || rows > 64 || copies < 1 || rounds < 1 ||
      calls < 1) {
    std::fprintf(stderr,
                 "bench_nbits: K a multiple of --block (a multiple of 32), --rows 1 to 64, "
                 "--copies, --rounds and --calls at least 1\n");
    return 2;
  }
  if (!cpu::HasInt8Dot()) {
    std::printf(
        "bench_nbits: this CPU has no AVX-512 VNNI: only the f32 path would run; skipped\n");
    return 0;
  }
  const int64_t blocks = k / block, half = block / 2, packed_stride = (blocks + 1) / 2;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const bool huge = Has(argc, argv, "huge");
  auto alloc = [&](size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 2 << 20, (bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20)) != 0)
      std::abort();
    if (huge) madvise(p, (bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20), MADV_HUGEPAGE);
    return p;
  };
  struct Buf {
    uint8_t* p;
    size_t n;
    uint8_t* data() { return p; }
    const uint8_t* data() const { return p; }
    size_t size() const { return n; }
    uint8_t* begin() { return p; }
    uint8_t* end() { return p + n; }
  };
  struct FBuf {
    float* p;
    size_t n;
    float* data() { return p; }
    size_t size() const { return n; }
    float* begin() { return p; }
    float* end() { return p + n; }
  };
  std::vector<Buf> all_codes;
  std::vector<FBuf> all_scales;
  for (int64_t c = 0; c < copies; ++c) {
    Buf codes{static_cast<uint8_t*>(alloc(static_cast<size_t>(n * k / 2))),
              static_cast<size_t>(n * k / 2)};
    for (auto& b : codes) b = static_cast<uint8_t>(rng());
    FBuf scales{static_cast<float*>(alloc(static_cast<size_t>(n * blocks) * 4)),
                static_cast<size_t>(n * blocks)};
    for (auto& s : scales) s = uniform(rng) * 0.02f;
    all_codes.push_back(codes);
    all_scales.push_back(scales);
  }
  std::vector<uint8_t> packed(static_cast<size_t>(n * packed_stride));
  for (auto& b : packed) b = static_cast<uint8_t>(rng());
  const uint8_t* zp = zero_points ? packed.data() : nullptr;
  cpu::CodePanels layout{n, k, 4, block, zero_points};
  std::vector<uint8_t*> all_panels;
  std::vector<double> pack_times;
  for (int64_t c = 0; c < copies; ++c) {
    auto* panels = static_cast<uint8_t*>(alloc(static_cast<size_t>(layout.bytes())));
    std::memset(panels, 0, static_cast<size_t>(layout.bytes()));  // pages faulted in
    const auto t = Clock::now();
    cpu::PackCodePanels(all_codes[static_cast<size_t>(c)].data(),
                        all_scales[static_cast<size_t>(c)].data(), zp, packed_stride, layout, 0,
                        layout.panels(), panels);
    pack_times.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    all_panels.push_back(panels);
  }
  int64_t turn = 0;
  Buf codes = all_codes[0];
  FBuf scales = all_scales[0];
  std::vector<float> a(static_cast<size_t>(rows * k));
  for (auto& v : a) v = uniform(rng);
  cpu::AlignedVector<float> pairs(static_cast<size_t>(rows * k));
  std::vector<float> exact(static_cast<size_t>(rows * n));

  auto f32_call = [&] {
    codes = all_codes[static_cast<size_t>(turn % copies)];
    scales = all_scales[static_cast<size_t>(turn++ % copies)];
    cpu::EvenOddPairs(a.data(), rows, k, block, pairs.data());
    cpu::Int4ColumnsDot(codes.data(), scales.data(), nullptr, zp, packed_stride, n, blocks, half,
                        pairs.data(), k, rows, exact.data(), n);
  };
  std::vector<float> int8(exact.size());
  cpu::Int8Activations qa;
  auto int8_call = [&] {
    const uint8_t* panels = all_panels[static_cast<size_t>(turn++ % copies)];
    qa.Resize(rows, k, block);
    cpu::QuantizeInt8Activations(a.data(), 0, rows, &qa);
    cpu::Int8PanelsDot(panels, layout, 0, layout.panels(), qa, int8.data(), n);
  };
  // Per call, in seconds, over `calls` calls after one untimed.
  auto time = [&](auto&& call) {
    call();
    const auto t = Clock::now();
    for (int64_t i = 0; i < calls; ++i) call();
    return std::chrono::duration<double>(Clock::now() - t).count() / static_cast<double>(calls);
  };
  std::vector<double> f32_times, int8_times;
  for (int64_t r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      f32_times.push_back(time(f32_call));
      int8_times.push_back(time(int8_call));
    } else {
      int8_times.push_back(time(int8_call));
      f32_times.push_back(time(f32_call));
    }
  }
  // The two paths differ by the rounding of A only: a sanity check, not a test (both on
  // the first weight).
  turn = 0;
  f32_call();
  turn = 0;
  int8_call();
  double err = 0, size = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(exact[i] - int8[i])));
    size = std::max(size, static_cast<double>(std::abs(exact[i])));
  }
  const double bytes = static_cast<double>(codes.size() + scales.size() * sizeof(float));
  std::printf(
      "MatMulNBits K %lld N %lld, %lld row(s), blocks of %lld, %s zero points, %.1f MiB "
      "of codes and scales; 1 thread, %lld rounds of %lld calls\n",
      static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(rows),
      static_cast<long long>(block), zero_points ? "packed" : "no", bytes / 1048576.0,
      static_cast<long long>(rounds), static_cast<long long>(calls));
  auto report = [&](const char* name, std::vector<double> t) {
    std::sort(t.begin(), t.end());
    const double median = t[t.size() / 2];
    std::printf("  %-34s median %8.4f ms  min %8.4f ms  %6.1f GB/s\n", name, median * 1e3,
                t.front() * 1e3, bytes / median / 1e9);
    return median;
  };
  const double f32 = report("f32 (accuracy_level 0)", f32_times);
  const double i8 = report("int8 activations (accuracy_level 4)", int8_times);
  std::printf("  int8 / f32 time: %.2f; max |f32 - int8| %.3g of max |y| %.3g\n", i8 / f32, err,
              size);
  std::sort(pack_times.begin(), pack_times.end());
  std::printf("  rearranging a weight into panels (once per constant): median %.3f ms, %.2f GB/s\n",
              pack_times[pack_times.size() / 2] * 1e3,
              bytes / pack_times[pack_times.size() / 2] / 1e9);
  return 0;
}
