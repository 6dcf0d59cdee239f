#include "isa_loops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"
#include "vector_math.h"

namespace tpc::runtime::cpu {
namespace {

template <Activation A>
inline float Apply(float v) {
  if constexpr (A == Activation::kGelu) return GeluErf(v);
  if constexpr (A == Activation::kGeluTanh) return GeluTanh(v);
  if constexpr (A == Activation::kRelu) return v > 0.0f ? v : 0.0f;
  if constexpr (A == Activation::kTanh) return std::tanh(v);
  if constexpr (A == Activation::kSigmoid) return Sigmoid(v);
  if constexpr (A == Activation::kSiLU) return v * Sigmoid(v);
  return v;
}

// f(std::integral_constant<Activation, act>{}): one instantiation per activation, so that
// each loop is compiled with its activation inlined. It and the loops handed to it are
// always inlined: a call out of a clone would run the loop at the baseline's width.
template <typename F>
TPC_VMATH_INLINE void WithActivation(Activation act, F&& f) {
  using A = Activation;
  switch (act) {
    case A::kNone:
      return f(std::integral_constant<A, A::kNone>{});
    case A::kGelu:
      return f(std::integral_constant<A, A::kGelu>{});
    case A::kGeluTanh:
      return f(std::integral_constant<A, A::kGeluTanh>{});
    case A::kRelu:
      return f(std::integral_constant<A, A::kRelu>{});
    case A::kTanh:
      return f(std::integral_constant<A, A::kTanh>{});
    case A::kSigmoid:
      return f(std::integral_constant<A, A::kSigmoid>{});
    case A::kSiLU:
      return f(std::integral_constant<A, A::kSiLU>{});
  }
}

}  // namespace

TPC_ISA_CLONES void ActivationRows(Activation act, float* y, int64_t rows, int64_t ld, int64_t cols,
                                   const float* bias) {
  WithActivation(
      act, [&](auto a) __attribute__((always_inline)) {
        for (int64_t r = 0; r < rows; ++r) {
          float* row = y + r * ld;
          if (bias != nullptr) {
            for (int64_t j = 0; j < cols; ++j) row[j] = Apply<a()>(row[j] + bias[j]);
          } else {
            for (int64_t j = 0; j < cols; ++j) row[j] = Apply<a()>(row[j]);
          }
        }
      });
}

TPC_ISA_CLONES void ActivationCopy(Activation act, const float* x, float* y, int64_t n) {
  WithActivation(
      act, [&](auto a) __attribute__((always_inline)) {
        for (int64_t i = 0; i < n; ++i) y[i] = Apply<a()>(x[i]);
      });
}

TPC_ISA_CLONES void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  for (int64_t r = 0; r < rows; ++r) SoftmaxRow(x + r * n, y + r * n, n, log);
}

TPC_ISA_CLONES void ScaleMaskSoftmaxRows(float* s, int64_t rows, int64_t n, float divisor,
                                         const float* mask, int64_t mask_row, int64_t mask_col) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * n;
    if (divisor != 1.0f) {
      for (int64_t j = 0; j < n; ++j) row[j] /= divisor;
    }
    if (mask != nullptr) {
      const float* m = mask + r * mask_row;
      if (mask_col == 1) {
        for (int64_t j = 0; j < n; ++j) row[j] += m[j];
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] += m[j * mask_col];
      }
    }
    SoftmaxRow(row, row, n, false);
  }
}

