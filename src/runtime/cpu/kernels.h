// Internal to the CPU backend: helpers the kernel families share and the kernel
// functions that registry.cc puts in its table. Only registry.cc names operators.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "isa_loops.h"
#include "line_aligned.h"
#include "tpc/runtime/compare.h"
#include "tpc/runtime/kernel.h"
#include "tpc/runtime/math/causal_conv.h"
#include "tpc/runtime/math/gqa.h"
#include "tpc/runtime/math/grid_sample.h"
#include "tpc/runtime/math/linear_attention.h"
#include "tpc/runtime/math/moe.h"
#include "tpc/runtime/math/nbits.h"
#include "tpc/runtime/math/pad.h"
#include "tpc/runtime/math/pointwise.h"
#include "tpc/runtime/math/quantize.h"
#include "tpc/runtime/math/recurrent.h"
#include "tpc/runtime/math/resize.h"
#include "tpc/runtime/math/roi_align.h"
#include "tpc/runtime/math/rotary.h"
#include "tpc/runtime/math/spectral.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime::cpu {

using Shape = std::vector<int64_t>;

// ---- Element types (common.cc) ----

// Calls `f.template operator()<T>()` with the C++ type of `t` (numeric types and bool),
// or returns an error naming the node.
template <bool kAllowBool = true, typename F>
absl::Status VisitType(const KernelContext& ctx, ir::DType t, F&& f) {
  using ir::DType;
  switch (t) {
    case DType::kF32:
      return f.template operator()<float>();
    case DType::kF64:
      return f.template operator()<double>();
    case DType::kI64:
      return f.template operator()<int64_t>();
    case DType::kI32:
      return f.template operator()<int32_t>();
    case DType::kI16:
      return f.template operator()<int16_t>();
    case DType::kI8:
      return f.template operator()<int8_t>();
    case DType::kU8:
      return f.template operator()<uint8_t>();
    case DType::kU16:
      return f.template operator()<uint16_t>();
    case DType::kU32:
      return f.template operator()<uint32_t>();
    case DType::kU64:
      return f.template operator()<uint64_t>();
    case DType::kBool:
      if constexpr (kAllowBool) return f.template operator()<bool>();
      break;
    default:
      break;
  }
  return ctx.Error(absl::StrCat("element type ", ir::DTypeName(t), " is not supported"));
}
// Numeric types only (no bool).
template <typename F>
absl::Status VisitNumeric(const KernelContext& ctx, ir::DType t, F&& f) {
  return VisitType<false>(ctx, t, std::forward<F>(f));
}
// Only f32 and f64.
template <typename F>
absl::Status VisitFloat(const KernelContext& ctx, ir::DType t, F&& f) {
  if (t == ir::DType::kF32) return f.template operator()<float>();
  if (t == ir::DType::kF64) return f.template operator()<double>();
  return ctx.Error(
      absl::StrCat("element type ", ir::DTypeName(t), " is not supported (float only)"));
}

// `src` converted to `to` (numeric, bool, f16, bf16): a copy, or into `dst` (src's shape).
absl::StatusOr<Tensor> CastTensor(const KernelContext& ctx, const Tensor& src, ir::DType to);
absl::Status CastInto(const KernelContext& ctx, const Tensor& src, const Tensor& dst);
// An integer tensor (i32 or i64) as int64 values.
absl::StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& ctx, const Tensor& t);

// ---- Shapes (common.cc) ----

int64_t NumElements(const Shape& shape);
Shape Strides(const Shape& shape);
// `axis` in [-rank, rank) made non-negative, or an error naming the node.
absl::StatusOr<int64_t> NormalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank);
// Numpy broadcasting of several shapes.
absl::StatusOr<Shape> BroadcastShapes(const KernelContext& ctx, const std::vector<Shape>& shapes);
// Strides of `in` read as `out` (0 on broadcast dims); `in` is right-aligned.
Shape BroadcastStrides(const Shape& in, const Shape& out);

// The offsets of N operands at flat index i of `dims`, each operand read through strides
// of its own over those dims (BroadcastStrides, times an element count for offsets of
// whole matrices or rows; entries past dims.size() are not read). The strides are taken
// once; each At() splits i into its index along every dim.
template <size_t N>
class BroadcastOffsets {
 public:
  BroadcastOffsets(Shape dims, std::array<Shape, N> strides)
      : dims_(std::move(dims)), strides_(std::move(strides)) {}
  std::array<int64_t, N> At(int64_t i) const {
    std::array<int64_t, N> o{};
    for (size_t d = dims_.size(); d-- > 0;) {
      const int64_t idx = i % dims_[d];
      i /= dims_[d];
      for (size_t k = 0; k < N; ++k) o[k] += idx * strides_[k][d];
    }
    return o;
  }

 private:
  Shape dims_;
  std::array<Shape, N> strides_;
};
// `strides` times `factor`.
Shape Scaled(Shape strides, int64_t factor);

