// The hottest f32 loops of the CPU kernels, compiled three times (AVX-512, AVX2 and the
// x86-64 baseline; gcc's target_clones picks one when the library loads), so that the
// exp-based activations and the softmax run at the width of the machine while the rest
// of the build stays baseline x86-64. The per-element math is vector_math.h's, the same
// in every clone (fused and unfused runs agree to rounding).
#pragma once

#include <cstdint>

// A function compiled for each of the three (gcc's target_clones); also for a kernel's own
// hot loop that lives with its kernel (LinearAttention's recurrence).
#if defined(__x86_64__) && !defined(TPC_NO_TARGET_CLONES)
#define TPC_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TPC_ISA_CLONES
#endif

namespace tpc::runtime::cpu {

enum class Activation { kNone, kGelu, kGeluTanh, kRelu, kTanh, kSigmoid, kSiLU };

// y[r·ld + j] = act(y[r·ld + j] + bias[j]) for r < rows, j < cols (bias may be null).
void ActivationRows(Activation act, float* y, int64_t rows, int64_t ld, int64_t cols,
                    const float* bias);
// y[i] = act(x[i]) for i < n (y may be x).
void ActivationCopy(Activation act, const float* x, float* y, int64_t n);
// (Log)softmax of `rows` contiguous rows of n.
void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log);
// Attention's rows in place: s = s / divisor (when divisor != 1) + mask, then softmax;
// the mask row r starts at mask + r·mask_row and steps mask_col (null: no mask).
void ScaleMaskSoftmaxRows(float* s, int64_t rows, int64_t n, float divisor, const float* mask,
                          int64_t mask_row, int64_t mask_col);

// `cols` columns of a 4-bit MatMulNBits against `rows` rows of A: out[r·out_ld + c] =
// Σ_b scale(c, b) · Σ_j (code(c, b, j) - zero(c, b)) · a_r(b, j) over `blocks` blocks of
// 2·half codes (half a multiple of 16). Column c's packed bytes (low nibble first) are at
// codes + c·blocks·half, its scales at scales + c·blocks; zero(c, b): zeros[c·blocks + b],
// else nibble b of packed_zeros + c·packed_stride, else 8. a_pairs: row r at r·a_stride,
// rearranged per block as its `half` even-indexed values, then its `half` odd ones
// (EvenOddPairs). One row (a decode step) takes two columns at a time, sharing A's loads.
void Int4ColumnsDot(const uint8_t* codes, const float* scales, const float* zeros,
                    const uint8_t* packed_zeros, int64_t packed_stride, int64_t cols,
                    int64_t blocks, int64_t half, const float* a_pairs, int64_t a_stride,
                    int64_t rows, float* out, int64_t out_ld);

// c[i·n + j] = Σ_p a[i·k + p] · b[p·n + j] for i < m, j < n: a product too small for a
// BLAS call's set-up to pay (a decode step's [1, 1024] · [1024, 8] gate projections:
// OpenBLAS took 18-30 µs a call), the columns of a row of b a vector at a time.
void SmallGemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

// dst[r·dst_ld + j] = src[r·src_ld + j] as f32 for r < rows, j < cols, src bf16 (`bf16`)
// or f16: exactly HalfToFloat's and BFloat16ToFloat's values (NaN payloads kept), 16
// lanes at a time.
void HalfBlockToFloat(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                      int64_t dst_ld, bool bf16);

// dst[i] = src[i] as f16 or bf16 (`bf16`) for i < n: exactly FloatToHalf's and
// FloatToBFloat16's values (round to nearest even, overflow to infinity, NaN kept quiet),
// 16 lanes at a time.
void FloatToHalfBlock(const float* src, int64_t n, uint16_t* dst, bool bf16);

// Rows of A (m × k, k a multiple of `block`) rearranged into `out` for Int4ColumnsDot's
// a_pairs: per block of `block` values, its even-indexed values, then its odd ones (the
// order of the low and high nibbles of the block's codes).
void EvenOddPairs(const float* a, int64_t m, int64_t k, int64_t block, float* out);

// Int4ColumnsDot's columns, dequantized: w[c·ld + ...] = (code - zero) · scale
// for column c at codes + c·code_stride (its scales at scales + c·blocks, zero points
// likewise, packed ones at packed_zeros + c·packed_stride), in the same per-block order
// of even then odd codes that a_pairs has, so that a row of A rearranged so dots with it.
void Int4DequantizeColumns(const uint8_t* codes, int64_t code_stride, const float* scales,
                           const float* zeros, const uint8_t* packed_zeros, int64_t packed_stride,
                           int64_t blocks, int64_t half, int64_t cols, float* w, int64_t ld);

// f32 rows against whole int4 blocks: up to this many read the codes directly
// (Int4ColumnsDot); from 4 rows the dequantized tiles (RowColumnDots) are faster. A decode
// step of the bench model (6-layer int4 Llama shape, 2 threads), direct against tiles:
// 1 row 17 against 25 ms, 3 rows 27 against 33, 4 rows 38–41 against 31–32, 8 rows 73
// against 41. MatMulNBits' rows, a QMoE expert's tokens.
constexpr int64_t kInt4DirectRows = 3;
// Rows of A multiplied by a tile of weights in one RowColumnDots pass: 64 · K floats
// (512 KiB at K = 2048) stay in the core's cache beside the tile.
constexpr int64_t kDotRows = 64;

// c[i·ldc + j] = Σ_p a[i·lda + p] · w[j·ldw + p] over p < k, for i < m and j < n: rows of A
// against rows of W, both contiguous along k (a multiple of 16), each product a register
// tile of rows × columns with vectors along k (AVX-512: 4 × 4 of 16 lanes; AVX2: 2 × 4 of
// 8). For a few rows against a tile of dequantized weights that stays in the core's
// cache: the BLAS would repack both for every tile.
void RowColumnDots(const float* a, int64_t lda, int64_t m, const float* w, int64_t ldw, int64_t n,
                   int64_t k, float* c, int64_t ldc);
// RowColumnDots in vectors of `lanes` floats (16: AVX-512, 8: AVX2, 4: the baseline) for
// tests of every variant on one machine; false when this CPU has no such variant.
bool RowColumnDotsOfWidth(int lanes, const float* a, int64_t lda, int64_t m, const float* w,
                          int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc);

}  // namespace tpc::runtime::cpu