namespace {

typedef uint8_t U8x16 __attribute__((vector_size(16)));
typedef int32_t I32x16 __attribute__((vector_size(64)));
typedef float F32x16 __attribute__((vector_size(64)));

// Where a column's zero points are: one float a block, a nibble a block packed low first,
// or none (8). A template argument of the loops, so that no block tests it.
enum ZeroKind { kZero8, kZeroFloats, kZeroNibbles };

// The zero point of block b of a column of 4-bit codes.
template <ZeroKind ZK>
__attribute__((always_inline)) inline float Int4Zero(const float* zeros,
                                                     const uint8_t* packed_zeros, int64_t b) {
  if constexpr (ZK == kZeroFloats) return zeros[b];
  if constexpr (ZK == kZeroNibbles) {
    return static_cast<float>((packed_zeros[b / 2] >> (4 * (b % 2))) & 15);
  }
  return 8.0f;
}

// 16 bytes of codes at p, less `zero`: their low nibbles (the even codes) and their high
// ones (the odd codes), 16 lanes each.
__attribute__((always_inline)) inline void Int4Nibbles(const uint8_t* p, const F32x16& zero,
                                                       F32x16& lo, F32x16& hi) {
  U8x16 bytes;
  std::memcpy(&bytes, p, sizeof bytes);
  lo = __builtin_convertvector(__builtin_convertvector(static_cast<U8x16>(bytes & 15), I32x16),
                               F32x16) -
       zero;
  hi = __builtin_convertvector(__builtin_convertvector(static_cast<U8x16>(bytes >> 4), I32x16),
                               F32x16) -
       zero;
}

// The sum of the 16 lanes as a tree of halves (4 dependent vector adds; a loop over the
// lanes was 15 dependent scalar adds, a third of a 512-long column's dot product).
__attribute__((always_inline)) inline float Sum16(F32x16 v) {
  typedef float F32x8 __attribute__((vector_size(32)));
  typedef float F32x4 __attribute__((vector_size(16)));
  const F32x8 h8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const F32x4 h4 =
      __builtin_shufflevector(h8, h8, 0, 1, 2, 3) + __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
  return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

// One column of Int4ColumnsDot against NR rows (1 to 4), NR known at compile time so that the rows'
// accumulators stay in registers (with NR a run-time count gcc kept them in an array in
// memory), each row's blocks alternating between two accumulators so that consecutive
// blocks do not wait for each other. HALF: the block's half size when known at compile
// time (16: blocks of 32, the usual layout, one vector of codes a block with no loop),
// else 0 and `half` says. Always inlined into each ISA clone of the caller.
template <int NR, int HALF, ZeroKind ZK>
__attribute__((always_inline)) inline void Int4Rows(const uint8_t* codes, const float* scales,
                                                    const float* zeros, const uint8_t* packed_zeros,
                                                    int64_t blocks, int64_t dynamic_half,
                                                    const float* a_pairs, int64_t a_stride,
                                                    float* out) {
  const int64_t half = HALF != 0 ? HALF : dynamic_half;
  // Block b's products, scaled, into acc.
  auto block = [&](int64_t b, F32x16(&acc)[NR]) __attribute__((always_inline)) {
    const F32x16 scale = F32x16{} + scales[b];
    const F32x16 z = F32x16{} + Int4Zero<ZK>(zeros, packed_zeros, b);
    const uint8_t* c = codes + b * half;
    // 2 KiB ahead (two columns at K = 2048), a line per 4 blocks of 32: the hardware
    // prefetcher alone left each block waiting for memory (the bench model's decode, 2
    // threads on the Xeon: 22 → 36 tokens/s; 1 to 8 KiB ahead all within the noise).
    if ((b & 3) == 0) __builtin_prefetch(c + 2048);
    F32x16 sum[NR] = {};
    for (int64_t j = 0; j < half; j += 16) {
      F32x16 lo, hi;
      Int4Nibbles(c + j, z, lo, hi);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        const float* even = a_pairs + r * a_stride + b * 2 * half + j;
        F32x16 e, o;
        std::memcpy(&e, even, sizeof e);
        std::memcpy(&o, even + half, sizeof o);
        sum[r] += lo * e + hi * o;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[r] += scale * sum[r];
  };
  // Even blocks into acc0, odd ones into acc1 (indexes known at compile time: registers).
  F32x16 acc0[NR] = {}, acc1[NR] = {};
  int64_t b = 0;
  for (; b + 1 < blocks; b += 2) {
    block(b, acc0);
    block(b + 1, acc1);
  }
  if (b < blocks) block(b, acc0);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) out[r] = Sum16(acc0[r] + acc1[r]);
}

// Two adjacent columns against one row (a decode step): A's two loads a block shared by
// both, each column's blocks alternating between two accumulators (four chains in flight).
// A decode step of a 16-expert int4 MoE layer (hidden 512, one thread): 0.29 ms a column
// at a time, 0.21 two at a time.
template <int HALF, ZeroKind ZK>
__attribute__((always_inline)) inline void Int4PairRow(
    const uint8_t* codes, const float* scales, const float* zeros, const uint8_t* packed_zeros,
    int64_t packed_stride, int64_t blocks, int64_t dynamic_half, const float* a, float* out) {
  const int64_t half = HALF != 0 ? HALF : dynamic_half;
  const uint8_t* codes1 = codes + blocks * half;
  const float* scales1 = scales + blocks;
  const float* zeros1 = zeros != nullptr ? zeros + blocks : nullptr;
  const uint8_t* packed1 = packed_zeros != nullptr ? packed_zeros + packed_stride : nullptr;
  auto block = [&](int64_t b, F32x16 & acc0, F32x16 & acc1) __attribute__((always_inline)) {
    const uint8_t* c0 = codes + b * half;
    const uint8_t* c1 = codes1 + b * half;
    // As Int4Rows: 2 KiB ahead, a line per 4 blocks of 32, for each column.
    if ((b & 3) == 0) {
      __builtin_prefetch(c0 + 2048);
      __builtin_prefetch(c1 + 2048);
    }
    const F32x16 z0 = F32x16{} + Int4Zero<ZK>(zeros, packed_zeros, b);
    const F32x16 z1 = F32x16{} + Int4Zero<ZK>(zeros1, packed1, b);
    F32x16 sum0 = {}, sum1 = {};
    for (int64_t j = 0; j < half; j += 16) {
      F32x16 e, o, lo, hi;
      std::memcpy(&e, a + b * 2 * half + j, sizeof e);
      std::memcpy(&o, a + b * 2 * half + half + j, sizeof o);
      Int4Nibbles(c0 + j, z0, lo, hi);
      sum0 += lo * e + hi * o;
      Int4Nibbles(c1 + j, z1, lo, hi);
      sum1 += lo * e + hi * o;
    }
    acc0 += scales[b] * sum0;
    acc1 += scales1[b] * sum1;
  };
  F32x16 even0 = {}, even1 = {}, odd0 = {}, odd1 = {};
  int64_t b = 0;
  for (; b + 1 < blocks; b += 2) {
    block(b, even0, even1);
    block(b + 1, odd0, odd1);
  }
  if (b < blocks) block(b, even0, even1);
  out[0] = Sum16(even0 + odd0);
  out[1] = Sum16(even1 + odd1);
}

// Int4ColumnsDot for a block size (HALF as Int4Rows') and a kind of zero points.
template <int HALF, ZeroKind ZK>
__attribute__((always_inline)) inline void Int4Columns(
    const uint8_t* codes, const float* scales, const float* zeros, const uint8_t* packed_zeros,
    int64_t packed_stride, int64_t cols, int64_t blocks, int64_t half, const float* a_pairs,
    int64_t a_stride, int64_t rows, float* out, int64_t out_ld) {
  int64_t c = 0;
  if (rows == 1) {
    for (; c + 1 < cols; c += 2) {
      Int4PairRow<HALF, ZK>(codes + c * blocks * half, scales + c * blocks,
                            zeros != nullptr ? zeros + c * blocks : nullptr,
                            packed_zeros != nullptr ? packed_zeros + c * packed_stride : nullptr,
                            packed_stride, blocks, half, a_pairs, out + c);
    }
  }
  float dots[4];
  for (; c < cols; ++c) {
    const uint8_t* cc = codes + c * blocks * half;
    const float* cs = scales + c * blocks;
    const float* cz = zeros != nullptr ? zeros + c * blocks : nullptr;
    const uint8_t* cp = packed_zeros != nullptr ? packed_zeros + c * packed_stride : nullptr;
    // The scales of the column after next, a line per 16 blocks.
    for (int64_t b = 0; b < blocks; b += 16) __builtin_prefetch(cs + 2 * blocks + b);
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      const float* a = a_pairs + r0 * a_stride;
      const int64_t nr = std::min<int64_t>(4, rows - r0);
      switch (nr) {
        case 1:
          Int4Rows<1, HALF, ZK>(cc, cs, cz, cp, blocks, half, a, a_stride, dots);
          break;
        case 2:
          Int4Rows<2, HALF, ZK>(cc, cs, cz, cp, blocks, half, a, a_stride, dots);
          break;
        case 3:
          Int4Rows<3, HALF, ZK>(cc, cs, cz, cp, blocks, half, a, a_stride, dots);
          break;
        default:
          Int4Rows<4, HALF, ZK>(cc, cs, cz, cp, blocks, half, a, a_stride, dots);
          break;
      }
      for (int64_t r = 0; r < nr; ++r) out[(r0 + r) * out_ld + c] = dots[r];
    }
  }
}

template <int HALF>
__attribute__((always_inline)) inline void Int4ColumnsOfHalf(
    const uint8_t* codes, const float* scales, const float* zeros, const uint8_t* packed_zeros,
    int64_t packed_stride, int64_t cols, int64_t blocks, int64_t half, const float* a_pairs,
    int64_t a_stride, int64_t rows, float* out, int64_t out_ld) {
  if (zeros != nullptr) {
    Int4Columns<HALF, kZeroFloats>(codes, scales, zeros, packed_zeros, packed_stride, cols, blocks,
                                   half, a_pairs, a_stride, rows, out, out_ld);
  } else if (packed_zeros != nullptr) {
    Int4Columns<HALF, kZeroNibbles>(codes, scales, zeros, packed_zeros, packed_stride, cols, blocks,
                                    half, a_pairs, a_stride, rows, out, out_ld);
  } else {
    Int4Columns<HALF, kZero8>(codes, scales, zeros, packed_zeros, packed_stride, cols, blocks, half,
                              a_pairs, a_stride, rows, out, out_ld);
  }
}

}  // namespace

