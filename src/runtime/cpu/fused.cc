// The fused operators of the fusion pass (tpc/runtime/fusion.h), f32:
// - tpc::FusedMatMul(x, W, bias?) {activation}: act(x·W + bias), the bias and activation
//   applied to each block of columns by the thread that computed it, while in cache;
// - tpc::RotaryHalf(x, cos, sin): x·cos + rotate_half(x)·sin over the last axis
//   (Llama's rotary embedding as exported: Slice, Slice, Neg, Concat, Mul, Mul, Add);
// - tpc::AttentionCore(Q, K, V, mask?) {scale, scale_divides, k_transposed}:
//   Softmax(Q·Kᵀ ·/÷ scale + mask) · V over numpy-broadcast batch dims, a block of query
//   rows at a time: the [.., s, t] scores exist one block per thread, never whole, and
//   only over the keys the block's mask leaves open (OpenSpan).
// Each computes what the chain it replaces computes, with the same per-element functions
// (vector_math.h), so fused and unfused runs agree to rounding.
#include <algorithm>
#include <limits>
#include <vector>

#include "isa_loops.h"
#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

absl::StatusOr<Activation> ReadActivation(const KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::UnaryOp op, FusedActivation(ctx));
  switch (op) {
    case math::UnaryOp::kGeluErf:
      return Activation::kGelu;
    case math::UnaryOp::kGeluTanh:
      return Activation::kGeluTanh;
    case math::UnaryOp::kRelu:
      return Activation::kRelu;
    case math::UnaryOp::kTanh:
      return Activation::kTanh;
    case math::UnaryOp::kSilu:
      return Activation::kSiLU;
    default:
      return Activation::kNone;
  }
}

// The columns [lo, hi) of a row of scores that its mask leaves open. A mask value at or
// below kClosed (-inf; float's lowest, as torch's exporters write it; -1e9) puts its score
// more than 9e7 below the row's maximum whenever some mask value of the row is above
// kOpen and the row's scaled scores are finite and differ by less than 9e7. Its
// exponential is then exactly 0 (vector_math.h's Exp is 0 below -87.5): such columns add
// nothing to the row's sum nor to P·V, so they are not computed, and the result is the
// unfused chain's to rounding. Outside that (a closed key scoring 9e7 above every open
// one, non-finite scores) the chain would let a closed key in, or a NaN or inf of K or V
// that the mask closes reach the row; the fused core does not, for the keys outside its
// block's span. A row without a value above kOpen keeps every column, as the unfused
// Softmax sees it.
struct Span {
  int64_t lo, hi;
};

Span OpenSpan(const float* mask, int64_t n, int64_t step) {
  constexpr float kClosed = -1e8f, kOpen = -1e7f;
  int64_t lo = 0, hi = n;
  while (lo < n && mask[lo * step] <= kClosed) ++lo;
  while (hi > lo && mask[(hi - 1) * step] <= kClosed) --hi;
  for (int64_t j = lo; j < hi; ++j) {
    if (mask[j * step] > kOpen) return {lo, hi};
  }
  return {0, n};
}

}  // namespace

absl::StatusOr<math::UnaryOp> FusedActivation(const KernelContext& ctx) {
  const std::string a = ctx.node().attr_string("activation", "");
  if (a.empty()) return math::UnaryOp::kIdentity;
  if (a == "Gelu") return math::UnaryOp::kGeluErf;
  if (a == "GeluTanh") return math::UnaryOp::kGeluTanh;
  if (a == "Relu") return math::UnaryOp::kRelu;
  if (a == "Tanh") return math::UnaryOp::kTanh;
  if (a == "SiLU") return math::UnaryOp::kSilu;
  return ctx.Error(absl::StrCat("unknown activation '", a, "'"));
}

Shape AttentionGeometry::out() const {
  Shape o = batch;
  if (grouped) {  // [.., h, n] back to the declared h·n heads
    const int64_t n = o.back();
    o.pop_back();
    o.back() *= n;
  }
  o.push_back(s);
  o.push_back(dv);
  return o;
}