// The geometry of numpy's matmul of A and B (MatMul, MatMulInteger, QLinearMatMul): a
// 1-D operand is read as a row (A) or a column (B), the batch dims broadcast.
struct MatMulShape {
  Shape a, b;  // the operands' shapes, at least 2-D
  int64_t m = 0, k = 0, n = 0;
  Shape batch_a, batch_b, batch;  // batch dims of A, of B, broadcast
  Shape out;                      // the result's (without the dims of a 1-D operand)
  // Calls f(i, a_offset, b_offset) for every output matrix i with the element offsets
  // of the A and B matrices it multiplies.
  template <typename F>
  void ForEachMatrix(F f) const {
    const BroadcastOffsets<2> offsets = MatrixOffsets();
    const int64_t count = NumElements(batch);
    for (int64_t i = 0; i < count; ++i) {
      const auto [oa, ob] = offsets.At(i);
      f(i, oa, ob);
    }
  }
  // At(i): the element offsets of the A and B matrices of output matrix i.
  BroadcastOffsets<2> MatrixOffsets() const {
    return BroadcastOffsets<2>(batch, {Scaled(BroadcastStrides(batch_a, batch), m * k),
                                       Scaled(BroadcastStrides(batch_b, batch), k * n)});
  }
};
// A · B for an f32 B that is a constant [K, N] of the graph, through a GEMM library
// with B packed once (packed_matmul.cc); false when it does not apply (another type, a
// B computed at run time, no such library in the build): the caller multiplies.
// `epilogue(col, cols)`, when given, runs on the thread that computed columns [col, col +
// cols) of every row, right after them (a fused bias and activation, in cache).
using ColumnsEpilogue = std::function<void(int64_t col, int64_t cols)>;
absl::StatusOr<bool> PackedMatMul(KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor* y,
                                  const ColumnsEpilogue* epilogue = nullptr);
absl::StatusOr<MatMulShape> MatMulShapes(const KernelContext& ctx, const Tensor& a,
                                         const Tensor& b);

namespace detail {

// The offsets of `inputs` operands (strides[k]: operand k's BroadcastStrides over `out`)
// at consecutive elements of `out` from `begin`, a chunk at a time: Next(count, offsets)
// writes operand k's offset of element j of the chunk to offsets[k * kChunk + j]. Not a
// template: every ForEachBroadcast shares this walk and keeps only its loop over a chunk.
class BroadcastWalk {
 public:
  static constexpr int64_t kChunk = 256;
  BroadcastWalk(const Shape& out, const Shape* strides, size_t inputs, int64_t begin);
  void Next(int64_t count, int64_t* offsets);

 private:
  const Shape& out_;
  const Shape* strides_;
  size_t inputs_;
  Shape idx_;
  Shape off_;
};

// f over a run of n output elements from i whose input offsets start at `base` and step
// by bit k of Mask (1: the input runs along, 0: it is broadcast): constant strides, so
// the compiler vectorizes the loop once f is inlined.
template <unsigned Mask, size_t N, typename F>
inline void BroadcastRun(F& f, int64_t i, const std::array<int64_t, N>& base, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    std::array<int64_t, N> o;
    for (size_t k = 0; k < N; ++k) o[k] = base[k] + (((Mask >> k) & 1u) != 0 ? j : 0);
    f(i + j, o);
  }
}

template <size_t N, typename F, unsigned M = 0>
inline void BroadcastRunFor(unsigned mask, F& f, int64_t i, const std::array<int64_t, N>& base,
                            int64_t n) {
  if constexpr (M < (1u << N)) {
    if (mask == M) {
      BroadcastRun<M>(f, i, base, n);
      return;
    }
    BroadcastRunFor<N, F, M + 1>(mask, f, i, base, n);
  }
}

}  // namespace detail

// Calls f(i, offsets) for every element i of `out` with the element offset of each of
// the N inputs; large loops are split across the pool. kRuns: runs of constant strides
// (operands of out's shape, a row broadcast) get loops of their own, which the compiler
// vectorizes; without, every element goes through the general walk (less code, for the
// element types no model computes much in).
template <size_t N, bool kRuns = true, typename F>
void ForEachBroadcast(ThreadPool& pool, const Shape& out, const std::array<Shape, N>& in_shapes,
                      F f) {
  const int64_t total = NumElements(out);
  std::array<Shape, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = BroadcastStrides(in_shapes[k], out);
  if constexpr (kRuns) {
    bool same = true;
    for (const Shape& s : in_shapes) same = same && s == out;
    if (same) {
      pool.ParallelFor(total, 1 << 15, [&](int64_t b, int64_t e) {
        std::array<int64_t, N> base;
        base.fill(b);  // every input runs along with the output from element b
        detail::BroadcastRun<(1u << N) - 1>(f, b, base, e - b);
      });
      return;
    }
    // The innermost dim as a run with constant strides (a bias row, a scalar, a row
    // broadcast down a column), the outer dims walked once per run.
    const size_t rank = out.size();
    if (rank >= 1 && out.back() >= 4) {
      unsigned mask = 0;
      bool unit = true;
      for (size_t k = 0; k < N; ++k) {
        const int64_t s = strides[k].back();
        unit = unit && (s == 0 || s == 1);
        mask |= (s == 1 ? 1u : 0u) << k;
      }
      if (unit) {
        const int64_t inner = out.back();
        const int64_t rows = total / inner;
        const BroadcastOffsets<N> rows_at(Shape(out.begin(), out.end() - 1), strides);
        pool.ParallelFor(rows, std::max<int64_t>(1, (1 << 15) / inner), [&](int64_t b, int64_t e) {
          for (int64_t row = b; row < e; ++row) {
            detail::BroadcastRunFor<N>(mask, f, row * inner, rows_at.At(row), inner);
          }
        });
        return;
      }
    }
  }
  pool.ParallelFor(total, 1 << 15, [&](int64_t b, int64_t e) {
    detail::BroadcastWalk walk(out, strides.data(), N, b);
    int64_t offsets[N * detail::BroadcastWalk::kChunk];
    for (int64_t i = b; i < e; i += detail::BroadcastWalk::kChunk) {
      const int64_t count = std::min(detail::BroadcastWalk::kChunk, e - i);
      walk.Next(count, offsets);
      for (int64_t j = 0; j < count; ++j) {
        std::array<int64_t, N> o;
        for (size_t k = 0; k < N; ++k) o[k] = offsets[k * detail::BroadcastWalk::kChunk + j];
        f(i + j, o);
      }
    }
  });
}

