#include "int8_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
// gcc 12 warns falsely of the intrinsics' undefined pass-through operands once inlined at
// -O3 (the warning's location is the header: ignored there only).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "tpc/util/status_macros.h"

namespace tpc::runtime::cpu {

#if defined(__x86_64__)
#define TPC_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace {

// Rows multiplied into a panel's codes at once (each 64 bytes of codes split into nibbles
// once for all of them): 8 rows' int32 and f32 lanes take 16 of the 32 vector registers.
// bench_nbits, 1 thread, K 3072, N 1024, 32 rows: 4 rows at once 0.92 ms, 6 0.79, 8 0.64,
// 10 0.68, 12 0.79.
constexpr int kPanelRows = 8;

// math::Int8BlockOf of the `block` values at src (a multiple of 16), 16 lanes at a time.
TPC_VNNI inline math::Int8Block Int8Block512(const float* src, int64_t block) {
  const __m512 limit = _mm512_set1_ps(3.4028234663852886e38f);
  __m512 vmax = _mm512_setzero_ps();
  __mmask16 bad = 0;
  for (int64_t i = 0; i < block; i += 16) {
    const __m512 v = _mm512_abs_ps(_mm512_loadu_ps(src + i));
    bad |= _mm512_cmp_ps_mask(v, limit, _CMP_NLE_UQ);  // NaN or infinity
    vmax = _mm512_max_ps(vmax, v);
  }
  return math::Int8BlockFromMax(_mm512_reduce_max_ps(vmax), bad == 0);
}

TPC_VNNI void RoundRow512(const float* row, int64_t k, int64_t block, float* out) {
  for (int64_t k0 = 0; k0 < k; k0 += block) {
    const math::Int8Block blk = Int8Block512(row + k0, block);
    const __m512 inverse = _mm512_set1_ps(blk.inverse), scale = _mm512_set1_ps(blk.scale);
    for (int64_t i = k0; i < k0 + block; i += 16) {
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(row + i), inverse));
      _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale));
    }
  }
}

// The int8 codes of a row of k values (blocks of `block`, a multiple of 16) in their own
// order into `codes`, each block's scale into scale[b] and its Σ codes into sums[b]:
// math::Int8BlockOf's and math::Int8Code's values, 16 lanes at a time (vcvtps2dq rounds
// half to even, as rintf does; a non-finite block's codes are 0, as Int8Code's, and its
// scale NaN).
TPC_VNNI void QuantizeRow(const float* row, int64_t k, int64_t block, int8_t* codes, float* scale,
                          int32_t* sums) {
  for (int64_t b = 0; b * block < k; ++b) {
    const float* src = row + b * block;
    const math::Int8Block blk = Int8Block512(src, block);
    scale[b] = blk.scale;
    if (std::isnan(blk.scale)) {  // a NaN or an infinity: codes 0 (vcvtps2dq gives INT_MIN)
      std::memset(codes + b * block, 0, static_cast<size_t>(block));
      sums[b] = 0;
      continue;
    }
    const __m512 inverse = _mm512_set1_ps(blk.inverse);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t i = 0; i < block; i += 16) {
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(src + i), inverse));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + b * block + i), _mm512_cvtepi32_epi8(q));
      sum = _mm512_add_epi32(sum, q);
    }
    sums[b] = _mm512_reduce_add_epi32(sum);
  }
}

// Rows r0 .. r0 + R - 1 of `a` against one panel (16 columns, CodePanels) of kBits codes:
// per block, each 64 bytes of codes (4 bits: split into low and high nibbles, codes 8g to
// 8g + 3 and 8g + 4 to 8g + 7 of the 16 columns; 8 bits: codes 4g to 4g + 3) multiplied by
// the row's four codes there, broadcast (vpdpbusd: unsigned weight codes times signed
// activation codes, whose products fit the instruction's 16-bit intermediates: 255 · 127),
// into one int32 lane per column that starts at the zero point's share, -zero · Σ codes of
// the block; then converted and scaled (the columns' scales times the row's) into an f32
// lane per column.
template <int R, bool kZeros, int kBits>
TPC_VNNI inline void PanelRows(const uint8_t* panel, const CodePanels& p, const Int8Activations& a,
                               int64_t r0, float* out, int64_t out_ld, __mmask16 columns) {
  const __m512i low = _mm512_set1_epi8(15);
  const int64_t blocks = p.blocks(), code_bytes = 2 * kBits * p.block;
  const int64_t block_bytes = p.block_bytes();
  const int8_t* q[R];
  const float* sa[R];
  const int32_t* sums[R];
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    q[r] = a.q.data() + (r0 + r) * a.stride;
    sa[r] = a.scales.data() + (r0 + r) * blocks;
    sums[r] = a.sums.data() + (r0 + r) * blocks;
    acc[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* codes = panel + b * block_bytes;
    __builtin_prefetch(codes + 2048);
    __m512i d[R];
    if constexpr (kZeros) {
      const __m512i z = _mm512_load_si512(codes + code_bytes + 64);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) d[r] = _mm512_mullo_epi32(z, _mm512_set1_epi32(-sums[r][b]));
    } else {  // 2^(bits - 1)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) d[r] = _mm512_set1_epi32(-(1 << (kBits - 1)) * sums[r][b]);
    }
    for (int64_t g = 0; g < code_bytes / 64; ++g) {
      const __m512i x = _mm512_load_si512(codes + 64 * g);
      if constexpr (kBits == 4) {
        const __m512i lo = _mm512_and_si512(x, low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          int32_t a0, a1;
          std::memcpy(&a0, q[r] + b * p.block + 8 * g, 4);
          std::memcpy(&a1, q[r] + b * p.block + 8 * g + 4, 4);
          d[r] = _mm512_dpbusd_epi32(d[r], lo, _mm512_set1_epi32(a0));
          d[r] = _mm512_dpbusd_epi32(d[r], hi, _mm512_set1_epi32(a1));
        }
      } else {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          int32_t a0;
          std::memcpy(&a0, q[r] + b * p.block + 4 * g, 4);
          d[r] = _mm512_dpbusd_epi32(d[r], x, _mm512_set1_epi32(a0));
        }
      }
    }
    const __m512 sw = _mm512_load_ps(codes + code_bytes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[r]),
                               _mm512_mul_ps(sw, _mm512_set1_ps(sa[r][b])), acc[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(out + (r0 + r) * out_ld, columns, acc[r]);
}

