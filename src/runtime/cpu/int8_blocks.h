// onnxruntime's accuracy_level 4 on the CPU (math/nbits.h: activations rounded to int8 per
// block): rows of A rounded in place of A (any layout, any ISA), and, where the CPU has
// AVX-512 VNNI, the rounded rows' products with whole int4 blocks as integer dot products
// (vpdpbusd: a step of 128 codes is two of them), which is what makes level 4 fast.
#pragma once

#include <cstdint>

#include "line_aligned.h"
#include "tpc/runtime/math/nbits.h"

namespace tpc::runtime::cpu {

// rounded[r · k + j] = math::Int8Rounded(a[r · k + j]) for r < m, j < k, each row cut into
// blocks of `block` along k (the last may be partial). T f32 or f64 (MatMulNBits'
// VisitFloat): the values are read and rounded as f32 and stored as T.
template <typename T>
void Int8RoundRows(const T* a, int64_t m, int64_t k, int64_t block, T* rounded);

// Rows of A as Int8Int4ColumnsDot reads them (QuantizeInt8Rows writes them).
struct Int8Rows {
  int64_t m = 0, k = 0, block = 0;
  int64_t stride = 0;         // k rounded up to 128: a row's codes
  int64_t padded_blocks = 0;  // k / block rounded up to 16
  // [m][stride] int8 codes, each 128 of a row (a step) as the even codes of its four runs of
  // 32 (16 each, in order), then their odd codes: the order of the low nibbles, then the
  // high ones, of the 64 bytes holding the step's int4 codes. Zeros past k.
  AlignedVector<int8_t> q;
  // [m][stride / 128][16]: the scale of the block of each int32 lane of a step's dot
  // product (lane l sums codes of the step's run l / 4 of 32); 0 past k.
  AlignedVector<float> lane_scales;
  // [m][padded_blocks]: scale · Σ codes of each block (0 past the last): the zero points'
  // share, Σ_b sums[b] · scale_w(b) · zero(b).
  AlignedVector<float> sums;
  // [m][stride / 128][16]: that share for the default zero point 8 spread over the block's
  // lanes (block / 8 of them, 8 codes each): sums[b] · 8 · 8 / block (powers of two:
  // exact), so that a weight without zero points subtracts it in the step's own FMA.
  AlignedVector<float> lane_zero_share;
};

// Whether this CPU has AVX-512 VNNI (Int8Int4ColumnsDot's instructions).
bool HasInt8Dot();

// The m rows of A (m × k, whole blocks of `block`, a multiple of 32) rounded into `out`.
void QuantizeInt8Rows(const float* a, int64_t m, int64_t k, int64_t block, Int8Rows* out);

// out[r · out_ld + c] = Σ_b scale_a(r, b) · scale(c, b) · Σ_j q(r, b, j) · (code(c, b, j) -
// zero(c, b)) for r < a.m, c < cols: `cols` columns of a MatMulNBits weight of whole int4
// blocks of a.block (a multiple of 32; column c's packed codes at codes + c · k / 2, its
// scales at scales + c · blocks, its zero points nibble b of packed_zeros + c ·
// packed_stride, or 8 without them; float zero points never come here: onnxruntime
// computes those in f32, math::NBitsInt8Activations) against the rounded rows. Only where
// HasInt8Dot(). A step of 128 codes (64 bytes: their low nibbles and their high ones, two
// vectors of 64 codes) is two vpdpbusd per row into one vector of int32 lanes, 4 per run
// of 32 codes, converted and scaled (the lanes' block scales, A's times the column's) into
// an f32 accumulator; the default zero point's share rides in the same FMA (A's
// lane_zero_share), packed ones are subtracted once per column, 16 blocks a vector; one
// horizontal sum per row and column, four columns' at once.
void Int8Int4ColumnsDot(const uint8_t* codes, const float* scales, const uint8_t* packed_zeros,
                        int64_t packed_stride, int64_t cols, const Int8Rows& a, float* out,
                        int64_t out_ld);

}  // namespace tpc::runtime::cpu