// Calls `f.template operator()<U>()` with an unsigned type of the element size of `t`
// (for kernels that move elements without looking at them).
template <typename F>
absl::Status VisitBySize(const KernelContext& ctx, ir::DType t, F&& f) {
  switch (ir::DTypeSize(t)) {
    case 1:
      return f.template operator()<uint8_t>();
    case 2:
      return f.template operator()<uint16_t>();
    case 4:
      return f.template operator()<uint32_t>();
    case 8:
      return f.template operator()<uint64_t>();
    default:
      break;
  }
  return ctx.Error(absl::StrCat("element type ", ir::DTypeName(t), " is not supported"));
}

// Axes from attribute `name` or (newer opsets) input `input`; nullopt when neither.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesFromAttrOrInput(const KernelContext& ctx,
                                                                        const std::string& name,
                                                                        int input);
// Output 0 as a copy of input 0's bytes with a new shape (Reshape, Squeeze, ...), copied
// by the backend (so the kernels that only do this run on any backend).
absl::Status CopyWithShape(KernelContext& ctx, const Shape& shape);

// ---- Geometry shared with the device kernels ----

// The lines of Softmax, LogSoftmax and Hardmax: `len` elements at stride `inner`, for each
// of outer * inner lines (norms.cc).
// [outer, axis, inner] view of a shape around `axis` (reduce.cc).
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit SplitAt(const Shape& s, int64_t axis);
struct SoftmaxLines {
  int64_t outer = 1, len = 1, inner = 1;
};
absl::StatusOr<SoftmaxLines> ReadSoftmaxLines(const KernelContext& ctx, const Tensor& x);
// Slice's first index, step and output shape per dim of x (indexing.cc).
absl::Status SliceGeometry(const KernelContext& ctx, const Tensor& x, Shape* begin, Shape* step,
                           Shape* out);
// The tpc collectives' geometry (collectives.cc): the group size the node was compiled
// for, checked against the communicator's; bytes before / from `axis`; a blocked split's
// k times more outer rows of a k times smaller inner part (placement S(d/k)).
absl::StatusOr<int> GroupSize(const KernelContext& ctx);
void OuterInner(const Tensor& t, int64_t axis, int64_t* outer, int64_t* inner_bytes);
absl::Status ApplyBlocks(const KernelContext& ctx, const Tensor& t, int64_t axis, int64_t* outer,
                         int64_t* inner_bytes);
// tpc::Shard's part (collectives.cc): the output shape and, over the input's bytes, `rows`
// rows of `row_bytes` of which this rank takes `part_bytes` from `offset_bytes` on.
struct ShardGeometry {
  Shape out;
  int64_t rows = 0, row_bytes = 0, part_bytes = 0, offset_bytes = 0;
};
absl::StatusOr<ShardGeometry> ShardGeometryOf(const KernelContext& ctx, const Tensor& x);
// MatMulNBits' layout from its attributes, its inputs checked against it (matmul_nbits.cc).
absl::StatusOr<math::NBitsLayout> NBitsInputs(const KernelContext& ctx);
// GatherBlockQuantized's table as MatMulNBits' layout (n rows of K values), its inputs
// checked (gather_block_quantized.cc).
absl::StatusOr<math::NBitsLayout> ReadBlockGather(const KernelContext& ctx);
absl::Status GatherBlockQuantized(KernelContext& ctx);
// Split's part sizes along `axis` (movement.cc).
absl::StatusOr<std::vector<int64_t>> SplitSizes(const KernelContext& ctx, const Tensor& x,
                                                int64_t axis);

// ---- Elementwise (elementwise.cc, unary.cc) ----

// Integer arithmetic wraps around (two's complement), as onnxruntime's does. In C++ a
// signed overflow is undefined behaviour, so integers go through their unsigned type
// (at least `unsigned`, so that small types are not promoted back to `int`).
template <typename T>
using WrapUnsigned = std::make_unsigned_t<std::common_type_t<T, int>>;
template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) + static_cast<WrapUnsigned<T>>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) - static_cast<WrapUnsigned<T>>(b));
  } else {
    return a - b;
  }
}
template <typename T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) * static_cast<WrapUnsigned<T>>(b));
  } else {
    return a * b;
  }
}
template <typename T>
T WrapNeg(T a) {
  return WrapSub(T(0), a);
}