TPC_ISA_CLONES void Int4ColumnsDot(const uint8_t* codes, const float* scales, const float* zeros,
                                   const uint8_t* packed_zeros, int64_t packed_stride, int64_t cols,
                                   int64_t blocks, int64_t half, const float* a_pairs,
                                   int64_t a_stride, int64_t rows, float* out, int64_t out_ld) {
  // Generic 16-lane vectors (Int4Rows, Int4PairRow): one AVX-512 register, two AVX2 ones,
  // four SSE ones, each clone lowering them to its width (the auto-vectorizer kept this
  // loop at SSE width even in the AVX-512 clone). Each block's codes are decoded once per
  // group of up to 4 rows, less their zero point, and its products scaled into each row's
  // lanes: one horizontal sum per row and column.
  if (half == 16) {
    Int4ColumnsOfHalf<16>(codes, scales, zeros, packed_zeros, packed_stride, cols, blocks, half,
                          a_pairs, a_stride, rows, out, out_ld);
  } else {
    Int4ColumnsOfHalf<0>(codes, scales, zeros, packed_zeros, packed_stride, cols, blocks, half,
                         a_pairs, a_stride, rows, out, out_ld);
  }
}

TPC_ISA_CLONES void SmallGemm(const float* a, const float* b, float* c, int64_t m, int64_t n,
                              int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    std::fill(row, row + n, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float x = a[i * k + p];
      const float* w = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += x * w[j];
    }
  }
}

