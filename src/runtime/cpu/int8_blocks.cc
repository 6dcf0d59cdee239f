#include "int8_blocks.h"

#include <algorithm>
#include <array>
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

enum Int8Zero { kInt8Zero8, kInt8ZeroNibbles };

// Int8RoundRows' row of k values (blocks of `block`, a multiple of 16), 16 lanes at a time:
// each value's code (as QuantizeRow's) times its block's scale.
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
// order into `codes`, each block's scale into scale[b] and scale · Σ codes into sums[b]:
// math::Int8BlockOf's and math::Int8Code's values, 16 lanes at a time (vcvtps2dq rounds
// half to even, as rintf does; a non-finite block's codes come out 0, as Int8Code's).
TPC_VNNI void QuantizeRow(const float* row, int64_t k, int64_t block, int8_t* codes, float* scale,
                          float* sums) {
  for (int64_t b = 0; b * block < k; ++b) {
    const float* src = row + b * block;
    const math::Int8Block blk = Int8Block512(src, block);
    const __m512 inverse = _mm512_set1_ps(blk.inverse);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t i = 0; i < block; i += 16) {
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(src + i), inverse));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + b * block + i), _mm512_cvtepi32_epi8(q));
      sum = _mm512_add_epi32(sum, q);
    }
    scale[b] = blk.scale;
    sums[b] = blk.scale * static_cast<float>(_mm512_reduce_add_epi32(sum));
  }
}

struct Int4Weight {
  const uint8_t* codes;
  const float* scales;
  const uint8_t* packed_zeros;
  int64_t packed_stride;
  int64_t blocks;
};

// The lane sums of four vectors: {Σ a, Σ b, Σ c, Σ d}.
TPC_VNNI inline __m128 Sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // Quarters (4 lanes) of a and b folded in two: [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  // Quarter i: vector i's four lanes' partial sums; then each quarter's lanes added.
  __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), t));
}

// What every step of a column reads the same: the scale pattern, the masks of the last step.
struct StepShape {
  int64_t steps, column_bytes, full_steps;
  int block_shift;  // a.block = 2^block_shift
  __m512i pick;     // lane -> the step's block (0 to 3) of its scale
  __mmask16 full_scales, tail_scales;
  int64_t tail_bytes;
};

TPC_VNNI inline StepShape ShapeOf(const Int8Rows& a) {
  StepShape s;
  s.steps = a.stride / 128;
  s.column_bytes = a.k / 2;
  s.full_steps = s.column_bytes / 64;
  s.tail_bytes = s.column_bytes % 64;
  s.block_shift = 0;
  while ((int64_t{1} << s.block_shift) < a.block) ++s.block_shift;
  // A step's block scales: its runs of 32 codes (lane / 4) in blocks of a.block, from the
  // step's first block (blocks of 32, 64, 128, ...: 4, 2 or 1 scales).
  const int64_t step_blocks = std::max<int64_t>(1, 128 / a.block);
  s.pick = a.block == 32   ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
           : a.block == 64 ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                           : _mm512_setzero_si512();
  s.full_scales = static_cast<__mmask16>((1u << step_blocks) - 1);
  // The last step may hold 1 to 3 runs of 32 codes: its bytes and scales past K masked.
  s.tail_scales =
      static_cast<__mmask16>((1u << std::max<int64_t>(1, s.tail_bytes * 2 / a.block)) - 1);
  return s;
}

// Step t of one column (its codes and scales) against rows r0 .. r0 + R - 1, into acc.
template <int R, Int8Zero ZK>
TPC_VNNI __attribute__((always_inline)) inline void Int8Step(const StepShape& s,
                                                             const uint8_t* codes,
                                                             const float* scales, const Int8Rows& a,
                                                             int64_t r0, int64_t t,
                                                             __m512 (&acc)[R]) {
  const bool tail = t == s.full_steps;
  const __mmask64 code_mask = tail ? (__mmask64{1} << s.tail_bytes) - 1 : ~__mmask64{0};
  const uint8_t* p = codes + 64 * t;
  __builtin_prefetch(p + 2048);  // 2 KiB ahead, as Int4ColumnsDot
  const __m512i low = _mm512_set1_epi8(15);
  const __m512i x = _mm512_maskz_loadu_epi8(code_mask, p);
  const __m512i lo = _mm512_and_si512(x, low);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
  const __m512 sb =
      _mm512_permutexvar_ps(s.pick, _mm512_maskz_loadu_ps(tail ? s.tail_scales : s.full_scales,
                                                          scales + ((128 * t) >> s.block_shift)));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const int8_t* q = a.q.data() + (r0 + r) * a.stride + 128 * t;
    const int64_t lanes = ((r0 + r) * s.steps + t) * 16;
    const __m512i d =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(q)),
                            hi, _mm512_load_si512(q + 64));
    const __m512 as = _mm512_load_ps(a.lane_scales.data() + lanes);
    if constexpr (ZK == kInt8Zero8) {  // (scale_a · d - the zero point's share) · scale_w
      const __m512 zs = _mm512_load_ps(a.lane_zero_share.data() + lanes);
      acc[r] = _mm512_fmadd_ps(_mm512_fmsub_ps(as, _mm512_cvtepi32_ps(d), zs), sb, acc[r]);
    } else {
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(as, sb), acc[r]);
    }
  }
}