absl::Status Abs(KernelContext& ctx);
absl::Status Acos(KernelContext& ctx);
absl::Status Acosh(KernelContext& ctx);
absl::Status Add(KernelContext& ctx);
absl::Status And(KernelContext& ctx);
absl::Status Asin(KernelContext& ctx);
absl::Status Asinh(KernelContext& ctx);
absl::Status Atan(KernelContext& ctx);
absl::Status Atanh(KernelContext& ctx);
absl::Status BitShift(KernelContext& ctx);
absl::Status BitwiseAnd(KernelContext& ctx);
absl::Status BitwiseNot(KernelContext& ctx);
absl::Status BitwiseOr(KernelContext& ctx);
absl::Status BitwiseXor(KernelContext& ctx);
absl::Status Ceil(KernelContext& ctx);
absl::Status Celu(KernelContext& ctx);
absl::Status Clip(KernelContext& ctx);
absl::Status Cos(KernelContext& ctx);
absl::Status Cosh(KernelContext& ctx);
absl::Status Div(KernelContext& ctx);
absl::Status Elu(KernelContext& ctx);
absl::Status Equal(KernelContext& ctx);
absl::Status Erf(KernelContext& ctx);
absl::Status Exp(KernelContext& ctx);
absl::Status Floor(KernelContext& ctx);
absl::Status Gelu(KernelContext& ctx);
absl::Status FastGelu(KernelContext& ctx);
absl::Status BiasGelu(KernelContext& ctx);
absl::Status QuickGelu(KernelContext& ctx);
absl::Status Greater(KernelContext& ctx);
absl::Status GreaterOrEqual(KernelContext& ctx);
absl::Status HardSigmoid(KernelContext& ctx);
absl::Status HardSwish(KernelContext& ctx);
absl::Status IsInf(KernelContext& ctx);
absl::Status IsNaN(KernelContext& ctx);
absl::Status LeakyRelu(KernelContext& ctx);
absl::Status Less(KernelContext& ctx);
absl::Status LessOrEqual(KernelContext& ctx);
absl::Status Log(KernelContext& ctx);
absl::Status Max(KernelContext& ctx);
absl::Status Mean(KernelContext& ctx);
absl::Status Min(KernelContext& ctx);
absl::Status Mish(KernelContext& ctx);
absl::Status Mod(KernelContext& ctx);
absl::Status Mul(KernelContext& ctx);
absl::Status Neg(KernelContext& ctx);
absl::Status Not(KernelContext& ctx);
absl::Status Or(KernelContext& ctx);
absl::Status Pow(KernelContext& ctx);
absl::Status PRelu(KernelContext& ctx);
absl::Status Reciprocal(KernelContext& ctx);
absl::Status Relu(KernelContext& ctx);
absl::Status Round(KernelContext& ctx);
absl::Status Selu(KernelContext& ctx);
absl::Status Sigmoid(KernelContext& ctx);
absl::Status Sign(KernelContext& ctx);
absl::Status Sin(KernelContext& ctx);
absl::Status Sinh(KernelContext& ctx);
absl::Status Softplus(KernelContext& ctx);
absl::Status Shrink(KernelContext& ctx);
absl::Status Softsign(KernelContext& ctx);
absl::Status Sqrt(KernelContext& ctx);
absl::Status Sub(KernelContext& ctx);
absl::Status Sum(KernelContext& ctx);
absl::Status Tan(KernelContext& ctx);
absl::Status Tanh(KernelContext& ctx);
absl::Status ThresholdedRelu(KernelContext& ctx);
absl::Status Where(KernelContext& ctx);
absl::Status Xor(KernelContext& ctx);

// ---- Casts and generators (generators.cc) ----
absl::Status Cast(KernelContext& ctx);
absl::Status CastLike(KernelContext& ctx);
absl::Status ConstantOfShape(KernelContext& ctx);
absl::Status BlackmanWindow(KernelContext& ctx);
absl::Status EyeLike(KernelContext& ctx);
absl::Status HammingWindow(KernelContext& ctx);
absl::Status HannWindow(KernelContext& ctx);
absl::Status OneHot(KernelContext& ctx);
absl::Status Range(KernelContext& ctx);
absl::Status Shape_(KernelContext& ctx);
absl::Status Size(KernelContext& ctx);

// ---- Linear algebra (matmul.cc) ----

