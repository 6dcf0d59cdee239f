// onnxruntime's MatMulNBits: Y = A · dequant(B)ᵀ (+ bias) with B block-quantized along K
// (2, 4 or 8 bits; include/tpc/runtime/math/nbits.h has the layout and the arithmetic).
// Decoding (up to kDirectRows rows) reads the packed weight once, decoding as it goes;
// larger inputs dequantize it a tile of columns at a time and multiply A by the tile (in
// registers for f32 and whole blocks of int4 codes, else by the BLAS).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "huge_pages.h"
#include "int8_blocks.h"
#include "isa_loops.h"
#include "kernels.h"
#include "line_aligned.h"
#include "tpc/runtime/math/nbits.h"

namespace tpc::runtime::cpu {
namespace {

// ConstantForm's form of MatMulNBits' weights: panels of codes (CodePanels).
constexpr int kCodePanelsForm = 1;

// From this many rows of A on, a weight that is not a constant is rearranged into panels
// at every call (CodePanels; constant ones once).
constexpr int64_t kPackPerCallRows = 8;

// Up to this many rows (tokens) the packed weight is read directly, not dequantized.
constexpr int64_t kDirectRows = 4;

// The usual int4 layout: whole blocks of a multiple of 32 codes (16 bytes and more).
bool Int4Blocks(const math::NBitsLayout& l) {
  return l.bits == 4 && l.block_size % 32 == 0 && l.k % l.block_size == 0;
}

math::NBitsLayout NBitsLayoutOf(const ir::Node& node) {
  math::NBitsLayout l;
  l.k = node.attr_int("K", 0);
  l.n = node.attr_int("N", 0);
  l.bits = node.attr_int("bits", 4);
  l.block_size = node.attr_int("block_size", 0);
  return l;
}

// B, the scales, the zero points and the bias (those present) against the layout, the
// scales, float zero points and bias in `float_type` (A's).
absl::Status CheckWeights(const KernelContext& ctx, const math::NBitsLayout& l,
                          ir::DType float_type) {
  const Tensor& b = ctx.input(1);
  const Tensor& scales = ctx.input(2);
  const Tensor* zero_points = ctx.optional_input(3);
  const Tensor* bias = ctx.optional_input(5);
  const int64_t blocks = l.blocks();
  if (b.dtype() != ir::DType::kU8 || b.num_elements() != l.n * blocks * l.blob_bytes()) {
    return ctx.Error(absl::StrCat("B ", b.TypeString(), " is not uint8 [", l.n, ", ", blocks, ", ",
                                  l.blob_bytes(), "]"));
  }
  if (scales.dtype() != float_type || scales.num_elements() != l.n * blocks) {
    return ctx.Error(absl::StrCat("scales ", scales.TypeString(), " do not hold ", l.n * blocks,
                                  " values of A's type"));
  }
  const bool packed = zero_points != nullptr && zero_points->dtype() == ir::DType::kU8;
  if (zero_points != nullptr &&
      (packed
           ? zero_points->num_elements() != l.n * l.packed_zero_point_bytes()
           : zero_points->dtype() != float_type || zero_points->num_elements() != l.n * blocks)) {
    return ctx.Error(absl::StrCat("zero_points ", zero_points->TypeString(),
                                  " are neither packed uint8 nor one per block in A's type"));
  }
  if (bias != nullptr && (bias->dtype() != float_type || bias->num_elements() != l.n)) {
    return ctx.Error(absl::StrCat("bias ", bias->TypeString(), " does not hold N = ", l.n,
                                  " values of A's type"));
  }
  return absl::OkStatus();
}

// Whether accuracy_level 4's integer kernel multiplies A (f32) by this weight: 4 or 8
// bits in whole blocks of a multiple of 16, up to 2048 (a block's int32 sums, up to 255 ·
// 127 · block and zero · 127 · block, stay far from overflowing).
bool Int8PanelsApply(const KernelContext& ctx, const math::NBitsLayout& l, bool float_zeros) {
  return math::NBitsInt8Activations(l, ctx.node().attr_int("accuracy_level", 0), float_zeros) &&
         (l.bits == 4 || l.bits == 8) && l.block_size % 16 == 0 && l.block_size <= 2048 &&
         l.k % l.block_size == 0 && HasInt8Dot();
}

// The panels of this weight, with or without zero points.
CodePanels PanelLayout(const math::NBitsLayout& l, bool zero_points) {
  return CodePanels{l.n, l.k, l.bits, l.block_size, zero_points};
}

// The weight in CodePanels: made once for constant codes, scales and zero points
// (ConstantForm), else into `own` (null: not made).
const uint8_t* Int8PanelsOf(KernelContext& ctx, const math::NBitsLayout& l,
                            AlignedVector<uint8_t>* own) {
  const Tensor* zero_points = ctx.optional_input(3);
  const uint8_t* pz = zero_points != nullptr ? zero_points->data<uint8_t>() : nullptr;
  const CodePanels layout = PanelLayout(l, pz != nullptr);
  auto pack = [&](uint8_t* out) {
    ctx.pool().ParallelFor(layout.panels(), 1, [&](int64_t lo, int64_t hi) {
      PackCodePanels(ctx.input(1).data<uint8_t>(), ctx.input(2).data<float>(), pz,
                     l.packed_zero_point_bytes(), layout, lo, hi - lo, out);
    });
  };
  // (the layout's numbers in the form's name: the same constants read as another layout
  // are another form)
  const std::initializer_list<int64_t> form = {kCodePanelsForm, l.n, l.k, l.bits, l.block_size};
  const void* made = pz != nullptr ? ConstantForm(ctx, {1, 2, 3}, form, layout.bytes(), pack)
                                   : ConstantForm(ctx, {1, 2}, form, layout.bytes(), pack);
  if (made != nullptr || own == nullptr) return static_cast<const uint8_t*>(made);
  own->resize(static_cast<size_t>(layout.bytes()));
  pack(own->data());
  return own->data();
}

}  // namespace

absl::StatusOr<math::NBitsLayout> NBitsInputs(const KernelContext& ctx) {
  const math::NBitsLayout l = NBitsLayoutOf(ctx.node());
  if (!l.valid()) {
    return ctx.Error(absl::StrCat("K = ", l.k, ", N = ", l.n, ", bits = ", l.bits,
                                  ", block_size = ", l.block_size, " is not a supported layout"));
  }
  if (ctx.optional_input(4) != nullptr) return ctx.Error("g_idx is not supported");
  const Tensor& a = ctx.input(0);
  if (a.rank() < 1 || a.dim(a.rank() - 1) != l.k) {
    return ctx.Error(absl::StrCat("A ", a.TypeString(), " does not end in K = ", l.k));
  }
  TPC_RETURN_IF_ERROR(CheckWeights(ctx, l, a.dtype()));
  return l;
}

absl::Status PrepareMatMulNBits(KernelContext& ctx) {
  // Constant codes and scales (and zero points, where the node has them) only; bad ones
  // are left to the run, which names them.
  const math::NBitsLayout l = NBitsLayoutOf(ctx.node());
  const ir::Node& node = ctx.node();
  const bool has_zeros = node.num_inputs() > 3 && node.input(3) != nullptr;
  if (!l.valid() || !ctx.has_input(1) || !ctx.has_input(2) || (has_zeros && !ctx.has_input(3)) ||
      node.input(0) == nullptr) {
    return absl::OkStatus();
  }
  // A as the run gets it: f32 copies of f16 and bf16.
  ir::DType a_type = node.input(0)->type().dtype;
  if (IsHalfType(a_type)) a_type = ir::DType::kF32;
  if ((a_type != ir::DType::kF32 && a_type != ir::DType::kF64) ||
      !CheckWeights(ctx, l, a_type).ok()) {
    return absl::OkStatus();
  }
  const bool float_zeros = has_zeros && ctx.input(3).dtype() != ir::DType::kU8;
  if (a_type == ir::DType::kF32 && Int8PanelsApply(ctx, l, float_zeros)) {
    Int8PanelsOf(ctx, l, nullptr);
  } else {
    StreamedConstant(ctx, 1);
    StreamedConstant(ctx, 2);
  }
  return absl::OkStatus();
}

absl::Status MatMulNBits(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::NBitsLayout l, NBitsInputs(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor* zero_points = ctx.optional_input(3);
  const Tensor* bias = ctx.optional_input(5);
  const int64_t blocks = l.blocks();
  const bool packed = zero_points != nullptr && zero_points->dtype() == ir::DType::kU8;
  Shape out = a.shape();
  out.back() = l.n;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, a.dtype()));
  const int64_t m = l.k == 0 ? 0 : a.num_elements() / l.k;
  return VisitFloat(ctx, a.dtype(), [&]<typename T>() -> absl::Status {
    const uint8_t* pz = packed ? zero_points->data<uint8_t>() : nullptr;
    const T* pzf = zero_points != nullptr && !packed ? zero_points->data<T>() : nullptr;
    T* py = y->data<T>();
    const T* pa = a.data<T>();
    // bias[col] added to Y's columns [lo, hi) (every row).
    auto add_bias_columns = [&](int64_t lo, int64_t hi) {
      if (bias == nullptr) return;
      const T* pbias = bias->data<T>();
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t col = lo; col < hi; ++col) py[r * l.n + col] += pbias[col];
      }
    };
    // accuracy_level 4: A rounded to int8 per block (math::Int8Rounded), as onnxruntime's
    // CPU computes it; with AVX-512 VNNI, f32 rows times 4- or 8-bit codes in whole blocks
    // multiply as integers against the weight rearranged into panels of 16 columns (once
    // per constant weight), else the rounded A goes through the paths below. bench_nbits,
    // 1 thread, K 1024, N 3072: one row 0.057 ms (L2) and 0.071 (from memory, 28 GB/s), 32
    // rows 0.84 ms, against 0.13, 0.10 and 2.30 for the integer kernel on the original
    // layout (a column at a time, four runs of 32 codes a vector, a conversion and two
    // FMAs per row every 128 codes).
    AlignedVector<T> rounded;
    if (math::NBitsInt8Activations(l, ctx.node().attr_int("accuracy_level", 0), pzf != nullptr)) {
      if constexpr (std::is_same_v<T, float>) {
        // (Float zero points never round.) A weight fed as an input is rearranged for
        // prompts only: a few rows would spend longer rearranging it (2.6-2.9 GB/s a
        // thread) than the f32 loops take to read it in place, A rounded.
        AlignedVector<uint8_t> own;
        const uint8_t* panels = Int8PanelsApply(ctx, l, false)
                                    ? Int8PanelsOf(ctx, l, m >= kPackPerCallRows ? &own : nullptr)
                                    : nullptr;
        if (panels != nullptr) {
          const CodePanels layout = PanelLayout(l, pz != nullptr);
          Int8Activations rows;
          rows.Resize(m, l.k, l.block_size);
          ctx.pool().ParallelFor(m, 16, [&](int64_t lo, int64_t hi) {
            QuantizeInt8Activations(pa, lo, hi - lo, &rows);
          });
          ctx.pool().ParallelFor(layout.panels(), 1, [&](int64_t lo, int64_t hi) {
            Int8PanelsDot(panels, layout, lo, hi - lo, rows, py, l.n);
            add_bias_columns(lo * CodePanels::kColumns, std::min(l.n, hi * CodePanels::kColumns));
          });
          return absl::OkStatus();
        }
      }
      rounded.resize(static_cast<size_t>(a.num_elements()));
      const T* source = pa;
      ctx.pool().ParallelFor(m, 16, [&](int64_t lo, int64_t hi) {
        Int8RoundRows(source + lo * l.k, hi - lo, l.k, l.block_size, rounded.data() + lo * l.k);
      });
      pa = rounded.data();
    }
    // The codes and scales a decode step streams: from huge pages where constant.
    const auto* pb = static_cast<const uint8_t*>(StreamedConstant(ctx, 1));
    const auto* ps = static_cast<const T*>(StreamedConstant(ctx, 2));
    // The codes of block `blk` of column `col` into `out` (its length returned), with the
    // block's scale and zero point.
    auto unpack = [&](int64_t col, int64_t blk, T* out, T* scale, T* zero) {
      *scale = ps[col * blocks + blk];
      *zero = pzf != nullptr ? pzf[col * blocks + blk]
                             : static_cast<T>(math::NBitsPackedZeroPoint(l, pz, col, blk));
      const int64_t len = std::min(l.k, (blk + 1) * l.block_size) - blk * l.block_size;
      math::UnpackCodes(pb + (col * blocks + blk) * l.blob_bytes(), len, l.bits, out);
      return len;
    };
    const bool int4_f32 = std::is_same_v<T, float> && Int4Blocks(l);
    if (m <= (int4_f32 ? kInt4DirectRows : kDirectRows)) {
      // Decoding (a few rows): one pass over the packed weight, each block's codes unpacked
      // once and multiplied into every row; nothing the size of the weight is written.
      if constexpr (std::is_same_v<T, float>) {
        if (Int4Blocks(l)) {
          // The usual int4 layout: the codes go straight from their bytes into the vector
          // lanes (Int4ColumnsDot, compiled per ISA) against A's rows rearranged once into
          // each block's even and odd halves.
          const int64_t half = l.block_size / 2;
          AlignedVector<float> pairs(static_cast<size_t>(m * l.k));
          EvenOddPairs(pa, m, l.k, l.block_size, pairs.data());
          ctx.pool().ParallelFor(
              l.n, std::max<int64_t>(2, 4096 / l.k), [&](int64_t lo, int64_t hi) {
                Int4ColumnsDot(pb + lo * blocks * half, ps + lo * blocks,
                               pzf != nullptr ? pzf + lo * blocks : nullptr,
                               pz != nullptr ? pz + lo * l.packed_zero_point_bytes() : nullptr,
                               l.packed_zero_point_bytes(), hi - lo, blocks, half, pairs.data(),
                               l.k, m, py + lo, l.n);
                add_bias_columns(lo, hi);
              });
          return absl::OkStatus();
        }
      }
      // Otherwise codes unpacked a block at a time:
      // Σ_k (code - zero) · scale · a_k = scale · (Σ code · a_k - zero · Σ a_k), and Σ a_k
      // of each block does not depend on the column.
      std::vector<T> sum_a(static_cast<size_t>(m * blocks), T(0));
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t k = 0; k < l.k; ++k)
          sum_a[static_cast<size_t>(r * blocks + k / l.block_size)] += pa[r * l.k + k];
      }
      ctx.pool().ParallelFor(l.n, std::max<int64_t>(1, 4096 / l.k), [&](int64_t lo, int64_t hi) {
        std::vector<T> codes(static_cast<size_t>(l.block_size));
        for (int64_t col = lo; col < hi; ++col) {
          T acc[kDirectRows] = {};
          for (int64_t blk = 0; blk < blocks; ++blk) {
            T scale, zero;
            const int64_t len = unpack(col, blk, codes.data(), &scale, &zero);
            const int64_t k0 = blk * l.block_size;
            for (int64_t r = 0; r < m; ++r) {
              const T* ar = pa + r * l.k + k0;
              T d0 = 0, d1 = 0, d2 = 0, d3 = 0;  // independent sums the compiler can vectorize
              int64_t k = 0;
              for (; k + 4 <= len; k += 4) {
                d0 += codes[static_cast<size_t>(k)] * ar[k];
                d1 += codes[static_cast<size_t>(k + 1)] * ar[k + 1];
                d2 += codes[static_cast<size_t>(k + 2)] * ar[k + 2];
                d3 += codes[static_cast<size_t>(k + 3)] * ar[k + 3];
              }
              for (; k < len; ++k) d0 += codes[static_cast<size_t>(k)] * ar[k];
              acc[r] += scale * ((d0 + d1) + (d2 + d3) -
                                 zero * sum_a[static_cast<size_t>(r * blocks + blk)]);
            }
          }
          for (int64_t r = 0; r < m; ++r) {
            py[r * l.n + col] = acc[r] + (bias != nullptr ? bias->data<T>()[col] : T(0));
          }
        }
      });
      return absl::OkStatus();
    }
    // Prefill: each thread dequantizes a tile of columns into a buffer of its own (about
    // 256 KiB of floats, so that it stays in that core's cache) and multiplies A by it
    // there. Tiles of 4 MiB shared by all threads cost 0.45 s for 32 rows of a 6-layer
    // int4 model at 2 threads, most of it writing and reading the floats through memory.
    // (min of max, not std::clamp: N may be under 16, below clamp's lower bound.)
    const int64_t tile = std::min<int64_t>(
        std::max<int64_t>((int64_t{1} << 16) / std::max<int64_t>(l.k, 1), 16), l.n);
    const int64_t tiles = (l.n + tile - 1) / tile;
    if constexpr (std::is_same_v<T, float>) {
      if (Int4Blocks(l)) {
        // f32 rows and the usual int4 layout: each tile dequantized in vectors, in the
        // order of A's pairs, and the rows multiplied against it in registers
        // (RowColumnDots), kDotRows rows a pass. The bench model's 32-token prefill at 2
        // threads: 105 ms against 214 through the BLAS, which repacked A and the tile for
        // every tile; 512 tokens, 8 passes that dequantize every tile again: 1.6 against
        // 2.2 s.
        const int64_t half = l.block_size / 2;
        for (int64_t r0 = 0; r0 < m; r0 += kDotRows) {
          const int64_t rows = std::min(kDotRows, m - r0);
          AlignedVector<float> pairs(static_cast<size_t>(rows * l.k));
          EvenOddPairs(pa + r0 * l.k, rows, l.k, l.block_size, pairs.data());
          ctx.pool().ParallelFor(tiles, 1, [&](int64_t lo, int64_t hi) {
            AlignedVector<float> w(static_cast<size_t>(tile * l.k));
            for (int64_t t = lo; t < hi; ++t) {
              const int64_t first = t * tile, cols = std::min(tile, l.n - first);
              Int4DequantizeColumns(
                  pb + first * blocks * half, blocks * half, ps + first * blocks,
                  pzf != nullptr ? pzf + first * blocks : nullptr,
                  pz != nullptr ? pz + first * l.packed_zero_point_bytes() : nullptr,
                  l.packed_zero_point_bytes(), blocks, half, cols, w.data(), l.k);
              RowColumnDots(pairs.data(), l.k, rows, w.data(), l.k, cols, l.k,
                            py + r0 * l.n + first, l.n);
            }
          });
        }
        add_bias_columns(0, l.n);
        return absl::OkStatus();
      }
    }
    // Otherwise (half precision, 2 and 8 bits, partial blocks) one single-threaded BLAS call
    // per tile.
    ctx.pool().ParallelFor(tiles, 1, [&](int64_t lo, int64_t hi) {
      AlignedVector<T> w(static_cast<size_t>(tile * l.k));
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t first = t * tile, cols = std::min(tile, l.n - first);
        for (int64_t c = 0; c < cols; ++c) {
          for (int64_t blk = 0; blk < blocks; ++blk) {
            T scale, zero;
            T* dst = w.data() + c * l.k + blk * l.block_size;
            const int64_t len = unpack(first + c, blk, dst, &scale, &zero);
            for (int64_t k = 0; k < len; ++k) dst[k] = (dst[k] - zero) * scale;
          }
        }
        Gemm2D<T>(false, true, m, cols, l.k, T(1), pa, l.k, w.data(), l.k, T(0), py + first, l.n);
      }
    });
    add_bias_columns(0, l.n);
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