// The lanes of panel i's columns that exist (the last panel's may be fewer than 16).
inline __mmask16 PanelColumns(const CodePanels& p, int64_t i) {
  const int64_t cols = std::min(CodePanels::kColumns, p.n - i * CodePanels::kColumns);
  return static_cast<__mmask16>(cols == 16 ? 0xffff : (1u << cols) - 1);
}

// The low 16 bits of each lane (four codes) into the low nibbles of its four bytes.
TPC_VNNI inline __m512i SpreadNibbles(__m512i v) {
  v = _mm512_and_si512(v, _mm512_set1_epi32(0xffff));
  v = _mm512_and_si512(_mm512_or_si512(v, _mm512_slli_epi32(v, 8)), _mm512_set1_epi32(0x00ff00ff));
  return _mm512_and_si512(_mm512_or_si512(v, _mm512_slli_epi32(v, 4)),
                          _mm512_set1_epi32(0x0f0f0f0f));
}

// PackCodePanels: each 64 bytes of a panel's block gathered from its 16 columns (4 bytes of
// each: 4 bits, codes 8g to 8g + 7, their nibbles reordered in the lanes: the codes' low
// nibbles (codes 8g + 2i in byte i) and high ones spread into byte j's low nibble (code 8g
// + j) and high nibble (code 8g + 4 + j); 8 bits, codes 4g to 4g + 3 as they are).
TPC_VNNI void PackPanels(const uint8_t* codes, const float* scales, const uint8_t* packed_zeros,
                         int64_t packed_stride, const CodePanels& p, int64_t first, int64_t count,
                         uint8_t* out) {
  const int64_t column_bytes = p.k * p.bits / 8, blocks = p.blocks();
  const int64_t code_bytes = 2 * p.bits * p.block;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i byte_offsets =
      _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(column_bytes)));
  const __m512i scale_offsets =
      _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(blocks)));
  for (int64_t i = first; i < first + count; ++i) {
    const int64_t c0 = i * CodePanels::kColumns;
    const __mmask16 in = PanelColumns(p, i);
    uint8_t* panel = out + i * p.panel_bytes();
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* dst = panel + b * p.block_bytes();
      const uint8_t* src = codes + c0 * column_bytes + b * p.block * p.bits / 8;
      for (int64_t g = 0; g < code_bytes / 64; ++g) {
        __m512i v =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), in, byte_offsets, src + 4 * g, 1);
        if (p.bits == 4) {
          v = _mm512_or_si512(SpreadNibbles(v),
                              _mm512_slli_epi32(SpreadNibbles(_mm512_srli_epi32(v, 16)), 4));
        }
        _mm512_store_si512(dst + 64 * g, v);
      }
      _mm512_store_ps(dst + code_bytes,
                      _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, scale_offsets,
                                               scales + c0 * blocks + b, 4));
      if (p.zero_points) {  // (a byte each: a gather of 4 would read past the last)
        auto* zeros = reinterpret_cast<int32_t*>(dst + code_bytes + 64);
        for (int64_t l = 0; l < CodePanels::kColumns; ++l) {
          const uint8_t* z = packed_zeros + (c0 + l) * packed_stride;
          zeros[l] = ((in >> l) & 1) == 0 ? 0
                     : p.bits == 8        ? z[b]
                                          : (z[b / 2] >> (4 * (b % 2))) & 15;
        }
      }
    }
  }
}

