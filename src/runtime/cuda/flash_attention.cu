// tpc::AttentionCore by tiles of keys on the tensor cores (WMMA), for f16 and bf16: the
// scores of 16 query rows × 32 keys at a time live in shared memory, never in global
// memory (the untiled path writes all [s, t] of them in f32, reads them, and writes and
// reads P). The math of a row is math/flash.h's online softmax (host-tested against the
// whole row's softmax); this file maps threads to it.
//
// Mapping. A block is W warps; warp w owns query rows row0 .. row0 + 15 of one batch
// entry (blockIdx.y), row0 = (blockIdx.x · W + w) · 16. Its Q rows (zero past s and past
// d), its f32 accumulator [16, D] and its rows' running max and sum sit in shared memory
// of its own. For each tile of 32 keys the block's threads copy K and V's 32 rows (zero
// past t, d and dv) into shared memory between two __syncthreads (every warp is done with
// the previous tile before it is overwritten, and sees all of the new one). Then each
// warp alone (__syncwarp between the steps, which only its own lanes touch):
//   1. S [16, 32] = Q · Kᵀ by WMMA (f32 accumulation), stored to its S tile;
//   2. two lanes a row (r and r + 16, 16 keys each): the scores (scale, mask:
//      math::AttentionScore, keys past t excluded), the online softmax's steps
//      (OnlineTileMax, OnlineTileTerms, the pair's results combined by __shfl_xor_sync,
//      then OnlineRowUpdate by lane r), the terms rounded to the input type into its P
//      tile (0 past t), the factor into alpha;
//   3. all 32 lanes scale the accumulator's rows by their factor;
//   4. acc += P [16, 32] · V [32, D] by WMMA, loaded from and stored back to shared memory.
// Finally each row's accumulator divided by its sum (OnlineSoftmaxFinish) is stored, rows
// < s and columns < dv only. Every warp runs every tile, also one whose rows are all past
// s (their Q rows are 0; their results are not stored), so each __syncthreads has the
// whole block. WMMA pointers: tiles start at multiples of 16 elements of rows of D (64 or
// 128) or 32 elements, so every fragment pointer is 32-byte aligned and every leading
// dimension a multiple of 8 halves or 4 floats, as load/store_matrix_sync require.
// Shared memory: D = 64 with 4 warps 46.8 KiB, D = 128 with 2 warps 47.4 KiB (under the
// 48 KiB of static shared memory).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/flash.h"

namespace tpc::runtime::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kRows = 16;  // query rows a warp (one WMMA tile)
constexpr int kKeys = 32;  // keys a tile (two WMMA tiles)
constexpr int kFrag = 16;
// Row strides of the S and P tiles: 4 and 8 words past the tile's 32 keys, so that lanes
// 0..15, a row each, fall in different shared-memory banks (32 floats would put them all
// in one). Fragments there still start 32-byte aligned (rows of 144 and 80 bytes, their
// halves at +64 and +32), and the strides are multiples of 4 floats and 8 halves.
constexpr int kSStride = kKeys + 4;
constexpr int kPStride = kKeys + 8;

template <FloatKind K>
struct Wmma;
template <>
struct Wmma<FloatKind::kF16> {
  using T = __half;
};
template <>
struct Wmma<FloatKind::kBF16> {
  using T = __nv_bfloat16;
};

