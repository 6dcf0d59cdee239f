// MatMul and FusedMatMul of f16/bf16 operands on the CPU (HalfMatMul): a weight read a
// tile at a time as stored, other operands through f32 copies; every product the f32
// product of the operands' exact values, rounded once to the type.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "catch2/catch.hpp"
#include "one_op.h"
#include "runtime/cpu/isa_loops.h"
#include "tpc/runtime/backend.h"
#include "tpc/util/half.h"

namespace tpc::runtime {
namespace {

using ir::DType;

// Random values of `dtype` (f16/bf16) in [-1, 1), as the type stores them.
Tensor RandomHalf(DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor t = Tensor::Allocate(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float v = u(g);
    t.data<uint16_t>()[i] = dtype == DType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
  }
  return t;
}

float At(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kF32) return t.data<float>()[i];
  const uint16_t h = t.data<uint16_t>()[i];
  return t.dtype() == DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

TEST_CASE("HalfBlockToFloat gives every f16 and bf16 value exactly", "[runtime][cpu][half]") {
  // All 65536 values as 4096 rows of 16, and as 2 rows of 32767 (a partial vector each)
  // with strides past them.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> got(all.size());
  for (bool bf16 : {false, true}) {
    cpu::HalfBlockToFloat(all.data(), 16, 4096, 16, got.data(), 16, bf16);
    std::vector<float> tail(2 * 32768, -7.0f);
    cpu::HalfBlockToFloat(all.data() + 1, 32768, 2, 32767, tail.data(), 32768, bf16);
    for (size_t i = 1; i < all.size(); ++i) {
      if (i == 32768) continue;  // between the rows: not converted
      const size_t at = i - 1;   // row 0: values 1 .. 32767, row 1: 32769 .. 65535
      INFO((bf16 ? "bf16 " : "f16 ") << i);
      REQUIRE(std::memcmp(&tail[at], &got[i], sizeof(float)) == 0);
    }
    REQUIRE(tail[32767] == -7.0f);  // each row's last place: untouched
    REQUIRE(tail[65535] == -7.0f);
#if defined(__x86_64__)
    // With denormals-are-zero and flush-to-zero set (a host process's fast-math library
    // may), f16 subnormals still convert exactly: no f32 subnormal arithmetic.
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    std::vector<float> daz(all.size());
    cpu::HalfBlockToFloat(all.data(), 16, 4096, 16, daz.data(), 16, bf16);
    _mm_setcsr(csr);
    REQUIRE(std::memcmp(daz.data(), got.data(), got.size() * sizeof(float)) == 0);
#endif
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = bf16 ? BFloat16ToFloat(all[i]) : HalfToFloat(all[i]);
      INFO((bf16 ? "bf16 " : "f16 ") << i);
      REQUIRE(std::memcmp(&got[i], &want, sizeof want) == 0);  // NaN payloads too
    }
  }
}

TEST_CASE("FloatToHalfBlock gives FloatToHalf's and FloatToBFloat16's bits",
          "[runtime][cpu][half]") {
  // Every 997th bit pattern (both signs, every exponent, NaNs), and around each rounding
  // boundary: the half's and bf16's ties (low bits 0x1000, 0x8000 and their neighbours)
  // at every exponent, the subnormal, overflow and infinity thresholds.
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 997) bits.push_back(static_cast<uint32_t>(u));
  std::mt19937 g(7);
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t exp = 0; exp < 256; ++exp) {
      for (uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu, 0x2000u, 0x3000u, 0x7fffu,
                           0x8000u, 0x8001u, 0x18000u}) {
        const uint32_t high = static_cast<uint32_t>(g()) & 0x7fffffu & ~(low | (low - 1));
        bits.push_back(sign | (exp << 23) | high | low);
        bits.push_back(sign | (exp << 23) | low);
      }
    }
    for (uint32_t edge : {0x33000000u, 0x33000001u, 0x387fffffu, 0x38800000u, 0x477fefffu,
                          0x477ff000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u}) {
      bits.push_back(sign | edge);
    }
  }
  bits.push_back(0x12345678u);  // a last partial vector
  std::vector<float> src(bits.size());
  std::memcpy(src.data(), bits.data(), bits.size() * sizeof(float));
  for (bool bf16 : {false, true}) {
    std::vector<uint16_t> got(src.size());
    cpu::FloatToHalfBlock(src.data(), static_cast<int64_t>(src.size()), got.data(), bf16);
    size_t first_bad = src.size();
    for (size_t i = 0; i < src.size() && first_bad == src.size(); ++i) {
      if (got[i] != (bf16 ? FloatToBFloat16(src[i]) : FloatToHalf(src[i]))) first_bad = i;
    }
    INFO((bf16 ? "bf16 of 0x" : "f16 of 0x")
         << std::hex << (first_bad < bits.size() ? bits[first_bad] : 0u));
    REQUIRE(first_bad == src.size());
#if defined(__x86_64__)
    // Denormals-are-zero and flush-to-zero change nothing (f32 subnormals become 0 either way).
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    std::vector<uint16_t> daz(src.size());
    cpu::FloatToHalfBlock(src.data(), static_cast<int64_t>(src.size()), daz.data(), bf16);
    _mm_setcsr(csr);
    REQUIRE(daz == got);
#endif
  }
}