// The last rows of a panel (fewer than kPanelRows): PanelRows at their count.
template <bool kZeros, int kBits, int R = kPanelRows - 1>
TPC_VNNI void PanelTail(const uint8_t* panel, const CodePanels& p, const Int8Activations& a,
                        int64_t r0, float* out, int64_t out_ld, __mmask16 columns) {
  if constexpr (R > 0) {
    if (a.m - r0 == R) return PanelRows<R, kZeros, kBits>(panel, p, a, r0, out, out_ld, columns);
    PanelTail<kZeros, kBits, R - 1>(panel, p, a, r0, out, out_ld, columns);
  }
}

template <bool kZeros, int kBits>
TPC_VNNI void PanelsDot(const uint8_t* panels, const CodePanels& p, int64_t first, int64_t count,
                        const Int8Activations& a, float* out, int64_t out_ld) {
  for (int64_t i = first; i < first + count; ++i) {
    const uint8_t* panel = panels + i * p.panel_bytes();
    const __mmask16 columns = PanelColumns(p, i);
    float* y = out + i * CodePanels::kColumns;
    int64_t r0 = 0;
    for (; r0 + kPanelRows <= a.m; r0 += kPanelRows)
      PanelRows<kPanelRows, kZeros, kBits>(panel, p, a, r0, y, out_ld, columns);
    if (r0 < a.m) PanelTail<kZeros, kBits>(panel, p, a, r0, y, out_ld, columns);
  }
}

}  // namespace
#endif  // __x86_64__

bool HasInt8Dot() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return has;
#else
  return false;
#endif
}

void Int8Activations::Resize(int64_t rows, int64_t cols, int64_t block_size) {
  TPC_CHECK(block_size % 16 == 0 && cols % block_size == 0);
  m = rows;
  k = cols;
  block = block_size;
  stride = (k + 63) / 64 * 64;
  q.resize(static_cast<size_t>(m * stride));
  scales.resize(static_cast<size_t>(m * (k / block)));
  sums.resize(scales.size());
}

void QuantizeInt8Activations(const float* a, int64_t first, int64_t count, Int8Activations* out) {
  TPC_CHECK(HasInt8Dot());
  const int64_t blocks = out->k / out->block;
#if defined(__x86_64__)
  for (int64_t r = first; r < first + count; ++r) {
    QuantizeRow(a + r * out->k, out->k, out->block, out->q.data() + r * out->stride,
                out->scales.data() + r * blocks, out->sums.data() + r * blocks);
  }
#else
  (void)a, (void)first, (void)count, (void)blocks;
#endif
}

void PackCodePanels(const uint8_t* codes, const float* scales, const uint8_t* packed_zeros,
                    int64_t packed_stride, const CodePanels& p, int64_t first, int64_t count,
                    uint8_t* out) {
  TPC_CHECK(HasInt8Dot() && (p.bits == 4 || p.bits == 8) && p.block % 16 == 0 &&
            p.k % p.block == 0);
#if defined(__x86_64__)
  PackPanels(codes, scales, packed_zeros, packed_stride, p, first, count, out);
#else
  (void)codes, (void)scales, (void)packed_zeros, (void)packed_stride, (void)p, (void)first,
      (void)count, (void)out;
#endif
}

void Int8PanelsDot(const uint8_t* panels, const CodePanels& layout, int64_t first, int64_t count,
                   const Int8Activations& a, float* out, int64_t out_ld) {
  TPC_CHECK(HasInt8Dot() && (layout.bits == 4 || layout.bits == 8));
#if defined(__x86_64__)
  const bool eight = layout.bits == 8;
  if (layout.zero_points) {
    (eight ? PanelsDot<true, 8> : PanelsDot<true, 4>)(panels, layout, first, count, a, out, out_ld);
  } else {
    (eight ? PanelsDot<false, 8> : PanelsDot<false, 4>)(panels, layout, first, count, a, out,
                                                        out_ld);
  }
#else
  (void)panels, (void)layout, (void)first, (void)count, (void)a, (void)out, (void)out_ld;
#endif
}

template <typename T>
void Int8RoundRows(const T* a, int64_t m, int64_t k, int64_t block, T* rounded) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (HasInt8Dot() && block % 16 == 0 && k % block == 0) {
      for (int64_t r = 0; r < m; ++r) RoundRow512(a + r * k, k, block, rounded + r * k);
      return;
    }
  }
#endif
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t k0 = 0; k0 < k; k0 += block) {
      const T* src = a + r * k + k0;
      T* dst = rounded + r * k + k0;
      const int64_t len = std::min(block, k - k0);
      const math::Int8Block b =
          math::Int8BlockOf([src](int64_t i) { return static_cast<float>(src[i]); }, len);
      for (int64_t i = 0; i < len; ++i) {
        dst[i] = static_cast<T>(math::Int8Rounded(static_cast<float>(src[i]), b));
      }
    }
  }
}
template void Int8RoundRows(const float*, int64_t, int64_t, int64_t, float*);
template void Int8RoundRows(const double*, int64_t, int64_t, int64_t, double*);

}  // namespace tpc::runtime::cpu