namespace {

// kv_grouped: Q's heads [.., h·n] and the mask's head dim (1 or h·n) become [.., h, n] or
// [.., 1, 1]; K's and V's h heads [.., h, 1] (the same memory, viewed).
absl::Status SplitGroupedHeads(const KernelContext& ctx, AttentionGeometry& g, Shape& mask) {
  if (g.bq.empty() || g.bk.size() != g.bq.size() || g.bv.size() != g.bq.size()) {
    return ctx.Error("kv_grouped takes Q, K and V with heads (a batch dim) of one rank");
  }
  const int64_t hq = g.bq.back(), h = g.bk.back();
  if (g.bv.back() != h || h <= 0 || hq % h != 0) {
    return ctx.Error(absl::StrCat("kv_grouped: K's and V's heads (", h, ", ", g.bv.back(),
                                  ") must be one count dividing Q's (", hq, ")"));
  }
  const int64_t n = hq / h;
  g.bq.back() = h;
  g.bq.push_back(n);
  g.bk.push_back(1);
  g.bv.push_back(1);
  if (mask.size() > 2) {
    const size_t at = mask.size() - 3;  // the mask's head dim
    const int64_t mh = mask[at];
    if (mh != 1 && mh != hq) {
      return ctx.Error(
          absl::StrCat("kv_grouped: the mask's heads (", mh, ") are neither 1 nor Q's (", hq, ")"));
    }
    mask[at] = mh == 1 ? 1 : h;
    mask.insert(mask.begin() + static_cast<std::ptrdiff_t>(at) + 1, mh == 1 ? 1 : n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AttentionGeometry> AttentionInputs(const KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  AttentionGeometry g;
  g.k_transposed = ctx.node().attr_int("k_transposed", 1) != 0;
  g.divide = ctx.node().attr_int("scale_divides", 0) != 0;
  g.scale = ctx.node().attr_float("scale", 1.0f);
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->rank() < 2) return ctx.Error(absl::StrCat("takes matrices, not ", t->TypeString()));
  }
  g.s = q.dim(q.rank() - 2);
  g.d = q.dim(q.rank() - 1);
  g.t = g.k_transposed ? k.dim(k.rank() - 1) : k.dim(k.rank() - 2);
  const int64_t kd = g.k_transposed ? k.dim(k.rank() - 2) : k.dim(k.rank() - 1);
  g.dv = v.dim(v.rank() - 1);
  if (kd != g.d || v.dim(v.rank() - 2) != g.t) {
    return ctx.Error(absl::StrCat("Q ", q.TypeString(), ", K ", k.TypeString(), " and V ",
                                  v.TypeString(), " do not multiply"));
  }
  g.bq.assign(q.shape().begin(), q.shape().end() - 2);
  g.bk.assign(k.shape().begin(), k.shape().end() - 2);
  g.bv.assign(v.shape().begin(), v.shape().end() - 2);
  Shape mask_shape = mask != nullptr ? mask->shape() : Shape{};
  g.grouped = ctx.node().attr_int("kv_grouped", 0) != 0;
  if (g.grouped) {
    TPC_RETURN_IF_ERROR(SplitGroupedHeads(ctx, g, mask_shape));
  }
  Shape bm;
  if (mask_shape.size() > 2) bm.assign(mask_shape.begin(), mask_shape.end() - 2);
  TPC_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(ctx, {g.bq, g.bk, g.bv, bm}));
  if (mask != nullptr) {
    Shape scores = g.batch;
    scores.push_back(g.s);
    scores.push_back(g.t);
    TPC_ASSIGN_OR_RETURN(const Shape joint, BroadcastShapes(ctx, {scores, mask_shape}));
    if (joint != scores) {
      return ctx.Error(absl::StrCat("mask ", mask->TypeString(), " does not broadcast to ",
                                    ShapeString(g.out())));
    }
    g.mask_strides = BroadcastStrides(mask_shape, scores);
  }
  return g;
}

absl::StatusOr<int64_t> RotaryHalfInputs(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  for (const Tensor* t : {&x, &cos, &sin}) {
    if (t->rank() < 1) return ctx.Error(absl::StrCat("takes tensors, not ", t->TypeString()));
  }
  const int64_t d = x.dim(x.rank() - 1);
  if (d % 2 != 0 || cos.dim(cos.rank() - 1) != d || sin.dim(sin.rank() - 1) != d ||
      cos.rank() > x.rank() || sin.rank() > x.rank()) {
    return ctx.Error(absl::StrCat("cos ", cos.TypeString(), " and sin ", sin.TypeString(),
                                  " must hold rows of the last dim of ", x.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(const Shape joint,
                       BroadcastShapes(ctx, {x.shape(), cos.shape(), sin.shape()}));
  if (joint != x.shape()) {
    return ctx.Error(absl::StrCat("cos ", cos.TypeString(), " and sin ", sin.TypeString(),
                                  " do not broadcast to ", x.TypeString()));
  }
  return d;
}

absl::Status FusedMatMul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  if (IsHalfType(a.dtype()) && b.rank() == 2 && a.rank() >= 2) {
    TPC_ASSIGN_OR_RETURN(const Activation act, ReadActivation(ctx));
    return HalfMatMul(ctx, bias, act);
  }
  if (a.dtype() != ir::DType::kF32 || b.dtype() != ir::DType::kF32 || b.rank() != 2 ||
      a.rank() < 2) {
    return ctx.Error(absl::StrCat("takes f32, f16 or bf16 [.., k] x [k, n], not ", a.TypeString(),
                                  " x ", b.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(const Activation act, ReadActivation(ctx));
  TPC_ASSIGN_OR_RETURN(const MatMulShape g, MatMulShapes(ctx, a, b));
  if (bias != nullptr && (bias->dtype() != ir::DType::kF32 || bias->num_elements() != g.n)) {
    return ctx.Error(absl::StrCat("bias ", bias->TypeString(), " is not ", g.n, " floats"));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, a.dtype()));
  const int64_t m = a.num_elements() / g.k, n = g.n;
  float* py = y->data<float>();
  const float* pbias = bias != nullptr ? bias->data<float>() : nullptr;
  const ColumnsEpilogue epilogue = [&](int64_t col, int64_t cols) {
    ActivationRows(act, py + col, m, n, cols, pbias != nullptr ? pbias + col : nullptr);
  };
  TPC_ASSIGN_OR_RETURN(const bool packed, PackedMatMul(ctx, a, b, y, &epilogue));
  if (packed) return absl::OkStatus();
  ParallelGemm2D<float>(ctx.pool(), false, false, m, n, g.k, 1.0f, a.data<float>(), g.k,
                        b.data<float>(), n, 0.0f, py, n);
  ctx.pool().ParallelFor(
      m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)),
      [&](int64_t lo, int64_t hi) { ActivationRows(act, py + lo * n, hi - lo, n, n, pbias); });
  return absl::OkStatus();
}

absl::Status AttentionCore(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  for (const Tensor* t : {&q, &k, &v, mask}) {
    if (t != nullptr && t->dtype() != ir::DType::kF32) {
      return ctx.Error(absl::StrCat("takes f32 matrices, not ", t->TypeString()));
    }
  }
  TPC_ASSIGN_OR_RETURN(const AttentionGeometry g, AttentionInputs(ctx));
  const int64_t s = g.s, t = g.t, d = g.d, dv = g.dv;
  const Shape& batch = g.batch;
  const Shape& mask_strides = g.mask_strides;
  const bool k_transposed = g.k_transposed, divide = g.divide;
  const float scale = g.scale;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out(), ir::DType::kF32));
  // Offsets of the Q, K, V matrices and of the mask's [s, t] block per batch entry.
  const BroadcastOffsets<4> at(batch, {Scaled(BroadcastStrides(g.bq, batch), s * d),
                                       Scaled(BroadcastStrides(g.bk, batch), t * d),
                                       Scaled(BroadcastStrides(g.bv, batch), t * dv),
                                       mask != nullptr ? mask_strides : Shape(batch.size(), 0)});
  const int64_t count = NumElements(batch);
  // Blocks of query rows: enough tasks for the threads, few enough GEMM calls.
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(s, 64));
  const int64_t blocks = (s + block - 1) / block;
  const float alpha = divide ? 1.0f : scale;
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  const float* pv = v.data<float>();
  const float* pm = mask != nullptr ? mask->data<float>() : nullptr;
  float* py = y->data<float>();
  const size_t nb = batch.size();  // the mask's row and column strides follow
  // Tasks of at least ~2^17 multiply-adds per hand-off: tiny heads run on one thread.
  const int64_t task_work = std::max<int64_t>(1, block * t * (d + dv));
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 17) / task_work);
  ctx.pool().ParallelFor(count * blocks, grain, [&](int64_t first, int64_t last) {
    std::vector<float> sc(static_cast<size_t>(block * t));
    std::vector<Span> spans(static_cast<size_t>(block), Span{0, t});
    for (int64_t task = first; task < last; ++task) {
      const int64_t i = task / blocks, r0 = (task % blocks) * block;
      const int64_t rows = std::min(block, s - r0);
      const auto [oq, ok, ov, om] = at.At(i);
      const float* qb = pq + oq + r0 * d;
      const float* mb = pm != nullptr ? pm + om + r0 * mask_strides[nb] : nullptr;
      const int64_t mask_row = pm != nullptr ? mask_strides[nb] : 0;
      const int64_t mask_col = pm != nullptr ? mask_strides[nb + 1] : 0;
      // Only the key columns some row of the block can see: a causal mask leaves the
      // first block a fraction of them.
      int64_t lo = 0, hi = t;
      if (mb != nullptr) {
        lo = t;
        hi = 0;
        for (int64_t r = 0; r < rows; ++r) {
          spans[r] = OpenSpan(mb + r * mask_row, t, mask_col);
          lo = std::min(lo, spans[r].lo);
          hi = std::max(hi, spans[r].hi);
        }
      }
      const int64_t w = hi - lo;
      if (w == 0) {  // no keys: Softmax of nothing times V of nothing is 0 (BLAS refuses k = 0)
        std::fill(py + (i * s + r0) * dv, py + (i * s + r0 + rows) * dv, 0.0f);
        continue;
      }
      if (k_transposed) {
        Gemm2D<float>(false, false, rows, w, d, alpha, qb, d, pk + ok + lo, t, 0.0f, sc.data(), w);
      } else {
        Gemm2D<float>(false, true, rows, w, d, alpha, qb, d, pk + ok + lo * d, d, 0.0f, sc.data(),
                      w);
      }
      if (mb == nullptr) {
        ScaleMaskSoftmaxRows(sc.data(), rows, w, divide ? scale : 1.0f, nullptr, 0, 0);
      } else {
        for (int64_t r = 0; r < rows; ++r) {
          float* row = sc.data() + r * w;
          const Span sp = spans[r];
          ScaleMaskSoftmaxRows(row + (sp.lo - lo), 1, sp.hi - sp.lo, divide ? scale : 1.0f,
                               mb + r * mask_row + sp.lo * mask_col, 0, mask_col);
          std::fill(row, row + (sp.lo - lo), 0.0f);
          std::fill(row + (sp.hi - lo), row + w, 0.0f);
        }
      }
      Gemm2D<float>(false, false, rows, dv, w, 1.0f, sc.data(), w, pv + ov + lo * dv, dv, 0.0f,
                    py + (i * s + r0) * dv, dv);
    }
  });
  return absl::OkStatus();
}