// Rows r0 .. r0 + R - 1 of `a` against columns c0 .. c0 + C - 1 of `w`, a column after
// the other: the codes are read in their order, one stream. Four columns at once (512
// bytes apart at K = 1024, sharing A's loads) ran at 12 GB/s from memory on one core of
// the 2-vCPU EPYC, one at a time at 21 (bench_nbits --copies=48 --huge: 91 MiB of
// weights, more than the 32 MiB L3); with weights that stay in L3 (--copies=8) four at
// once were faster, 0.060 against 0.080 ms a call. A decode step streams the whole model's
// weights: one at a time. Each column's steps alternate between two accumulators, its
// sums then added; the tile's columns' sums together (Sum4).
template <int R, int C, Int8Zero ZK>
TPC_VNNI inline void Int8Tile(const Int4Weight& w, int64_t c0, const Int8Rows& a, int64_t r0,
                              float* out, int64_t out_ld) {
  const StepShape s = ShapeOf(a);
  __m512 acc[R][C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    const uint8_t* codes = w.codes + (c0 + c) * s.column_bytes;
    const float* scales = w.scales + (c0 + c) * w.blocks;
    __m512 even[R], odd[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 1 < s.steps; t += 2) {
      Int8Step<R, ZK>(s, codes, scales, a, r0, t, even);
      Int8Step<R, ZK>(s, codes, scales, a, r0, t + 1, odd);
    }
    if (t < s.steps) Int8Step<R, ZK>(s, codes, scales, a, r0, t, even);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][c] = _mm512_add_ps(even[r], odd[r]);
  }
  // Packed zero points' share: Σ_b sums(r, b) · scale(c, b) · zero(c, b), 16 blocks a
  // vector.
  if constexpr (ZK == kInt8ZeroNibbles) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const int64_t col = c0 + c;
      for (int64_t b0 = 0; b0 < w.blocks; b0 += 16) {
        const int64_t n = std::min<int64_t>(16, w.blocks - b0);
        const __mmask16 mask = static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
        const int64_t bytes = (n + 1) / 2;
        const __m128i raw = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << bytes) - 1),
                                                 w.packed_zeros + col * w.packed_stride + b0 / 2);
        const __m128i nibble = _mm_set1_epi8(15);
        const __m128i ordered = _mm_unpacklo_epi8(_mm_and_si128(raw, nibble),
                                                  _mm_and_si128(_mm_srli_epi16(raw, 4), nibble));
        const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(ordered));
        const __m512 sz =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, w.scales + col * w.blocks + b0), z);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512 sums = _mm512_load_ps(a.sums.data() + (r0 + r) * a.padded_blocks + b0);
          acc[r][c] = _mm512_fnmadd_ps(sums, sz, acc[r][c]);
        }
      }
    }
  }
  // One horizontal sum per row and column; four columns at once (adjacent outputs).
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float* y = out + (r0 + r) * out_ld + c0;
    if constexpr (C == 4) {
      _mm_storeu_ps(y, Sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    } else {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) y[c] = _mm512_reduce_add_ps(acc[r][c]);
    }
  }
}

