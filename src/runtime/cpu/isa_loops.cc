#include "isa_loops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"
#include "vector_math.h"

#if defined(__x86_64__) && !defined(TPC_NO_TARGET_CLONES)
#define TPC_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TPC_ISA_CLONES
#endif

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

// The zero point of block b of a column of 4-bit codes: one float a block, a nibble a
// block packed low first, or 8.
__attribute__((always_inline)) inline float Int4Zero(const float* zeros,
                                                     const uint8_t* packed_zeros, int64_t b) {
  return zeros != nullptr          ? zeros[b]
         : packed_zeros != nullptr ? static_cast<float>((packed_zeros[b / 2] >> (4 * (b % 2))) & 15)
                                   : 8.0f;
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

// Int4ColumnDot for NR rows (1 to 4), NR known at compile time so that the rows'
// accumulators stay in registers (with NR a run-time count gcc kept them in an array in
// memory), each row's blocks alternating between two accumulators so that consecutive
// blocks do not wait for each other. Always inlined into each ISA clone of the caller.
template <int NR>
__attribute__((always_inline)) inline void Int4Rows(const uint8_t* codes, const float* scales,
                                                    const float* zeros, const uint8_t* packed_zeros,
                                                    int64_t blocks, int64_t half,
                                                    const float* a_pairs, int64_t a_stride,
                                                    float* out) {
  // Block b's products, scaled, into acc.
  auto block = [&](int64_t b, F32x16(&acc)[NR]) __attribute__((always_inline)) {
    const float zero = Int4Zero(zeros, packed_zeros, b);
    const F32x16 scale = F32x16{} + scales[b];
    const F32x16 z = F32x16{} + zero;
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
  for (int r = 0; r < NR; ++r) {
    const F32x16 both = acc0[r] + acc1[r];
    float total = 0;
    for (int l = 0; l < 16; ++l) total += both[l];
    out[r] = total;
  }
}

}  // namespace

TPC_ISA_CLONES void Int4ColumnDot(const uint8_t* codes, const float* scales, const float* zeros,
                                  const uint8_t* packed_zeros, int64_t blocks, int64_t half,
                                  const float* a_pairs, int64_t a_stride, int64_t rows,
                                  float* out) {
  // Generic 16-lane vectors (Int4Rows): one AVX-512 register, two AVX2 ones, four SSE
  // ones, each clone lowering them to its width (the auto-vectorizer kept this loop at SSE
  // width even in the AVX-512 clone). Each block's codes are decoded once per group of up
  // to 4 rows, less their zero point, and its products scaled into each row's lanes: one
  // horizontal sum per row.
  //
  // The scales of the column after next, a line per 16 blocks.
  for (int64_t b = 0; b < blocks; b += 16) __builtin_prefetch(scales + 2 * blocks + b);
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const float* a = a_pairs + r0 * a_stride;
    switch (std::min<int64_t>(4, rows - r0)) {
      case 1:
        Int4Rows<1>(codes, scales, zeros, packed_zeros, blocks, half, a, a_stride, out + r0);
        break;
      case 2:
        Int4Rows<2>(codes, scales, zeros, packed_zeros, blocks, half, a, a_stride, out + r0);
        break;
      case 3:
        Int4Rows<3>(codes, scales, zeros, packed_zeros, blocks, half, a, a_stride, out + r0);
        break;
      default:
        Int4Rows<4>(codes, scales, zeros, packed_zeros, blocks, half, a, a_stride, out + r0);
        break;
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
      const float zero = Int4Zero(cz, cp, b);
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