TPC_ISA_CLONES void HalfBlockToFloat(const uint16_t* src, int64_t src_ld, int64_t rows,
                                     int64_t cols, float* dst, int64_t dst_ld, bool bf16) {
  typedef uint16_t U16x16 __attribute__((vector_size(32)));
  typedef uint32_t U32x16 __attribute__((vector_size(64)));
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* s = src + r * src_ld;
    float* d = dst + r * dst_ld;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
      U16x16 h;
      std::memcpy(&h, s + j, sizeof h);
      const U32x16 x = __builtin_convertvector(h, U32x16);
      U32x16 bits;
      if (bf16) {
        bits = x << 16;
      } else {
        // Normal: the exponent and mantissa moved to f32's places, the exponent rebiased;
        // subnormal: the mantissa times 2^-24 (a normal f32: no f32 subnormal arithmetic,
        // which a denormals-are-zero mode would flush); all-ones exponent (infinity, NaN):
        // f32's, payload kept.
        const U32x16 exp = x & 0x7c00u;
        const U32x16 em = (x & 0x7fffu) << 13;
        const U32x16 sub =
            (U32x16)(__builtin_convertvector((I32x16)(x & 0x3ffu), F32x16) * (1.0f / 16777216.0f));
        const U32x16 is_sub = (U32x16)(exp == 0u);
        const U32x16 is_special = (U32x16)(exp == 0x7c00u);
        bits = ((em + 0x38000000u) & ~(is_sub | is_special)) | (sub & is_sub) |
               ((em | 0x7f800000u) & is_special) | ((x & 0x8000u) << 16);
      }
      std::memcpy(d + j, &bits, sizeof bits);
    }
    for (; j < cols; ++j) d[j] = bf16 ? BFloat16ToFloat(s[j]) : HalfToFloat(s[j]);
  }
}

