// Launches of MatMulNBits: at accuracy_level 4 first A rounded to int8 per block
// (Int8RoundKernel); then for a few rows (a decode step) a GEMV that reads the codes
// once (GemvKernel, its mapping below); otherwise the weight dequantized, one thread per
// element (n, k) in a grid-stride loop writing w[n · K + k], for cuBLAS's GEMM
// (matmul_ops.cc). And GatherBlockQuantized's rows of such a weight (GatherRowsKernel). The
// arithmetic is math/nbits.h's.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void DequantKernel(math::NBitsLayout l, const uint8_t* b,
                              const typename FloatIO<K>::Storage* scales, const uint8_t* zp_packed,
                              const typename FloatIO<K>::Storage* zp_float,
                              typename FloatIO<K>::Storage* w) {
  using IO = FloatIO<K>;
  const int64_t total = l.n * l.k;
  const int64_t blocks = l.blocks();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / l.k, k = i - n * l.k;
    const int64_t at = n * blocks + k / l.block_size;
    const float zp = zp_float != nullptr ? IO::Load(zp_float[at]) : 0.0f;
    w[i] = IO::Store(
        math::NBitsWeight(l, b, n, k, IO::Load(scales[at]), zp_packed, zp_float != nullptr, zp));
  }
}

template <FloatKind K>
cudaError_t Dequant(const math::NBitsLayout& l, const uint8_t* b, const void* scales,
                    const uint8_t* zp_packed, const void* zp_float, void* w, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t total = l.n * l.k;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  DequantKernel<K><<<static_cast<unsigned>(blocks > 65536 ? 65536 : blocks), kThreads, 0, stream>>>(
      l, b, static_cast<const S*>(scales), zp_packed, static_cast<const S*>(zp_float),
      static_cast<S*>(w));
  return cudaGetLastError();
}

// accuracy_level 4's rounding: one thread per (row, block) of A in a grid-stride loop
// (i = row · blocks + block), reading the block's values twice (its largest magnitude, then
// each value rounded: math::Int8BlockOf, math::Int8Rounded) and writing its own block of
// `rounded` only. K's last block may be partial (len). Decode steps have a few rows: the
// threads' strided reads are not coalesced, which this small pass can afford.
template <FloatKind K>
__global__ void Int8RoundKernel(int64_t rows, int64_t cols, int64_t block,
                                const typename FloatIO<K>::Storage* a,
                                typename FloatIO<K>::Storage* rounded) {
  using IO = FloatIO<K>;
  const int64_t blocks = (cols + block - 1) / block, total = rows * blocks;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / blocks, blk = i - row * blocks;
    const int64_t first = row * cols + blk * block;
    const int64_t len = (blk + 1) * block <= cols ? block : cols - blk * block;
    const typename IO::Storage* src = a + first;
    const math::Int8Block b = math::Int8BlockOf([src](int64_t j) { return IO::Load(src[j]); }, len);
    for (int64_t j = 0; j < len; ++j) {
      rounded[first + j] = IO::Store(math::Int8Rounded(IO::Load(src[j]), b));
    }
  }
}

template <FloatKind K>
cudaError_t Int8Round(int64_t rows, int64_t cols, int64_t block, const void* a, void* rounded,
                      cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t total = rows * ((cols + block - 1) / block);
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  Int8RoundKernel<K>
      <<<static_cast<unsigned>(blocks > 65536 ? 65536 : blocks), kThreads, 0, stream>>>(
          rows, cols, block, static_cast<const S*>(a), static_cast<S*>(rounded));
  return cudaGetLastError();
}

// The GEMV of a decode step: Y[r, n] = Σ_k A[r, k] · W[n, k] (+ bias[n]) for R rows (1 to
// kGemvRows), the codes read once, never dequantized to memory. Mapping: warp w of block
// b owns column n = b · kWarps + w (a warp past N returns whole, before any shuffle); its
// lanes stride along K: with kWords, 32-bit words of 8 codes (lane l reads words l, l + 32,
// ..., so a warp reads 128 contiguous bytes at a time; a word never straddles a block, the
// blocks being 16 codes and more), else single codes of any width: math::NBitsGemvLane,
// shared with the host test. Each lane keeps R
// partial sums, a butterfly of __shfl_xor_sync over the full warp sums them, and lane 0
// writes the R outputs of its column. Reads: A's R rows (cached: every warp reads them),
// the column's codes, scales and zero points; writes: Y[r, n] only, one lane each.
constexpr int kWarps = 8;

template <FloatKind K, int R, bool kWords>
__global__ void GemvKernel(math::NBitsLayout l, const typename FloatIO<K>::Storage* a,
                           const uint8_t* b, const typename FloatIO<K>::Storage* scales,
                           const uint8_t* zp_packed, const typename FloatIO<K>::Storage* zp_float,
                           const typename FloatIO<K>::Storage* bias,
                           typename FloatIO<K>::Storage* y) {
  using IO = FloatIO<K>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (n >= l.n) return;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  // The lane's part of K (math::NBitsGemvLane, host-tested lane by lane).
  auto param = [](const typename IO::Storage* p) {
    return [p](int64_t i) { return IO::Load(p[i]); };
  };
  math::NBitsGemvLane<R, kWords>(
      l, b, zp_packed, zp_float != nullptr, param(scales), param(zp_float),
      [a, k = l.k](int r, int64_t i) { return IO::Load(a[r * k + i]); }, n, lane, 32, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
  }
  if (lane == 0) {
    const float add = bias != nullptr ? IO::Load(bias[n]) : 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) y[r * l.n + n] = IO::Store(acc[r] + add);
  }
}

