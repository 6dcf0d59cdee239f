// Block-quantized weights of onnxruntime's MatMulNBits: the element arithmetic, shared by
// the CPU kernel and a CUDA one.
//
// The weight W is [N, K]; each column n (one output feature) is cut along K into
// blocks of `block_size`, k_blocks = ceil(K / block_size). B is uint8 [N, k_blocks, blob]
// with blob = block_size · bits / 8: the codes of a block, `bits` each, packed low bits
// first. W[n, k] = (code - zero_point) · scale, with one scale (and zero point) per
// (n, block): scales [N, k_blocks] (or flattened), zero points either packed like the
// codes, uint8 [N, ceil(k_blocks · bits / 8)], or in the scales' type [N, k_blocks];
// without zero points 2^(bits - 1).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct NBitsLayout {
  int64_t n = 0, k = 0, bits = 4, block_size = 32;
  TPC_HOST_DEVICE int64_t blocks() const { return (k + block_size - 1) / block_size; }
  TPC_HOST_DEVICE int64_t blob_bytes() const { return block_size * bits / 8; }
  // Bytes of packed zero points per column.
  TPC_HOST_DEVICE int64_t packed_zero_point_bytes() const { return (blocks() * bits + 7) / 8; }
  // Whether the layout is one MatMulNBits supports: 2, 4 or 8 bits (a code never
  // straddles two bytes), a power-of-two block of at least 16.
  TPC_HOST_DEVICE bool valid() const {
    return (bits == 2 || bits == 4 || bits == 8) && block_size >= 16 &&
           (block_size & (block_size - 1)) == 0 && n > 0 && k > 0;
  }
  // log2(block_size) of a valid layout: k >> block_shift() is k's block.
  TPC_HOST_DEVICE int block_shift() const {
    int s = 0;
    while ((int64_t{1} << s) < block_size) ++s;
    return s;
  }
};