// C[m, n] = alpha * A[m, k] * B[k, n] + beta * C, row-major with leading dims; A or B
// transposed on request. BLAS for float and double (instantiated for those in matmul.cc).
template <typename T>
void Gemm2D(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, T beta, T* c, int64_t ldc);
// Gemm2D with C split into blocks of rows (or of columns, when it has few rows), one
// single-threaded BLAS call per block on the pool's threads (BLAS itself runs one thread:
// its own team would spin between calls and take the cores from the pool). Small
// products run as one call.
template <typename T>
void ParallelGemm2D(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                    const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// C[m, n] (f32, row-major, ld n) = A[m, k] (f32) · B[k, n] with B f16 or bf16 (`bf16`),
// row-major. A few rows: B converted a tile of columns at a time into a buffer of the
// thread's own (in its core's cache), never whole: a half-precision weight is read as it
// is stored. Many rows: B converted once, then one parallel GEMM.
void HalfWeightGemm(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* a,
                    const uint16_t* b, bool bf16, float* c);
// MatMul and FusedMatMul of f16/bf16 operands (matmul.cc): f32 products rounded to the
// type; a matrix B (a weight) through HalfWeightGemm, with FusedMatMul's bias and
// activation (`act`, bias in the operands' type) applied in f32 before the rounding.
absl::Status HalfMatMul(KernelContext& ctx, const Tensor* bias, Activation act);

absl::Status Einsum(KernelContext& ctx);  // einsum.cc
absl::Status Det(KernelContext& ctx);     // det.cc
absl::Status Gemm(KernelContext& ctx);
absl::Status MatMul(KernelContext& ctx);
absl::Status FusedMatMul(KernelContext& ctx);    // fused.cc
absl::Status AttentionCore(KernelContext& ctx);  // fused.cc
absl::Status RotaryHalf(KernelContext& ctx);     // fused.cc

// The fused operators' inputs (fused.cc), checked alike by every backend's kernels (their
// element types are each kernel's own check).
// tpc::FusedMatMul's `activation` ("" none, Gelu, GeluTanh, Relu, Tanh, SiLU) as the
// element op it applies after the bias.
absl::StatusOr<math::UnaryOp> FusedActivation(const KernelContext& ctx);
// tpc::AttentionCore(Q [.., s, d], K [.., t, d] or Kᵀ [.., d, t], V [.., t, dv], mask?):
// the batch dims broadcast (numpy); the mask broadcasts to [batch.., s, t].
// With `kv_grouped` (GQA), K and V hold h heads in their last batch dim where Q has h·n:
// each head of K and V serves n consecutive query heads. The geometry then splits that dim
// of every operand in two, [.., h, n] (Q's, the mask's when it has every head) or [.., h,
// 1] (K's and V's, the mask's when it has one head), a view of the same memory over which
// they broadcast as usual; out() is the declared [.., h·n, s, dv].
struct AttentionGeometry {
  Shape batch;         // the batch dims, broadcast
  Shape bq, bk, bv;    // each operand's own batch dims
  Shape mask_strides;  // the mask's element strides over [batch.., s, t]; empty: no mask
  int64_t s = 0, t = 0, d = 0, dv = 0;
  bool k_transposed = true;  // K given as Kᵀ [.., d, t]
  bool divide = false;       // the scores are divided by `scale` (else multiplied)
  bool grouped = false;      // the last two batch dims are [h, n] of the declared h·n heads
  float scale = 1.0f;
  Shape out() const;  // [batch.., s, dv]
};
absl::StatusOr<AttentionGeometry> AttentionInputs(const KernelContext& ctx);
// DepthToSpace's (to_space) and SpaceToDepth's operand checked (4-D, blocksize b dividing
// the channels or the image), for every backend's kernel: the dims of math::BlockMoveViews
// (the space side [n, cs, hd·b, wd·b], the depth side [n, cs·b·b, hd, wd]) and the output.
struct BlockMoveShape {
  int64_t n = 0, cs = 0, hd = 0, wd = 0, b = 1;
  Shape out;
};
absl::StatusOr<BlockMoveShape> ReadBlockMove(const KernelContext& ctx, bool to_space);
// Resize's (and Upsample's) attributes and inputs read (roi, scales or sizes, axes,
// keep_aspect_ratio_policy; Resize-10's defaults before opset 11), for every backend's
// kernel: the options, each dim's geometry and the output shape.
struct ResizePlan {
  math::ResizeOptions opt;
  std::vector<math::ResizeAxisGeometry> axes;  // one per dim
  Shape out;
};
absl::StatusOr<ResizePlan> ReadResize(const KernelContext& ctx);
// A dim Resize leaves as it is (no pass over it).
inline bool ResizeAxisIsIdentity(const math::ResizeAxisGeometry& a) {
  return a.out == a.in && a.scale == 1.0 && a.roi_start == 0 && a.roi_end == 1;
}
// GatherElements' and ScatterElements' indices: of data's rank, within data's dims but on
// the axis (the values are checked where they are read).
absl::Status CheckElementIndices(const KernelContext& ctx, const Tensor& data,
                                 const Tensor& indices, int64_t axis);
// The zero point of an integer matrix operand x (`shape`: x as a matrix) checked against
// it, for every backend's MatMulInteger and QLinearMatMul: the shape it broadcasts as over
// `shape` ({} for none or one value, [rows, 1] for one per row with `per_row`, else its own).
absl::StatusOr<Shape> ReadMatrixZeroPoint(const KernelContext& ctx, const Tensor& x,
                                          const Shape& shape, const Tensor* zero_point,
                                          bool per_row, const std::string& what);
// QLinearMatMul's a_scale, b_scale, y_scale and y_zero_point checked against the product
// `full` ([batch..., M, N]): the shapes they broadcast as over it.
absl::StatusOr<std::array<Shape, 4>> ReadQLinearParams(const KernelContext& ctx, const Shape& full);
// GridSample's operands and attributes read (X [N, C, D1..Dr], grid [N, H1..Hr, r], r ≤ 3),
// for every backend's kernel: the geometry, and the output shape in `out_shape`.
absl::StatusOr<math::GridSampleGeometry> ReadGridSample(const KernelContext& ctx, Shape* out_shape);
// AffineGrid's theta and size read (2-D or 3-D), for every backend's kernel.
struct AffineGridShape {
  Shape spatial, out;  // size's spatial dims; the grid's shape
  int64_t points = 0;  // the product of the spatial dims
  bool align_corners = false;
};
absl::StatusOr<AffineGridShape> ReadAffineGrid(const KernelContext& ctx);
// CenterCropPad's sizes and axes read, for every backend's kernel: the output shape, and
// per dim the shift by which y's coordinates read x's (a crop forward, a pad backward).
struct CropPadShape {
  Shape out, shift;
};
absl::StatusOr<CropPadShape> ReadCenterCropPad(const KernelContext& ctx);
// ReverseSequence's operands checked (batch and time axes 0 and 1 either way, a length in
// [0, time] per batch entry; sequence_lens as a host value), for every backend's kernel.
struct ReverseSequenceShape {
  int64_t batch_axis = 1;
  std::vector<int64_t> lens;
};
absl::StatusOr<ReverseSequenceShape> ReadReverseSequence(const KernelContext& ctx);
// OneHot's depth (a host value) and values checked, for every backend's kernel: the output
// shape (the depth dim in at `axis`), and the product of the index dims after the axis.
struct OneHotShape {
  int64_t depth = 0, inner = 1;
  Shape out;
};
absl::StatusOr<OneHotShape> ReadOneHot(const KernelContext& ctx);
// RoiAlign's operands and attributes checked (X [N, C, H, W], rois [R, 4], one batch
// index per region), for every backend's kernel.
absl::StatusOr<math::RoiAlignParams> ReadRoiAlign(const KernelContext& ctx);
// DFT's and STFT's operands read (the lengths, steps and axis as host values), for every
// backend's kernel; DFT's output shape in `out_shape`.
absl::StatusOr<math::DftLayout> ReadDft(const KernelContext& ctx, Shape* out_shape);
absl::StatusOr<math::StftLayout> ReadStft(const KernelContext& ctx);
// RNN's, GRU's or LSTM's operands and attributes checked (shapes of W, R, B, the initial
// states and P; the count of sequence_lens, whose values each backend checks), for every
// backend's kernel: the dims, the layout, and each direction's cell.
struct RecurrentShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool layout1 = false, reverse = false;  // layout 1; direction "reverse"
  std::vector<math::CellParams> cells;    // per direction
  Shape state_shape;                      // initial_h/c and Y_h/Y_c in the node's layout
};
absl::StatusOr<RecurrentShape> ReadRecurrent(const KernelContext& ctx, math::CellKind cell);
// Einsum's equation read against its operands (ellipses, broadcasting, repeated labels,
// the implicit output), for every backend's kernel: the output dims and the summed dims,
// and per operand the element stride of each (0 where the operand lacks the label or
// broadcasts it; a repeated label's strides added, which walks its diagonal).
struct EinsumShape {
  Shape out, sum;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;  // [operand][dim]
};
absl::StatusOr<EinsumShape> ReadEinsum(const KernelContext& ctx);
// QuantizeLinear's and DequantizeLinear's scale (and zero point) checked against x (per
// tensor, per `axis`, or blocked by `block_size`), for every backend's kernel: which scale
// applies to each element.
absl::StatusOr<math::QuantIndex> ReadQuantIndex(const KernelContext& ctx, const Tensor& x,
                                                const Tensor& scale, const Tensor* zero_point);