template <FloatKind K, int R>
cudaError_t Gemv(const math::NBitsLayout& l, const void* a, const uint8_t* b, const void* scales,
                 const uint8_t* zp_packed, const void* zp_float, const void* bias, void* y,
                 cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const unsigned grid = static_cast<unsigned>((l.n + kWarps - 1) / kWarps);
  // Words: 4-bit codes, K a whole number of words, the codes' base on 4 bytes (each
  // column's codes then are too: blocks · blob is a multiple of 8 bytes).
  const bool words = l.bits == 4 && l.k % 8 == 0 && reinterpret_cast<uintptr_t>(b) % 4 == 0;
  auto launch = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, stream>>>(
        l, static_cast<const S*>(a), b, static_cast<const S*>(scales), zp_packed,
        static_cast<const S*>(zp_float), static_cast<const S*>(bias), static_cast<S*>(y));
    return cudaGetLastError();
  };
  return words ? launch(GemvKernel<K, R, true>) : launch(GemvKernel<K, R, false>);
}

// Gemv<K, rows> for rows in [R, kGemvRows]: one instantiation per row count.
template <FloatKind K, int R = 1>
cudaError_t GemvRows(int64_t rows, const math::NBitsLayout& l, const void* a, const uint8_t* b,
                     const void* scales, const uint8_t* zp_packed, const void* zp_float,
                     const void* bias, void* y, cudaStream_t stream) {
  if (rows == R) return Gemv<K, R>(l, a, b, scales, zp_packed, zp_float, bias, y, stream);
  if constexpr (R < kGemvRows) {
    return GemvRows<K, R + 1>(rows, l, a, b, scales, zp_packed, zp_float, bias, y, stream);
  } else {
    return cudaErrorInvalidValue;
  }
}

// GatherBlockQuantized: one thread per output element i of [T, K] in a grid-stride loop
// (math::NBitsGatherElement: the row indices[i / K], its value k = i % K); an index out of
// range sets *flag to `code` (the first bad launch of a run names its node) and writes 0.
// Reads: the index, one code byte, one scale, one packed zero point; writes y[i] only.
template <FloatKind K, typename Index>
__global__ void GatherRowsKernel(math::NBitsLayout l, const uint8_t* table, const Index* indices,
                                 const typename FloatIO<K>::Storage* scales,
                                 const uint8_t* zp_packed, int64_t total,
                                 typename FloatIO<K>::Storage* y, int* flag, int code) {
  using IO = FloatIO<K>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v;
    if (!math::NBitsGatherElement(
            l, table, indices, [scales](int64_t j) { return IO::Load(scales[j]); }, zp_packed, i,
            &v)) {
      atomicCAS(flag, 0, code);
    }
    y[i] = IO::Store(v);
  }
}

template <FloatKind K, typename Index>
cudaError_t GatherRows(const math::NBitsLayout& l, const uint8_t* table, const void* indices,
                       int64_t n_indices, const void* scales, const uint8_t* zp_packed, void* y,
                       int* flag, int code, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t total = n_indices * l.k;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  GatherRowsKernel<K, Index>
      <<<static_cast<unsigned>(blocks > 65536 ? 65536 : blocks), kThreads, 0, stream>>>(
          l, table, static_cast<const Index*>(indices), static_cast<const S*>(scales), zp_packed,
          total, static_cast<S*>(y), flag, code);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchNBitsGatherRows(FloatKind k, const math::NBitsLayout& l, const uint8_t* table,
                                  const void* indices, bool indices_i64, int64_t n_indices,
                                  const void* scales, const uint8_t* zp_packed, void* y, int* flag,
                                  int code, cudaStream_t stream) {
  if (n_indices * l.k == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind kKind = decltype(kind)::value;
    return indices_i64 ? GatherRows<kKind, int64_t>(l, table, indices, n_indices, scales, zp_packed,
                                                    y, flag, code, stream)
                       : GatherRows<kKind, int32_t>(l, table, indices, n_indices, scales, zp_packed,
                                                    y, flag, code, stream);
  });
}

cudaError_t LaunchNBitsGemv(FloatKind k, int64_t rows, const math::NBitsLayout& l, const void* a,
                            const uint8_t* b, const void* scales, const uint8_t* zp_packed,
                            const void* zp_float, const void* bias, void* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || rows > kGemvRows) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return GemvRows<decltype(kind)::value>(rows, l, a, b, scales, zp_packed, zp_float, bias, y,
                                           stream);
  });
}

cudaError_t LaunchInt8RoundRows(FloatKind k, int64_t rows, int64_t cols, int64_t block,
                                const void* a, void* rounded, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  if (block <= 0) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return Int8Round<decltype(kind)::value>(rows, cols, block, a, rounded, stream);
  });
}

cudaError_t LaunchDequantNBits(FloatKind k, const math::NBitsLayout& l, const uint8_t* b,
                               const void* scales, const uint8_t* zp_packed, const void* zp_float,
                               void* w, cudaStream_t stream) {
  if (l.n * l.k == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return Dequant<decltype(kind)::value>(l, b, scales, zp_packed, zp_float, w, stream);
  });
}

}  // namespace tpc::runtime::cuda