TPC_ISA_CLONES void FloatToHalfBlock(const float* src, int64_t n, uint16_t* dst, bool bf16) {
  typedef uint16_t U16x16 __attribute__((vector_size(32)));
  typedef uint32_t U32x16 __attribute__((vector_size(64)));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    U32x16 u;
    std::memcpy(&u, src + i, sizeof u);
    U32x16 h;
    if (bf16) {
      // Round to nearest even at bit 16; a NaN keeps its top bits, made quiet.
      const U32x16 is_nan = (U32x16)((u & 0x7fffffffu) > 0x7f800000u);
      h = (((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & ~is_nan) | (((u >> 16) | 0x40u) & is_nan);
    } else {
      const U32x16 abs = u & 0x7fffffffu;
      const U32x16 sign = (u >> 16) & 0x8000u;
      // Normal half: the exponent rebiased and the mantissa rounded to nearest even at bit
      // 13 (a carry into the exponent is right, up to the overflow below).
      const U32x16 normal = ((abs + 0xfffu + ((abs >> 13) & 1u)) >> 13) - (112u << 10);
      // Subnormal half or zero: abs · 2^24 (exact, < 1024) rounded to an integer by the
      // add of 2^23 (the FPU's nearest-even), read back from its low mantissa bits.
      F32x16 f;
      std::memcpy(&f, &abs, sizeof f);
      const F32x16 scaled = f * 16777216.0f + 8388608.0f;
      U32x16 sub;
      std::memcpy(&sub, &scaled, sizeof sub);
      sub -= 0x4b000000u;
      const U32x16 is_sub = (U32x16)(abs < 0x38800000u);
      const U32x16 is_inf = (U32x16)(abs >= 0x477ff000u);  // overflow, or infinity
      const U32x16 is_nan = (U32x16)(abs > 0x7f800000u);
      h = (normal & ~(is_sub | is_inf)) | (sub & is_sub) | (0x7c00u & is_inf) | (0x200u & is_nan) |
          sign;
    }
    const U16x16 narrow = __builtin_convertvector(h, U16x16);
    std::memcpy(dst + i, &narrow, sizeof narrow);
  }
  for (; i < n; ++i) dst[i] = bf16 ? FloatToBFloat16(src[i]) : FloatToHalf(src[i]);
}

void EvenOddPairs(const float* a, int64_t m, int64_t k, int64_t block, float* out) {
  const int64_t half = block / 2;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t k0 = 0; k0 < k; k0 += block) {
      const float* src = a + r * k + k0;
      float* dst = out + r * k + k0;
      for (int64_t j = 0; j < half; ++j) {
        dst[j] = src[2 * j];
        dst[half + j] = src[2 * j + 1];
      }
    }
  }
}

