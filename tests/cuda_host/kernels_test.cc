// The CUDA backend's launches run as written (cuda_host.h: the .cu files' own text, their
// threads as fibers), against references computed here in double. Each launch runs twice,
// its threads resumed in increasing and in decreasing order between synchronization
// points; the two results must be the same bits (a result that depends on the order is a
// race or a missing barrier).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "check.h"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/util/half.h"

namespace tpc::runtime::cuda {
namespace {

using Bits = std::vector<uint16_t>;

uint16_t ToKind(FloatKind k, float v) {
  return k == FloatKind::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
}
float FromKind(FloatKind k, uint16_t v) {
  return k == FloatKind::kF16 ? HalfToFloat(v) : BFloat16ToFloat(v);
}
const char* KindName(FloatKind k) {
  return k == FloatKind::kF32 ? "f32" : k == FloatKind::kF16 ? "f16" : "bf16";
}

Bits RandomHalves(FloatKind k, int64_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Bits v(static_cast<size_t>(n));
  for (auto& e : v) e = ToKind(k, u(rng));
  return v;
}

using cuda_host::InBothOrders;

// ---- The tiled attention core (flash_attention.cu) ----

struct FlashCase {
  int64_t count, fold, s, t, d, dv;
  bool k_transposed, mask;
  float alpha, divisor;
};

TEST_CASE("The tiled attention core equals softmax(Q·Kᵀ)·V, in either thread order",
          "[cuda_host][flash]") {
  const FlashCase cases[] = {
      {3, 1, 5, 7, 64, 64, false, false, 0.125f, 1.0f},     // one partial tile each way
      {4, 2, 70, 45, 40, 24, true, true, 1.0f, 6.3245f},    // 2 blocks of rows, GQA fold
      {2, 1, 20, 67, 128, 96, false, true, 0.0884f, 1.0f},  // the D = 128 kernel, 3 key tiles
      {2, 1, 17, 90, 64, 64, false, false, 3.0f, 1.0f},     // scores of ±30: the running max
  };
  for (const FloatKind kind : {FloatKind::kF16, FloatKind::kBF16}) {
    for (const FlashCase& c : cases) {
      CAPTURE(KindName(kind), c.count, c.fold, c.s, c.t, c.d, c.dv, c.k_transposed, c.mask);
      std::mt19937 rng(7);
      const int64_t entries = c.count / c.fold;
      const Bits q = RandomHalves(kind, c.count * c.s * c.d, rng);
      const Bits k = RandomHalves(kind, entries * c.t * c.d, rng);
      const Bits v = RandomHalves(kind, entries * c.t * c.dv, rng);
      // A causal-like mask over [s, t] shared by every entry, some keys closed.
      Bits mask(static_cast<size_t>(c.s * c.t));
      for (int64_t i = 0; i < c.s; ++i)
        for (int64_t j = 0; j < c.t; ++j)
          mask[i * c.t + j] = ToKind(kind, j <= i + c.t - c.s || j == 0 ? 0.5f * (j % 3) : -1e4f);

      FlashAttention p;
      p.count = c.count, p.fold = c.fold, p.s = c.s, p.t = c.t, p.d = c.d, p.dv = c.dv;
      p.q_stride = c.fold * c.s * c.d, p.k_stride = c.t * c.d, p.v_stride = c.t * c.dv;
      p.k_transposed = c.k_transposed;
      p.alpha = c.alpha, p.divisor = c.divisor;
      Bits kt = k;  // K [t, d] per entry, or Kᵀ [d, t]
      if (c.k_transposed) {
        for (int64_t e = 0; e < entries; ++e)
          for (int64_t j = 0; j < c.t; ++j)
            for (int64_t x = 0; x < c.d; ++x)
              kt[e * c.t * c.d + x * c.t + j] = k[e * c.t * c.d + j * c.d + x];
      }
      if (c.mask) {
        p.mask_rows.rank = 2;
        p.mask_rows.dims[0] = c.count, p.mask_rows.dims[1] = c.s;
        p.mask_rows.strides[0] = 0, p.mask_rows.strides[1] = c.t;
        p.mask_col = 1;
      }
      REQUIRE(FlashAttentionFits(p));
      const Bits y = InBothOrders([&] {
        Bits out(static_cast<size_t>(c.count * c.s * c.dv), 0xffff);
        FlashAttention run = p;
        run.q = q.data(), run.k = kt.data(), run.v = v.data(), run.y = out.data();
        run.mask = c.mask ? mask.data() : nullptr;
        REQUIRE_LAUNCH(LaunchFlashAttention(kind, run, nullptr));
        return out;
      });

      // P is rounded to the inputs' type before P·V, and Y once more: a few units of the
      // type's last place at values below 1. NaN (the buffer's fill: an element never
      // written) counts as beyond it.
      const double tol = kind == FloatKind::kF16 ? 2e-3 : 1.6e-2;
      double worst = 0;
      int64_t bad = 0;
      for (int64_t b = 0; b < c.count; ++b) {
        const int64_t e = b / c.fold;
        const uint16_t* qb = q.data() + e * p.q_stride + (b % c.fold) * c.s * c.d;
        for (int64_t i = 0; i < c.s; ++i) {
          std::vector<double> score(static_cast<size_t>(c.t));
          double max = -INFINITY;
          for (int64_t j = 0; j < c.t; ++j) {
            double dot = 0;
            for (int64_t x = 0; x < c.d; ++x)
              dot += double{FromKind(kind, qb[i * c.d + x])} *
                     FromKind(kind, k[e * c.t * c.d + j * c.d + x]);
            score[j] =
                dot * c.alpha / c.divisor + (c.mask ? FromKind(kind, mask[i * c.t + j]) : 0.0);
            max = std::max(max, score[j]);
          }
          double sum = 0;
          for (double& s : score) sum += (s = std::exp(s - max));
          for (int64_t x = 0; x < c.dv; ++x) {
            double want = 0;
            for (int64_t j = 0; j < c.t; ++j)
              want += score[j] / sum * FromKind(kind, v[e * c.t * c.dv + j * c.dv + x]);
            const double got = FromKind(kind, y[(b * c.s + i) * c.dv + x]);
            const double err = std::abs(got - want);
            if (!(err <= tol)) ++bad;
            if (!(err <= worst)) worst = err;
          }
        }
      }
      CAPTURE(worst);
      CHECK(bad == 0);
    }
  }
}

// ---- MatMulNBits' decoding GEMV (nbits.cu) ----

TEST_CASE("MatMulNBits' GEMV equals A·Wᵀ of the dequantized weight, in either thread order",
          "[cuda_host][nbits]") {
  enum Zero { kDefault, kPacked, kFloat };  // zero points: 2^(bits-1), uint8 packed, floats
  struct Case {
    int64_t rows, n, k, bits, block;
    Zero zero;
    bool bias;
  };
  const Case cases[] = {
      {1, 5, 64, 4, 32, kPacked, true},   // whole words of 8 codes
      {8, 3, 96, 4, 64, kDefault, true},  // 8 rows, a partial block
      {3, 4, 36, 4, 16, kPacked, false},  // K % 8 != 0: single codes; no bias
      {2, 3, 48, 8, 16, kPacked, true},   // 8 bits
      {4, 6, 64, 4, 32, kFloat, false},   // zero points in A's type
  };
  for (const FloatKind kind : {FloatKind::kF32, FloatKind::kF16}) {
    for (const Case& c : cases) {
      CAPTURE(KindName(kind), c.rows, c.n, c.k, c.bits, c.block, c.zero, c.bias);
      std::mt19937 rng(11);
      math::NBitsLayout l;
      l.n = c.n, l.k = c.k, l.bits = c.bits, l.block_size = c.block;
      std::uniform_int_distribution<int> byte(0, 255);
      std::vector<uint8_t> b(static_cast<size_t>(l.n * l.blocks() * l.blob_bytes()));
      for (auto& e : b) e = static_cast<uint8_t>(byte(rng));
      std::vector<uint8_t> zp(static_cast<size_t>(l.n * l.packed_zero_point_bytes()));
      for (auto& e : zp) e = static_cast<uint8_t>(byte(rng));
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> a32(static_cast<size_t>(c.rows * c.k)),
          s32(static_cast<size_t>(l.n * l.blocks())), bias32(static_cast<size_t>(l.n));
      for (auto& e : a32) e = u(rng);
      for (auto& e : s32) e = 0.05f * u(rng);
      for (auto& e : bias32) e = c.bias ? u(rng) : 0.0f;
      std::vector<float> zf32(s32.size());
      for (auto& e : zf32) e = 15.0f * (u(rng) + 1.0f) / 2.0f;  // in [0, 15]
      // The operands in the launch's kind, and the values the reference reads back.
      auto stored = [&](std::vector<float>& v) {
        Bits h(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          h[i] = ToKind(kind, v[i]);
          if (kind != FloatKind::kF32) v[i] = FromKind(kind, h[i]);
        }
        return h;
      };
      const Bits a16 = stored(a32), s16 = stored(s32), bias16 = stored(bias32), zf16 = stored(zf32);
      auto ptr = [&](const std::vector<float>& f, const Bits& h) -> const void* {
        return kind == FloatKind::kF32 ? static_cast<const void*>(f.data()) : h.data();
      };
      const auto y = InBothOrders([&] {
        std::vector<float> out32(static_cast<size_t>(c.rows * l.n), NAN);
        Bits out16(out32.size(), 0xffff);
        void* out = kind == FloatKind::kF32 ? static_cast<void*>(out32.data()) : out16.data();
        REQUIRE_LAUNCH(LaunchNBitsGemv(kind, c.rows, l, ptr(a32, a16), b.data(), ptr(s32, s16),
                                       c.zero == kPacked ? zp.data() : nullptr,
                                       c.zero == kFloat ? ptr(zf32, zf16) : nullptr,
                                       c.bias ? ptr(bias32, bias16) : nullptr, out, nullptr));
        std::vector<float> got(out32.size());
        for (size_t i = 0; i < got.size(); ++i)
          got[i] = kind == FloatKind::kF32 ? out32[i] : FromKind(kind, out16[i]);
        return got;
      });
      const int64_t blob = l.blob_bytes(), zp_bytes = l.packed_zero_point_bytes();
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t n = 0; n < l.n; ++n) {
          double want = bias32[n];
          for (int64_t x = 0; x < l.k; ++x) {
            const int64_t blk = x / l.block_size;
            const int code = math::UnpackCode(b.data() + (n * l.blocks() + blk) * blob,
                                              x % l.block_size, l.bits);
            const double z = c.zero == kPacked
                                 ? math::UnpackCode(zp.data() + n * zp_bytes, blk, l.bits)
                             : c.zero == kFloat ? zf32[n * l.blocks() + blk]
                                                : 1 << (l.bits - 1);
            want += double{a32[r * l.k + x]} * (code - z) * s32[n * l.blocks() + blk];
          }
          CAPTURE(r, n, want, y[r * l.n + n]);
          CHECK(std::abs(y[r * l.n + n] - want) <=
                1e-4 + (kind == FloatKind::kF32 ? 1e-5 : 4e-3) * std::abs(want));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpc::runtime::cuda