// GatherND's operands checked (indices with a tuple dim above batch_dims, the tuples
// addressing at most data's dims after the batch dims, the batch dims equal to data's),
// for every backend's kernel: the tuple length.
absl::StatusOr<int64_t> ReadGatherNd(const KernelContext& ctx);
// Pad's operands read (mode, pads per axis of `axes` or of every dim, negative ones
// cropping), for every backend's kernel: the pad before each dim and the output shape.
struct PadShape {
  math::PadMode mode = math::PadMode::kConstant;
  Shape before, out;
};
absl::StatusOr<PadShape> ReadPad(const KernelContext& ctx);
// BatchNormalization's and InstanceNormalization's operands checked (x [N, C, ...], one
// scale, bias (and BatchNormalization's mean and variance) per channel), for every
// backend's kernel.
struct ChannelNormShape {
  int64_t n = 0, channels = 0, plane = 0;  // plane: the elements of one (image, channel)
  double epsilon = 1e-5;
  bool training = false;  // BatchNormalization's training_mode
};
absl::StatusOr<ChannelNormShape> ReadChannelNorm(const KernelContext& ctx, bool instance);
// GroupNormalization's: num_groups dividing C; scale and bias per channel (opset 21) or
// per group (opset 18).
struct GroupNormShape {
  int64_t n = 0, channels = 0, groups = 1, plane = 0;
  bool per_channel = true;
  double epsilon = 1e-5;
};
absl::StatusOr<GroupNormShape> ReadGroupNorm(const KernelContext& ctx);
// tpc::RotaryHalf(x, cos, sin): cos and sin hold rows of x's last dim d (even) and
// broadcast to x's shape. Returns d.
absl::StatusOr<int64_t> RotaryHalfInputs(const KernelContext& ctx);
absl::Status MatMulNBits(KernelContext& ctx);          // matmul_nbits.cc
absl::Status PrepareMatMulNBits(KernelContext& ctx);   // matmul_nbits.cc
absl::Status MoE(KernelContext& ctx);                  // moe.cc
absl::Status CausalConvWithState(KernelContext& ctx);  // causal_conv.cc
// CausalConvWithState's operands checked by shape and type, and its layout, for every
// backend's kernel.
absl::StatusOr<math::CausalConvLayout> ReadCausalConvLayout(const KernelContext& ctx);
// MoE's operands checked by shape and type (one float type), and its layout, for every
// backend's kernel.
absl::StatusOr<math::MoeLayout> ReadMoeLayout(const KernelContext& ctx);
// MoE's and QMoE's attributes into `l`: the activation (refusing what neither kernel has),
// its alpha, beta and limit, the routing's normalization and k.
absl::Status ReadMoeAttributes(const KernelContext& ctx, math::MoeLayout* l);
// Weights of a tile an item of RunMoe's work dequantizes: 64 K (256 KiB of f32).
constexpr int64_t kExpertTileWeights = int64_t{1} << 16;
// One FC of the experts for RunMoe, whose work goes to the threads as (expert, a share of
// its output columns) items, about 16 a group of experts, each expert's share that of
// its tokens: a decode step's few experts still spread over every thread, and a prompt's
// many experts take one GEMM each.
struct ExpertProduct {
  // out[i · ld + j] = Σ_c in[i · cols + c] · W[j, c] for the expert's n rows of input and
  // its output columns j in [first, last) of W [rows, cols] (a view of MoE's operand, or
  // QMoE's codes, dequantized into `scratch`, the calling thread's, or read directly).
  std::function<void(int64_t expert, const float* in, int64_t n, int64_t first, int64_t last,
                     float* out, int64_t ld, AlignedVector<float>* scratch)>
      run;
  // The most output columns an item may take (a tile that must stay in cache); 0: any.
  int64_t max_columns = 0;
  // When set: the FC's input rows (n × cols) rearranged into `out` before `run` reads
  // them (QMoE's 4-bit codes read against each block's even then odd values).
  std::function<void(const float* in, int64_t n, float* out)> arrange;
};
// The f32 MoE of `l` on the input and router (inputs 0 and 1) into output 0, the experts'
// FC1 [fc1_rows, hidden] and FC2 [hidden, inter] products by `fc1` and `fc2`, the biases
// [experts, rows] or null.
absl::Status RunMoe(KernelContext& ctx, const math::MoeLayout& l, const ExpertProduct& fc1,
                    const float* b1, const ExpertProduct& fc2, const float* b2);
absl::Status QMoE(KernelContext& ctx);  // qmoe.cc
// QMoE's layout: the MoE's and each FC's quantization.
struct QMoeLayout {
  math::MoeLayout moe;
  math::MoeQuant fc1, fc2;
};
// QMoE's operands checked by shape and type (integer quantization of 4 or 8 bits, scales
// of the input's float type, no zero points), for every backend's kernel.
absl::StatusOr<QMoeLayout> ReadQMoeLayout(const KernelContext& ctx);