using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// acc += A · B over `steps` WMMA tiles of the inner dim: A row-major (lda), advancing 16
// columns a step; B in layout L (ldb), advancing `b_step` elements a step.
template <typename T, typename L>
__device__ void MmaSteps(Accumulator& acc, const T* a, int lda, const T* b, int ldb, int b_step,
                         int steps) {
  for (int i = 0; i < steps; ++i) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, L> fb;
    wmma::load_matrix_sync(fa, a + i * kFrag, lda);
    wmma::load_matrix_sync(fb, b + i * b_step, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

template <FloatKind K, int D, int W>
__global__ void __launch_bounds__(W * 32) FlashAttentionKernel(FlashAttention p) {
  using IO = math::FloatIO<K>;
  using T = typename Wmma<K>::T;
  __shared__ __align__(32) T q_s[W][kRows][D];
  __shared__ __align__(32) T k_s[kKeys][D];
  __shared__ __align__(32) T v_s[kKeys][D];
  __shared__ __align__(32) float s_s[W][kRows][kSStride];
  __shared__ __align__(32) T p_s[W][kRows][kPStride];
  __shared__ __align__(32) float o_s[W][kRows][D];
  __shared__ math::OnlineRow rows_s[W][kRows];
  __shared__ float alpha_s[W][kRows];

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t b = blockIdx.y;  // the batch entry
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * W + warp) * kRows;
  const math::FlashEntry at =
      math::FlashEntryOffsets(b, p.fold, p.s, p.d, p.dv, p.q_stride, p.k_stride, p.v_stride);
  const uint16_t* q = static_cast<const uint16_t*>(p.q) + at.q;
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + at.k;
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + at.v;
  const uint16_t* mask = static_cast<const uint16_t*>(p.mask);
  uint16_t* y = static_cast<uint16_t*>(p.y) + at.y;
  // The dims the products run over: d and dv rounded up to whole WMMA tiles.
  const int dp = static_cast<int>((p.d + kFrag - 1) / kFrag * kFrag);
  const int dvp = static_cast<int>((p.dv + kFrag - 1) / kFrag * kFrag);

  uint16_t* q_bits = reinterpret_cast<uint16_t*>(&q_s[warp][0][0]);
  float* o = &o_s[warp][0][0];
  for (int i = lane; i < kRows * D; i += 32) {
    const int r = i / D, c = i % D;
    q_bits[i] = row0 + r < p.s && c < p.d ? q[(row0 + r) * p.d + c] : uint16_t{0};
    o[i] = 0.0f;
  }
  if (lane < kRows) rows_s[warp][lane] = math::OnlineRow{-INFINITY, 0.0f};
  __syncwarp();

  uint16_t* k_bits = reinterpret_cast<uint16_t*>(&k_s[0][0]);
  uint16_t* v_bits = reinterpret_cast<uint16_t*>(&v_s[0][0]);
  for (int64_t j0 = 0; j0 < p.t; j0 += kKeys) {
    __syncthreads();  // every warp is done with the previous tile's K and V
    for (int i = static_cast<int>(threadIdx.x); i < kKeys * D; i += W * 32) {
      // Consecutive threads read consecutive elements: along d in K [t, d] and V, along
      // the keys in Kᵀ [d, t].
      const int j = p.k_transposed ? i % kKeys : i / D, c = p.k_transposed ? i / kKeys : i % D;
      const int64_t key = j0 + j;
      k_bits[j * D + c] = key < p.t && c < p.d
                              ? k[math::KeyElement(p.k_transposed, key, c, p.t, p.d)]
                              : uint16_t{0};
      const int jv = i / D, cv = i % D;
      v_bits[i] = j0 + jv < p.t && cv < p.dv ? v[(j0 + jv) * p.dv + cv] : uint16_t{0};
    }
    __syncthreads();

    // 1. S = Q·Kᵀ: A = Q rows [16, dp] row-major; B(c, j) = K[j][c], column-major.
    for (int n = 0; n < kKeys; n += kFrag) {
      Accumulator acc;
      wmma::fill_fragment(acc, 0.0f);
      MmaSteps<T, wmma::col_major>(acc, &q_s[warp][0][0], D, &k_s[n][0], D, kFrag, dp / kFrag);
      wmma::store_matrix_sync(&s_s[warp][0][n], acc, kSStride, wmma::mem_row_major);
    }
    __syncwarp();

    // 2. Two lanes a row, r and r + 16, each 16 of the tile's keys: scores, the online
    //    softmax (the pair's maxima and sums combined by shuffles between its steps), P;
    //    lane r updates the row once both have read its running max.
    const int64_t n = p.t - j0 < kKeys ? p.t - j0 : kKeys;
    {
      const int r = lane % kRows;
      const int64_t lo = static_cast<int64_t>(lane / kRows) * (kKeys / 2);
      const int64_t hi = lo + kKeys / 2 < n ? lo + kKeys / 2 : n;
      const int64_t mine = hi > lo ? hi - lo : 0;
      const int64_t row = row0 + r;
      float* sr = &s_s[warp][r][0];
      const uint16_t* m =
          mask != nullptr && row < p.s ? mask + p.mask_rows.At(b * p.s + row) : nullptr;
      for (int64_t j = lo; j < hi; ++j) {
        const float add = m != nullptr ? IO::Load(m[(j0 + j) * p.mask_col]) : 0.0f;
        sr[j] = math::AttentionScore(sr[j] * p.alpha, p.divisor, add);
      }
      float max = math::OnlineTileMax(rows_s[warp][r].max, sr + lo, mine);
      max = math::CombineMax(max, __shfl_xor_sync(0xffffffffu, max, kRows));
      float sum = math::OnlineTileTerms(max, sr + lo, mine);
      sum += __shfl_xor_sync(0xffffffffu, sum, kRows);
      uint16_t* pr = reinterpret_cast<uint16_t*>(&p_s[warp][r][0]);
      for (int64_t j = lo; j < lo + kKeys / 2; ++j) pr[j] = j < n ? IO::Store(sr[j]) : uint16_t{0};
      __syncwarp();
      if (lane < kRows) alpha_s[warp][r] = math::OnlineRowUpdate(rows_s[warp][r], max, sum);
    }
    __syncwarp();

    // 3. The accumulator's rows scaled by their factor.
    for (int i = lane; i < kRows * D; i += 32) o[i] *= alpha_s[warp][i / D];
    __syncwarp();

    // 4. acc += P·V: A = P [16, 32] row-major, B = V rows [32, dvp] row-major.
    for (int c = 0; c < dvp; c += kFrag) {
      Accumulator acc;
      wmma::load_matrix_sync(acc, &o_s[warp][0][c], D, wmma::mem_row_major);
      MmaSteps<T, wmma::row_major>(acc, &p_s[warp][0][0], kPStride, &v_s[0][c], D, kFrag * D,
                                   kKeys / kFrag);
      wmma::store_matrix_sync(&o_s[warp][0][c], acc, D, wmma::mem_row_major);
    }
    __syncwarp();
  }

  for (int i = lane; i < kRows * D; i += 32) {
    const int r = i / D, c = i % D;
    const int64_t row = row0 + r;
    if (row < p.s && c < p.dv) {
      y[row * p.dv + c] = IO::Store(math::OnlineSoftmaxFinish(o[i], rows_s[warp][r]));
    }
  }
}

template <FloatKind K, int D, int W>
cudaError_t Flash(const FlashAttention& p, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(W) * kRows;
  const dim3 grid(static_cast<unsigned>((p.s + rows - 1) / rows), static_cast<unsigned>(p.count));
  FlashAttentionKernel<K, D, W><<<grid, W * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool FlashAttentionFits(const FlashAttention& p) {
  return p.s > 0 && p.t > 0 && p.d > 0 && p.dv > 0 && p.d <= 128 && p.dv <= 128 && p.count > 0 &&
         p.count <= 65535 && (p.s + 15) / 16 <= 2147483647 && p.fold > 0;
}

cudaError_t LaunchFlashAttention(FloatKind k, const FlashAttention& p, cudaStream_t stream) {
  if (!FlashAttentionFits(p)) return cudaErrorInvalidValue;
  const bool narrow = p.d <= 64 && p.dv <= 64;
  switch (k) {
    case FloatKind::kF16:
      return narrow ? Flash<FloatKind::kF16, 64, 4>(p, stream)
                    : Flash<FloatKind::kF16, 128, 2>(p, stream);
    case FloatKind::kBF16:
      return narrow ? Flash<FloatKind::kBF16, 64, 4>(p, stream)
                    : Flash<FloatKind::kBF16, 128, 2>(p, stream);
    case FloatKind::kF32:
      break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