TEST_CASE("MatMul and FusedMatMul of f16/bf16 operands give the rounded f32 product",
          "[runtime][cpu][half]") {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    // A weight B [k, n] against 1 row, against [2, 3] rows (over several column tiles: k
    // 4096 gives tiles of 16), and a batched B (attention's shape: f32 copies).
    struct Case {
      std::vector<int64_t> a, b;
    };
    // And 80 rows (past the tiles' 64: B converted once).
    for (const Case& c : {Case{{1, 1, 96}, {96, 40}}, Case{{2, 3, 4096}, {4096, 37}},
                          Case{{2, 3, 8}, {2, 8, 5}}, Case{{2, 40, 96}, {96, 21}}}) {
      for (bool fused : {false, true}) {
        if (fused && c.b.size() != 2) continue;
        const Tensor a = RandomHalf(dtype, c.a, 1);
        const Tensor b = RandomHalf(dtype, c.b, 2);
        const int64_t k = c.a.back(), n = c.b.back();
        const Tensor bias = RandomHalf(dtype, {n}, 3);
        testing::OneOp o;
        o.Input("a", a);
        o.Input("b", b);
        if (fused) o.Input("bias", bias);
        auto backend = MakeCpuBackend(2);
        ir::Attributes attrs;
        if (fused) {
          attrs = {{"activation", std::string("Relu")}};
          o.output_type = ir::TensorType(dtype, {});
        }
        auto y =
            o.TryRun(fused ? "FusedMatMul" : "MatMul", attrs, 1, fused ? "tpc" : "", backend.get());
        INFO(ir::DTypeName(dtype) << (fused ? " FusedMatMul" : " MatMul") << " k " << k << " n "
                                  << n << ": " << y.status().ToString());
        REQUIRE(y.ok());
        const Tensor& got = (*y)[0];
        REQUIRE(got.dtype() == dtype);
        const int64_t batch_b = c.b.size() == 3 ? c.b[0] : 1;
        const int64_t m = c.a[c.a.size() - 2];
        for (int64_t i = 0; i < got.num_elements(); ++i) {
          const int64_t col = i % n, row = (i / n) % m, mat = i / (n * m);
          const int64_t bm = batch_b == 1 ? 0 : mat % batch_b;
          double want = 0;
          for (int64_t p = 0; p < k; ++p) {
            want +=
                static_cast<double>(At(a, (mat * m + row) * k + p)) * At(b, (bm * k + p) * n + col);
          }
          if (fused) want = std::max(0.0, want + At(bias, col));
          // The f32 product rounded once to the type: within half an ulp of the type
          // plus f32's error.
          const double ulp = dtype == DType::kF16 ? 1.0 / 1024 : 1.0 / 128;
          REQUIRE(std::abs(At(got, i) - want) <= ulp * std::abs(want) + 1e-3);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