// The `index`-th code (of `bits` bits) of a packed run of codes, low bits first.
TPC_HOST_DEVICE inline int UnpackCode(const uint8_t* packed, int64_t index, int64_t bits) {
  const int64_t bit = index * bits;
  return (packed[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

// The first `count` codes of a packed run, as T (4 bits: two per byte, low first).
template <typename T>
TPC_HOST_DEVICE void UnpackCodes(const uint8_t* packed, int64_t count, int64_t bits, T* out) {
  if (bits == 4) {
    for (int64_t j = 0; 2 * j + 1 < count; ++j) {
      out[2 * j] = static_cast<T>(packed[j] & 15);
      out[2 * j + 1] = static_cast<T>(packed[j] >> 4);
    }
    if (count % 2 != 0) out[count - 1] = static_cast<T>(packed[count / 2] & 15);
    return;
  }
  for (int64_t j = 0; j < count; ++j) out[j] = static_cast<T>(UnpackCode(packed, j, bits));
}

// The code of W[n, k].
TPC_HOST_DEVICE inline int NBitsCode(const NBitsLayout& l, const uint8_t* b, int64_t n, int64_t k) {
  const int64_t block = k / l.block_size;
  const uint8_t* blob = b + (n * l.blocks() + block) * l.blob_bytes();
  return UnpackCode(blob, k % l.block_size, l.bits);
}

// The zero point of (n, block) from packed uint8 zero points; 2^(bits - 1) without them.
TPC_HOST_DEVICE inline int NBitsPackedZeroPoint(const NBitsLayout& l, const uint8_t* zero_points,
                                                int64_t n, int64_t block) {
  if (zero_points == nullptr) return 1 << (l.bits - 1);
  return UnpackCode(zero_points + n * l.packed_zero_point_bytes(), block, l.bits);
}

// The zero point of (n, block) as a float: one per block in the scales' type (`zp_float`,
// already loaded), packed codes, or 2^(bits - 1).
TPC_HOST_DEVICE inline float NBitsZero(const NBitsLayout& l, const uint8_t* zp_packed,
                                       bool has_float_zp, float zp_float, int64_t n,
                                       int64_t block) {
  return has_float_zp ? zp_float : static_cast<float>(NBitsPackedZeroPoint(l, zp_packed, n, block));
}

// W[n, k] in f32: the code less the zero point, times the scale, from the block's scale and
// zero point (packed uint8 `zp_packed`, or one float per block `zp_float`, or neither).
TPC_HOST_DEVICE inline float NBitsWeight(const NBitsLayout& l, const uint8_t* b, int64_t n,
                                         int64_t k, float scale, const uint8_t* zp_packed,
                                         bool has_float_zp, float zp_float) {
  const float zp = NBitsZero(l, zp_packed, has_float_zp, zp_float, n, k / l.block_size);
  return (static_cast<float>(NBitsCode(l, b, n, k)) - zp) * scale;
}

// Element i of GatherBlockQuantized's output [T, K] (onnxruntime's, the builder's tied
// int4 embedding: the table is MatMulNBits' weight of l.n rows of l.k values, K whole
// blocks): row indices[i / K] (negative counting from the end), value k = i % K, from the
// row's scales (`scale(j)` loads the j-th of the table's [n, blocks] as a float) and packed
// zero points (or none). False for an index out of range, *value then 0.
template <typename Index, typename LoadScale>
TPC_HOST_DEVICE inline bool NBitsGatherElement(const NBitsLayout& l, const uint8_t* table,
                                               const Index* indices, LoadScale scale,
                                               const uint8_t* zp_packed, int64_t i, float* value) {
  const int64_t t = i / l.k, k = i - t * l.k;
  int64_t row = static_cast<int64_t>(indices[t]);
  if (row < -l.n || row >= l.n) {
    *value = 0.0f;
    return false;
  }
  if (row < 0) row += l.n;
  *value = NBitsWeight(l, table, row, k, scale(row * l.blocks() + k / l.block_size), zp_packed,
                       false, 0.0f);
  return true;
}

// onnxruntime's accuracy_level 4 (its CPU's "int8 compute", MLAS's CompInt8): each block
// of `block_size` activations along K is rounded to int8 codes q = round-half-even(a · 127 /
// amax) with the scale amax / 127 (amax: the block's largest magnitude; both quotients as
// MLAS computes them, so that the codes are its codes), and the block's products are
// scale_a · scale_w · Σ q · (code - zero). tpc states the result as the exact product of the
// weight with the activations q · scale_a ("fake-quantized"), which both backends can
// compute on any path; the CPU's integer kernel (cpu/int8_blocks.h) is the same sum in
// another order. A block holding a NaN or an infinity gets the scale NaN, so that the
// output is NaN as the exact product's would be (MLAS's would not).
struct Int8Block {
  float scale = 0.0f;    // amax / 127 (NaN for a non-finite block)
  float inverse = 0.0f;  // 127 / amax (0 for a block of zeros or a non-finite one)
};

// Whether MatMulNBits rounds its activations to int8: accuracy_level 4 where onnxruntime
// 1.32's CPU has an int8 kernel (MLAS's), i.e. with packed or no zero points (float ones:
// f32), 4 and 8 bits, and 2 bits in blocks of 32 to 128 (checked against it for 2, 4, 8
// bits, blocks of 16 to 256, each kind of zero point). Elsewhere it computes in f32, as
// every other level does.
TPC_HOST_DEVICE inline bool NBitsInt8Activations(const NBitsLayout& l, int64_t accuracy_level,
                                                 bool float_zero_points) {
  if (accuracy_level != 4 || float_zero_points) return false;
  return l.bits != 2 || (l.block_size >= 32 && l.block_size <= 128);
}

// The int8 scale of a block whose largest magnitude is amax (`finite`: no NaN or infinity
// in the block).
TPC_HOST_DEVICE inline Int8Block Int8BlockFromMax(float amax, bool finite) {
  Int8Block b;
  if (!finite) {
    b.scale = __builtin_nanf("");
    return b;
  }
  b.scale = amax / 127.0f;
  b.inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
  // Under 127 / FLT_MAX (about 3.7e-37) the inverse overflows: every code 0, as MLAS's
  // conversion of an infinite or NaN product gives.
  if (!(b.inverse <= 3.4028234663852886e38f)) b.inverse = 0.0f;
  return b;
}

// The int8 scale of the `len` activations a(0 .. len - 1).
template <typename A>
TPC_HOST_DEVICE inline Int8Block Int8BlockOf(A a, int64_t len) {
  float amax = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < len; ++i) {
    const float v = a(i);
    const float m = v < 0.0f ? -v : v;
    finite = finite && m <= 3.4028234663852886e38f;  // false for NaN and infinities
    amax = m > amax ? m : amax;
  }
  return Int8BlockFromMax(amax, finite);
}

// The int8 code of the activation v in a block of that scale: |v · inverse| <= 127.
TPC_HOST_DEVICE inline int Int8Code(float v, const Int8Block& b) {
  const float q = rintf(v * b.inverse);  // the default rounding mode: half to even
  if (!(q == q)) return 0;               // a NaN or an infinity in a non-finite block
  return static_cast<int>(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
}

// The activation v as accuracy_level 4 uses it: its int8 code times the block's scale.
TPC_HOST_DEVICE inline float Int8Rounded(float v, const Int8Block& b) {
  return static_cast<float>(Int8Code(v, b)) * b.scale;
}

// Σ_i (code_i - zero) · a(i) over the 8 codes of a 32-bit word of 4-bit codes, read
// little-endian (as x86 and GPUs load it) so that its nibbles from the lowest are the
// codes in memory order: W[n, k .. k + 7] for the word at byte k / 2 of column n's codes,
// a(i) the activation at k + i. A decoding GEMV's inner step.
template <typename A>
TPC_HOST_DEVICE inline float Int4WordDot(uint32_t word, float zero, A a) {
  float sum = 0.0f;
  for (int i = 0; i < 8; ++i) {
    sum += (static_cast<float>((word >> (4 * i)) & 15u) - zero) * a(i);
  }
  return sum;
}

// One lane of the decoding GEMV's warp on column n (nbits.cu's GemvKernel, which sums the
// `lanes` lanes' acc afterwards): acc[r] += Σ A[r, k] · W[n, k] over the lane's part of K.
// kWords (4-bit codes, K % 8 == 0, the codes' base on 4 bytes): 32-bit words w = lane,
// lane + lanes, ... of the column's codes (word w: k = 8w .. 8w + 7, one block);
// otherwise single codes k = lane, lane + lanes, .... a(r, k), scale(i) and zero(i) load
// A[r, k] and the i-th scale and float zero point (i = n · blocks + block) as floats;
// has_float_zp says whether there are float zero points, zp_packed the packed ones.
template <int R, bool kWords, typename LoadA, typename LoadParam>
TPC_HOST_DEVICE void NBitsGemvLane(const NBitsLayout& l, const uint8_t* b, const uint8_t* zp_packed,
                                   bool has_float_zp, LoadParam scale, LoadParam zero, LoadA a,
                                   int64_t n, int lane, int lanes, float* acc) {
  // Per column once: no 64-bit division per word (a GPU emulates them).
  const int64_t blocks = l.blocks();
  const int shift = l.block_shift();
  const uint8_t* zp_row =
      zp_packed != nullptr ? zp_packed + n * l.packed_zero_point_bytes() : nullptr;
  auto zero_of = [&](int64_t blk) {
    return has_float_zp        ? zero(n * blocks + blk)
           : zp_row != nullptr ? static_cast<float>(UnpackCode(zp_row, blk, l.bits))
                               : static_cast<float>(1 << (l.bits - 1));
  };
  if constexpr (kWords) {
    const uint8_t* codes = b + n * blocks * l.blob_bytes();
    for (int64_t w = lane; w < l.k / 8; w += lanes) {
      const int64_t k0 = 8 * w, blk = k0 >> shift;
      uint32_t word;
#if defined(__CUDA_ARCH__)
      word = reinterpret_cast<const uint32_t*>(codes)[w];  // on 4 bytes (the caller checked)
#else
      std::memcpy(&word, codes + 4 * w, sizeof word);
#endif
      const float s = scale(n * blocks + blk), z = zero_of(blk);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int r = 0; r < R; ++r) {
        acc[r] += s * Int4WordDot(word, z, [&](int i) { return a(r, k0 + i); });
      }
    }
  } else {
    for (int64_t k = lane; k < l.k; k += lanes) {
      const int64_t blk = k >> shift;
      const float zp = has_float_zp ? zero(n * blocks + blk) : 0.0f;
      const float w = NBitsWeight(l, b, n, k, scale(n * blocks + blk), zp_packed, has_float_zp, zp);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int r = 0; r < R; ++r) acc[r] += w * a(r, k);
    }
  }
}

}  // namespace tpc::runtime::math