TPC_ISA_CLONES void Int4DequantizeColumns(const uint8_t* codes, int64_t code_stride,
                                          const float* scales, const float* zeros,
                                          const uint8_t* packed_zeros, int64_t packed_stride,
                                          int64_t blocks, int64_t half, int64_t cols, float* w,
                                          int64_t ld) {
  for (int64_t col = 0; col < cols; ++col) {
    const uint8_t* cc = codes + col * code_stride;
    const float* cs = scales + col * blocks;
    const float* cz = zeros != nullptr ? zeros + col * blocks : nullptr;
    const uint8_t* cp = packed_zeros != nullptr ? packed_zeros + col * packed_stride : nullptr;
    float* out = w + col * ld;
    for (int64_t b = 0; b < blocks; ++b) {
      const float zero = cz != nullptr   ? Int4Zero<kZeroFloats>(cz, cp, b)
                         : cp != nullptr ? Int4Zero<kZeroNibbles>(cz, cp, b)
                                         : Int4Zero<kZero8>(cz, cp, b);
      const F32x16 scale = F32x16{} + cs[b];
      const F32x16 z = F32x16{} + zero;
      const uint8_t* c = cc + b * half;
      float* dst = out + b * 2 * half;
      for (int64_t j = 0; j < half; j += 16) {
        F32x16 lo, hi;
        Int4Nibbles(c + j, z, lo, hi);
        lo *= scale;
        hi *= scale;
        std::memcpy(dst + j, &lo, sizeof lo);
        std::memcpy(dst + half + j, &hi, sizeof hi);
      }
    }
  }
}

namespace {

typedef float F32x8 __attribute__((vector_size(32)));
typedef float F32x4 __attribute__((vector_size(16)));

// The sum of v's lanes by halves (a sum lane after lane is a chain of 15 dependent adds:
// at K = 2048 it took as long as the tile's products).
template <typename V>
__attribute__((always_inline)) inline float LaneSum(const V& v) {
  if constexpr (sizeof(V) == 64) {
    return LaneSum(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
  } else if constexpr (sizeof(V) == 32) {
    return LaneSum(__builtin_shufflevector(v, v, 0, 1, 2, 3) +
                   __builtin_shufflevector(v, v, 4, 5, 6, 7));
  } else {
    return (v[0] + v[2]) + (v[1] + v[3]);
  }
}

// MR rows of A against NR rows of W: MR × NR vector accumulators along k, one horizontal
// sum each at the end (MR and NR known at compile time: registers).
template <typename V, int MR, int NR>
__attribute__((always_inline)) inline void DotsTile(const float* a, int64_t lda, const float* w,
                                                    int64_t ldw, int64_t k, float* c, int64_t ldc) {
  constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));
  V acc[MR][NR] = {};
  for (int64_t p = 0; p < k; p += kLanes) {
    V wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) std::memcpy(&wv[j], w + j * ldw + p, sizeof(V));
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      V av;
      std::memcpy(&av, a + i * lda + p, sizeof(V));
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] += av * wv[j];
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      c[i * ldc + j] = LaneSum(acc[i][j]);
    }
  }
}