// ---- Attention (attention.cc, rotary.cc) ----
absl::Status Attention(KernelContext& ctx);
// Where one (batch, head) of a 3-D or 4-D Q/K/V operand lies: element (s, d) of head h of
// batch b is at `b * batch_stride + h * head_stride + s * row_stride + d`.
struct HeadLayout {
  int64_t heads = 0, seq = 0, size = 0;  // heads, sequence length, head size
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
  int64_t offset(int64_t b, int64_t h) const { return b * batch_stride + h * head_stride; }
};
// The layout of operand `t`: 4-D [batch, heads, seq, size], or 3-D [batch, seq, heads ·
// size] with `heads` (an attribute) dividing its last dim.
absl::StatusOr<HeadLayout> Layout(const KernelContext& ctx, const Tensor& t, int64_t heads,
                                  const char* what);
// Attention's (opset 23) operands checked and its geometry, for every backend's kernel.
struct AttentionShape {
  HeadLayout q, k, v;
  int64_t batch = 0, hq = 0, hkv = 0, hd = 0, vd = 0, qs = 0, past = 0, total = 0;
  int64_t mask_cols = 0;
  Shape mask_strides;  // the mask's over [batch, q heads, q, its columns]
  bool causal = false;
  int64_t mode = 0;  // qk_matmul_output_mode
  double softcap = 0, scale = 1;
};
absl::StatusOr<AttentionShape> ReadAttentionShape(const KernelContext& ctx);
// onnxruntime's MultiHeadAttention and Attention: operands checked and geometry, for every
// backend's kernel. q, k, v: MultiHeadAttention's operands; width and sizes: Attention's
// projection ([D, width], Q, K and V of `sizes`); kv: the new keys.
struct OrtAttentionShape {
  HeadLayout q, k, v;
  int64_t batch = 0, heads = 0, qs = 0, hd = 0, vd = 0, kv = 0, past = 0, total = 0;
  int64_t width = 0;
  std::vector<int64_t> sizes;
  Shape bias_strides;  // the attention bias's over [batch, heads, qs, total]; empty: none
  bool causal = false;
  double filter = -10000.0, scale = 1;
};
absl::StatusOr<OrtAttentionShape> ReadMultiHeadAttentionShape(const KernelContext& ctx);
absl::StatusOr<OrtAttentionShape> ReadMsAttentionShape(const KernelContext& ctx);
absl::Status GroupQueryAttention(KernelContext& ctx);
// GroupQueryAttention's operands by name, in onnxruntime's input order (the optional ones
// null when absent); every backend's kernel reads them through this.
struct GqaInputs {
  const Tensor& query;
  const Tensor *key, *value, *past_k, *past_v;
  const Tensor& seqlens;
  const Tensor *cos, *sin, *position_ids;
  const Tensor* head_sink;
  const Tensor *q_norm, *k_norm;  // the fused per-head norms' weights
};
GqaInputs GqaInputsOf(const KernelContext& ctx);
// GroupQueryAttention's operands checked by shape and type (and total_sequence_length, a
// host value), and its geometry, for every backend's kernel; the values of seqlens_k and
// position_ids are the kernels' to check.
absl::StatusOr<math::GqaLayout> ReadGqaLayout(const KernelContext& ctx);
// A windowed cache's past (sliding_window_cache, inputs 3 and 4): local_window_size rows
// at least (Kernel::fixed_cache_rows).
int64_t GqaCacheRows(const ir::Node& node, int input);
absl::Status MultiHeadAttention(KernelContext& ctx);
absl::Status MsAttention(KernelContext& ctx);
absl::Status MsRotaryEmbedding(KernelContext& ctx);  // com.microsoft's (rotary.cc)
absl::Status RotaryEmbedding(KernelContext& ctx);
// Both RotaryEmbeddings' operands checked by shape and type, and their layout (ONNX's, or
// onnxruntime's by the node's domain), for every backend's kernel; the position ids'
// values are the kernels' to check.
absl::StatusOr<math::RotaryLayout> ReadRotaryLayout(const KernelContext& ctx);
// onnxruntime's MRotaryEmbedding: RotaryEmbedding's layout over the token-by-token caches
// (mode 0, batch · seq rows) and the sections that make them from the caches' `positions`
// rows, times `scale`.
struct MRopeLayout {
  math::RotaryLayout rotary;
  math::MRopeSections sections;
  int64_t positions = 0;
  float scale = 1.0f;
};
absl::StatusOr<MRopeLayout> ReadMRopeLayout(const KernelContext& ctx);
absl::Status MRotaryEmbedding(KernelContext& ctx);  // (rotary.cc)

// ---- Convolutions and pools (conv.cc, pool.cc, deform_conv.cc) ----
absl::Status AveragePool(KernelContext& ctx);
absl::Status Col2Im(KernelContext& ctx);
absl::Status Conv(KernelContext& ctx);
absl::Status ConvTranspose(KernelContext& ctx);
absl::Status DeformConv(KernelContext& ctx);
absl::Status GlobalAveragePool(KernelContext& ctx);
absl::Status GlobalLpPool(KernelContext& ctx);
absl::Status GlobalMaxPool(KernelContext& ctx);
absl::Status LpPool(KernelContext& ctx);
absl::Status MaxPool(KernelContext& ctx);
absl::Status MaxUnpool(KernelContext& ctx);

// ---- Interpolation (resize.cc, grid_sample.cc) ----
absl::Status AffineGrid(KernelContext& ctx);
absl::Status GridSample(KernelContext& ctx);
absl::Status Resize(KernelContext& ctx);  // also Upsample

// ---- Detection (detection.cc) ----
absl::Status NonMaxSuppression(KernelContext& ctx);
absl::Status RoiAlign(KernelContext& ctx);

