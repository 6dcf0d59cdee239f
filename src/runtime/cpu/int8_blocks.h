// onnxruntime's accuracy_level 4 on the CPU (math/nbits.h: activations rounded to int8 per
// block): rows of A rounded in place of A (any layout, any ISA), and, where the CPU has
// AVX-512 VNNI, the rounded rows' products with whole blocks of 4- or 8-bit codes as integer dot
// products (vpdpbusd) against the weight rearranged once into panels of 16 columns, which is what
// makes level 4 fast.
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

// Whether this CPU has AVX-512 VNNI (Int8PanelsDot's instructions).
bool HasInt8Dot();

// Rows of A rounded to int8 per block, as Int8PanelsDot reads them.
struct Int8Activations {
  int64_t m = 0, k = 0, block = 0;
  int64_t stride = 0;           // k rounded up to 64: a row's codes
  AlignedVector<int8_t> q;      // [m][stride]: the codes in A's order (math::Int8Code)
  AlignedVector<float> scales;  // [m][k / block]: each block's scale
  AlignedVector<int32_t> sums;  // [m][k / block]: each block's Σ codes

  // Room for m rows of k values in blocks of `block` (a multiple of 16 that divides k).
  void Resize(int64_t rows, int64_t cols, int64_t block_size);
};

// Rows [first, first + count) of A (`a` its first row; out->k values a row) rounded into
// `out` (Resize()d for A). Only where HasInt8Dot().
void QuantizeInt8Activations(const float* a, int64_t first, int64_t count, Int8Activations* out);

// A MatMulNBits weight of 4- or 8-bit codes in whole blocks, rearranged for
// Int8PanelsDot: panels of 16 columns (the last padded with columns of zeros), each its
// blocks one after the other; a block is its codes, 2 · bits · block bytes, then the 16
// columns' scales (f32), then, with zero points, their zero points (int32). 4 bits: each
// 64 bytes hold codes 8g to 8g + 7 of the block for the 16 columns, column l in bytes 4l
// to 4l + 3, byte j with code 8g + j in its low nibble and 8g + 4 + j in its high one; 8
// bits: codes 4g to 4g + 3, byte 4l + j holding code 4g + j. A decode step reads it as one
// stream; each vector of codes multiplies 16 columns at once.
struct CodePanels {
  static constexpr int64_t kColumns = 16;
  int64_t n = 0, k = 0, bits = 4, block = 0;
  bool zero_points = false;
  int64_t panels() const { return (n + kColumns - 1) / kColumns; }
  int64_t blocks() const { return k / block; }
  int64_t block_bytes() const { return 2 * bits * block + 64 + (zero_points ? 64 : 0); }
  int64_t panel_bytes() const { return blocks() * block_bytes(); }
  int64_t bytes() const { return panels() * panel_bytes(); }
};

// Panels [first, first + count) of `layout` (4 or 8 bits; blocks of a multiple of 16 that
// divides k) from MatMulNBits' codes (n × k · bits / 8 bytes), scales (n × k / block) and
// packed zero points (n × packed_stride bytes; null: none, 2^(bits - 1)) into out + first ·
// panel_bytes() (64-byte aligned). Only where HasInt8Dot().
void PackCodePanels(const uint8_t* codes, const float* scales, const uint8_t* packed_zeros,
                    int64_t packed_stride, const CodePanels& layout, int64_t first, int64_t count,
                    uint8_t* out);

// out[r · out_ld + c] = Σ_b scale_a(r, b) · scale(c, b) · Σ_j q(r, b, j) · (code(c, b, j) -
// zero(c, b)) for r < a.m and the columns c of panels [first, first + count) of `panels`
// (PackCodePanels; 64-byte aligned), against A's rounded rows (a.block = layout.block,
// a.k = layout.k). Only where HasInt8Dot(). Per block and up to 8 rows: each 64 bytes of
// codes (4 bits: split into low and high nibbles, two vectors) hold 4 codes of each of 16
// columns, multiplied by the row's 4 codes there, broadcast (vpdpbusd: unsigned codes,
// signed activations), into one int32 lane per column that starts at the zero point's
// share (-zero · Σ codes); then converted and scaled into the column's f32 lane. No
// horizontal sums: lane c is column c's output.
void Int8PanelsDot(const uint8_t* panels, const CodePanels& layout, int64_t first, int64_t count,
                   const Int8Activations& a, float* out, int64_t out_ld);

}  // namespace tpc::runtime::cpu