// Every MR × NR tile of C, then the rows and columns left over one at a time. Columns
// outside, rows inside: NR rows of W (NR · k floats) stay in the first-level cache while
// every row of A passes them.
template <typename V, int MR, int NR>
__attribute__((always_inline)) inline void Dots(const float* a, int64_t lda, int64_t m,
                                                const float* w, int64_t ldw, int64_t n, int64_t k,
                                                float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + NR <= n; j += NR) {
    int64_t i = 0;
    for (; i + MR <= m; i += MR) {
      DotsTile<V, MR, NR>(a + i * lda, lda, w + j * ldw, ldw, k, c + i * ldc + j, ldc);
    }
    for (; i < m; ++i)
      DotsTile<V, 1, NR>(a + i * lda, lda, w + j * ldw, ldw, k, c + i * ldc + j, ldc);
  }
  for (; j < n; ++j) {
    int64_t i = 0;
    for (; i + MR <= m; i += MR) {
      DotsTile<V, MR, 1>(a + i * lda, lda, w + j * ldw, ldw, k, c + i * ldc + j, ldc);
    }
    for (; i < m; ++i)
      DotsTile<V, 1, 1>(a + i * lda, lda, w + j * ldw, ldw, k, c + i * ldc + j, ldc);
  }
}

using DotsFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t,
                        float*, int64_t);

void DotsBaseline(const float* a, int64_t lda, int64_t m, const float* w, int64_t ldw, int64_t n,
                  int64_t k, float* c, int64_t ldc) {
  Dots<F32x4, 2, 4>(a, lda, m, w, ldw, n, k, c, ldc);
}

#if defined(__x86_64__) && !defined(TPC_NO_TARGET_CLONES)
// The tile per ISA (target_clones would give each clone the same tile: 4 × 4 of AVX-512's
// 32 registers is 16 accumulators, of AVX2's 16 it would spill).
__attribute__((target("avx512f"))) void Dots512(const float* a, int64_t lda, int64_t m,
                                                const float* w, int64_t ldw, int64_t n, int64_t k,
                                                float* c, int64_t ldc) {
  Dots<F32x16, 4, 4>(a, lda, m, w, ldw, n, k, c, ldc);
}
__attribute__((target("avx2,fma"))) void Dots256(const float* a, int64_t lda, int64_t m,
                                                 const float* w, int64_t ldw, int64_t n, int64_t k,
                                                 float* c, int64_t ldc) {
  Dots<F32x8, 2, 4>(a, lda, m, w, ldw, n, k, c, ldc);
}
#endif

// The variant of `lanes` lanes if this CPU has it, else null.
DotsFn DotsOfWidth(int lanes) {
#if defined(__x86_64__) && !defined(TPC_NO_TARGET_CLONES)
  __builtin_cpu_init();
  if (lanes == 16) return __builtin_cpu_supports("avx512f") ? Dots512 : nullptr;
  if (lanes == 8) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Dots256 : nullptr;
  }
#endif
  return lanes == 4 ? DotsBaseline : nullptr;
}

// The widest variant this CPU has.
DotsFn PickDots() {
  for (int lanes : {16, 8}) {
    if (DotsFn f = DotsOfWidth(lanes)) return f;
  }
  return DotsBaseline;
}

}  // namespace

void RowColumnDots(const float* a, int64_t lda, int64_t m, const float* w, int64_t ldw, int64_t n,
                   int64_t k, float* c, int64_t ldc) {
  TPC_CHECK(k % 16 == 0);  // whole vectors along k (the tiles read no tail)
  static const DotsFn dots = PickDots();
  dots(a, lda, m, w, ldw, n, k, c, ldc);
}

bool RowColumnDotsOfWidth(int lanes, const float* a, int64_t lda, int64_t m, const float* w,
                          int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc) {
  TPC_CHECK(k % 16 == 0);
  const DotsFn dots = DotsOfWidth(lanes);
  if (dots == nullptr) return false;
  dots(a, lda, m, w, ldw, n, k, c, ldc);
  return true;
}

}  // namespace tpc::runtime::cpu