// ---- Spectral (spectral.cc) ----
absl::Status DFT(KernelContext& ctx);
absl::Status MelWeightMatrix(KernelContext& ctx);
absl::Status STFT(KernelContext& ctx);

// ---- Text (tfidf.cc) ----
absl::Status TfIdfVectorizer(KernelContext& ctx);

// ---- Quantization (quantize.cc) ----
absl::Status ConvInteger(KernelContext& ctx);
absl::Status DequantizeLinear(KernelContext& ctx);
absl::Status DynamicQuantizeLinear(KernelContext& ctx);
absl::Status MatMulInteger(KernelContext& ctx);
absl::Status QLinearConv(KernelContext& ctx);
absl::Status QLinearMatMul(KernelContext& ctx);
absl::Status QuantizeLinear(KernelContext& ctx);

// ---- Recurrent networks (recurrent.cc) ----
absl::Status GRU(KernelContext& ctx);
absl::Status LSTM(KernelContext& ctx);
absl::Status RNN(KernelContext& ctx);

// ---- Reductions (reduce.cc) ----
absl::Status ArgMax(KernelContext& ctx);
absl::Status ArgMin(KernelContext& ctx);
absl::Status CumSum(KernelContext& ctx);
absl::Status Reduce(KernelContext& ctx);  // every Reduce* op, by op type
absl::Status TopK(KernelContext& ctx);

// ---- Softmax and norms (norms.cc) ----
absl::Status BatchNormalization(KernelContext& ctx);
absl::Status GroupNormalization(KernelContext& ctx);
absl::Status Hardmax(KernelContext& ctx);
absl::Status InstanceNormalization(KernelContext& ctx);
absl::Status LRN(KernelContext& ctx);
absl::Status LayerNormalization(KernelContext& ctx);
absl::Status LogSoftmax(KernelContext& ctx);
absl::Status MeanVarianceNormalization(KernelContext& ctx);
absl::Status RMSNormalization(KernelContext& ctx);
// onnxruntime's SkipLayerNormalization and SkipSimplifiedLayerNormalization.
absl::Status SkipLayerNormalization(KernelContext& ctx);
absl::Status Softmax(KernelContext& ctx);

// ---- Vector norms, GatedAdd, linear attention (vector_norms.cc, gated_add.cc,
// linear_attention.cc): each Read/Check gives the operands checked by shape and type ----
struct GatedRmsNormShape {  // `groups` groups of `size` (the scale's length)
  int64_t groups = 0, size = 0;
  float epsilon = 1e-5f;
  bool silu = true;
};
absl::StatusOr<GatedRmsNormShape> ReadGatedRmsNorm(const KernelContext& ctx);
absl::Status GatedRMSNorm(KernelContext& ctx);
struct LpNormShape {  // `lines` lines of `count` elements `inner` apart
  int64_t lines = 0, count = 0, inner = 1;
  int p = 2;
};
absl::StatusOr<LpNormShape> ReadLpNorm(const KernelContext& ctx);
absl::Status LpNormalization(KernelContext& ctx);
absl::StatusOr<int64_t> GatedAddRows(const KernelContext& ctx);  // one gate value a row
absl::Status GatedAdd(KernelContext& ctx);
absl::StatusOr<math::LinearAttentionLayout> ReadLinearAttentionLayout(const KernelContext& ctx);
absl::Status LinearAttention(KernelContext& ctx);
absl::Status CheckLinearGate(const KernelContext& ctx);
absl::Status LinearAttentionGate(KernelContext& ctx);

// ---- Shape and movement (movement.cc, indexing.cc) ----
absl::Status CenterCropPad(KernelContext& ctx);
absl::Status Compress(KernelContext& ctx);
absl::Status Concat(KernelContext& ctx);
absl::Status DepthToSpace(KernelContext& ctx);
absl::Status Dropout(KernelContext& ctx);
absl::Status Expand(KernelContext& ctx);
absl::Status Flatten(KernelContext& ctx);
absl::Status Gather(KernelContext& ctx);
absl::Status CheckIndices(KernelContext& ctx);  // tpc domain
absl::Status GatherElements(KernelContext& ctx);
absl::Status GatherND(KernelContext& ctx);
absl::Status Identity(KernelContext& ctx);
absl::Status NonZero(KernelContext& ctx);
absl::Status Pad(KernelContext& ctx);
absl::Status Reshape(KernelContext& ctx);
absl::Status ReverseSequence(KernelContext& ctx);
absl::Status ScatterElements(KernelContext& ctx);
absl::Status ScatterND(KernelContext& ctx);
absl::Status Slice(KernelContext& ctx);
absl::Status SpaceToDepth(KernelContext& ctx);
absl::Status Split(KernelContext& ctx);
absl::Status Squeeze(KernelContext& ctx);
absl::Status Tile(KernelContext& ctx);
absl::Status Transpose(KernelContext& ctx);
absl::Status Trilu(KernelContext& ctx);
absl::Status Unique(KernelContext& ctx);  // unique.cc
absl::Status Unsqueeze(KernelContext& ctx);

// ---- Losses (loss.cc) ----
absl::Status NegativeLogLikelihoodLoss(KernelContext& ctx);
absl::Status SoftmaxCrossEntropyLoss(KernelContext& ctx);

// ---- Collectives of the `tpc` domain (collectives.cc) ----
absl::Status AllGather(KernelContext& ctx);
absl::Status AllReduce(KernelContext& ctx);
absl::Status AllToAll(KernelContext& ctx);
absl::Status Rank(KernelContext& ctx);
absl::Status Shard(KernelContext& ctx);
absl::Status ReduceScatter(KernelContext& ctx);

}  // namespace tpc::runtime::cpu