absl::Status RotaryHalf(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  for (const Tensor* t : {&x, &cos, &sin}) {
    if (t->dtype() != ir::DType::kF32) {
      return ctx.Error(absl::StrCat("takes f32 tensors, not ", t->TypeString()));
    }
  }
  TPC_ASSIGN_OR_RETURN(const int64_t d, RotaryHalfInputs(ctx));
  const int64_t h = d / 2;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kF32));
  const Shape lead(x.shape().begin(), x.shape().end() - 1);
  // The cos and sin rows of each row of x (their last-dim strides are not read).
  const BroadcastOffsets<2> at(
      lead, {BroadcastStrides(cos.shape(), x.shape()), BroadcastStrides(sin.shape(), x.shape())});
  const int64_t rows = NumElements(lead);
  const float* px = x.data<float>();
  const float* pc = cos.data<float>();
  const float* ps = sin.data<float>();
  float* py = y->data<float>();
  ctx.pool().ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(d, 1)),
                         [&](int64_t first, int64_t last) {
                           for (int64_t r = first; r < last; ++r) {
                             const auto [oc, os] = at.At(r);
                             const float* xr = px + r * d;
                             const float* c = pc + oc;
                             const float* s = ps + os;
                             float* yr = py + r * d;
                             // x·cos + rotate_half(x)·sin, rotate_half(x) = (-x[h:], x[:h]).
                             for (int64_t j = 0; j < h; ++j)
                               yr[j] = xr[j] * c[j] + -xr[j + h] * s[j];
                             for (int64_t j = h; j < d; ++j)
                               yr[j] = xr[j] * c[j] + xr[j - h] * s[j];
                           }
                         });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