// Columns c0 .. c0 + C - 1 against every row, 4 rows at a time: the tile's codes stay in
// the core's caches while the groups of rows read them (more rows than 4 read the weight
// from memory once, not once per group).
template <int C, Int8Zero ZK>
TPC_VNNI void Int8ColumnsAllRows(const Int4Weight& w, int64_t c0, const Int8Rows& a, float* out,
                                 int64_t out_ld) {
  for (int64_t r0 = 0; r0 < a.m; r0 += 4) {
    switch (std::min<int64_t>(4, a.m - r0)) {
      case 1:
        Int8Tile<1, C, ZK>(w, c0, a, r0, out, out_ld);
        break;
      case 2:
        Int8Tile<2, C, ZK>(w, c0, a, r0, out, out_ld);
        break;
      case 3:
        Int8Tile<3, C, ZK>(w, c0, a, r0, out, out_ld);
        break;
      default:
        Int8Tile<4, C, ZK>(w, c0, a, r0, out, out_ld);
        break;
    }
  }
}

// Columns [0, cols): 4 a tile (their sums together), then one by one.
template <Int8Zero ZK>
TPC_VNNI void Int8Columns(const Int4Weight& w, int64_t cols, const Int8Rows& a, float* out,
                          int64_t out_ld) {
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) Int8ColumnsAllRows<4, ZK>(w, c, a, out, out_ld);
  for (; c < cols; ++c) Int8ColumnsAllRows<1, ZK>(w, c, a, out, out_ld);
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

void QuantizeInt8Rows(const float* a, int64_t m, int64_t k, int64_t block, Int8Rows* out) {
  TPC_CHECK(HasInt8Dot() && block % 32 == 0 && k % block == 0);
  const int64_t blocks = k / block;
  out->m = m;
  out->k = k;
  out->block = block;
  out->stride = (k + 127) / 128 * 128;
  out->padded_blocks = (blocks + 15) / 16 * 16;
  const int64_t steps = out->stride / 128;
  out->q.resize(static_cast<size_t>(m * out->stride));
  out->lane_scales.resize(static_cast<size_t>(m * steps * 16));
  out->lane_zero_share.resize(static_cast<size_t>(m * steps * 16));
  out->sums.resize(static_cast<size_t>(m * out->padded_blocks));
  // Where code i of a step goes: even or odd, then its run of 32, then its place in the run.
  static const auto place = [] {
    std::array<uint8_t, 128> p{};
    for (int i = 0; i < 128; ++i)
      p[i] = static_cast<uint8_t>((i % 2) * 64 + (i / 32) * 16 + (i % 32) / 2);
    return p;
  }();
  std::vector<int8_t> codes(static_cast<size_t>(out->stride), 0);
  std::vector<float> scale(static_cast<size_t>(blocks));
  for (int64_t r = 0; r < m; ++r) {
    float* sums = out->sums.data() + r * out->padded_blocks;
#if defined(__x86_64__)
    QuantizeRow(a + r * k, k, block, codes.data(), scale.data(), sums);
#endif
    std::fill(sums + blocks, sums + out->padded_blocks, 0.0f);
    int8_t* q = out->q.data() + r * out->stride;
    for (int64_t t = 0; t < steps; ++t) {
      for (int i = 0; i < 128; ++i)
        q[128 * t + place[static_cast<size_t>(i)]] = codes[static_cast<size_t>(128 * t + i)];
    }
    float* lanes = out->lane_scales.data() + r * steps * 16;
    float* shares = out->lane_zero_share.data() + r * steps * 16;
    const float per_lane = 64.0f / static_cast<float>(block);  // 8 · 8 / block
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t lane = 0; lane < 16; ++lane) {
        const int64_t first = 128 * t + 32 * (lane / 4);  // the lane's run of 32 codes
        const bool in = first < k;
        lanes[t * 16 + lane] = in ? scale[static_cast<size_t>(first / block)] : 0.0f;
        shares[t * 16 + lane] = in ? sums[first / block] * per_lane : 0.0f;
      }
    }
  }
}

void Int8Int4ColumnsDot(const uint8_t* codes, const float* scales, const uint8_t* packed_zeros,
                        int64_t packed_stride, int64_t cols, const Int8Rows& a, float* out,
                        int64_t out_ld) {
  TPC_CHECK(HasInt8Dot());
#if defined(__x86_64__)
  const Int4Weight w{codes, scales, packed_zeros, packed_stride, a.k / a.block};
  if (packed_zeros != nullptr) {
    Int8Columns<kInt8ZeroNibbles>(w, cols, a, out, out_ld);
  } else {
    Int8Columns<kInt8Zero8>(w, cols, a, out, out_ld);
  }
#else
  (void)codes, (void)scales, (void)packed_zeros, (void)packed_stride, (void)cols, (void)a,
      (void)out, (void)out_ld;
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
