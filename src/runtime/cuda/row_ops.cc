// Row CUDA kernels: Softmax/LogSoftmax, LayerNormalization and the RMS norms, the
// Reduce* of sums, means and extremes, the global pools and MeanVarianceNormalization. Shapes as
// the CPU kernels; math in math/rows.h.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::Status SoftmaxImpl(KernelContext& ctx, bool log) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::SoftmaxLines lines, cpu::ReadSoftmaxLines(ctx, x));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const RowLayout rl{lines.outer, lines.len, lines.inner};
  return Check(ctx, LaunchSoftmax(k, x.raw(), y->raw(), rl, log, StreamOf(ctx)));
}

// `t` as `len` elements: itself, or broadcast into device scratch (a scale of [1]).
absl::StatusOr<Tensor> FullRow(const KernelContext& ctx, const Tensor& t, const Shape& norm_shape) {
  TPC_ASSIGN_OR_RETURN(Shape b, cpu::BroadcastShapes(ctx, {t.shape(), norm_shape}));
  if (b != norm_shape) return ctx.Error("scale or bias does not broadcast to the normalised dims");
  if (t.shape() == norm_shape) return t;
  if (norm_shape.size() > static_cast<size_t>(math::kMaxDims)) return ctx.Error("rank over 8");
  TPC_ASSIGN_OR_RETURN(Tensor full, Scratch(ctx, t.dtype(), norm_shape));
  const StridedView vs = math::BroadcastView(t.shape(), norm_shape);
  const StridedView vd = math::ContiguousView(norm_shape);
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchCopy(ir::DTypeSize(t.dtype()), t.raw(), vs, full.raw(), vd,
                                            full.num_elements(), StreamOf(ctx))));
  return full;
}

// Normalizes `rows` rows of `cols` of `x` (device memory, the kind of output 0) into
// output 0 of shape `shape`, with optional statistics outputs `mean_index` and
// `inv_index` (-1: none) of shape `stat_shape`, computed in f32.
absl::Status NormRows(KernelContext& ctx, const void* x, const Shape& shape, const Tensor& scale,
                      const Tensor& bias, int64_t rows, int64_t cols, float eps, bool rms,
                      int mean_index, int inv_index, const Shape& stat_shape) {
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape, scale.dtype()));
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, y->dtype()));
  // Statistics are computed in f32; an output of another type gets a converted copy.
  Tensor* stats[2] = {nullptr, nullptr};  // mean, inv_std
  Tensor f32_stats[2];
  const int index[2] = {mean_index, inv_index};
  for (int s = 0; s < 2; ++s) {
    if (index[s] < 0 || !ctx.wants_output(index[s])) continue;
    TPC_ASSIGN_OR_RETURN(stats[s], ctx.Output(index[s], stat_shape));
    if (stats[s]->dtype() != ir::DType::kF32) {
      TPC_RETURN_IF_ERROR(FloatKindOf(ctx, stats[s]->dtype()).status());
      TPC_ASSIGN_OR_RETURN(f32_stats[s], Scratch(ctx, ir::DType::kF32, stat_shape));
    }
  }
  auto stat_ptr = [&](int s) -> float* {
    if (stats[s] == nullptr) return nullptr;
    return f32_stats[s].raw() ? f32_stats[s].data<float>() : stats[s]->data<float>();
  };
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchNorm(k, x, scale.raw(), bias.raw(), y->raw(), stat_ptr(0),
                                            stat_ptr(1), rows, cols, eps, rms, StreamOf(ctx))));
  for (int s = 0; s < 2; ++s) {
    if (f32_stats[s].raw() == nullptr) continue;
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchCast(FloatKind::kF32, *KindOf(stats[s]->dtype()), f32_stats[s].raw(),
                              stats[s]->raw(), rows, StreamOf(ctx))));
  }
  return absl::OkStatus();
}

// LayerNormalization (rms = false: outputs Y, Mean, InvStdDev) and the RMS norms
// (outputs Y, InvStdDev): rows from `axis` to the end, statistics in f32.
absl::Status NormImpl(KernelContext& ctx, bool rms) {
  const Tensor& x = ctx.input(0);
  TPC_RETURN_IF_ERROR(FloatKindOf(ctx, x.dtype()).status());
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? rows : cols) *= x.dim(i);
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.input(i).dtype() != x.dtype()) {
      return ctx.Error(absl::StrCat("input ", i, " differs from X in element type"));
    }
  }
  TPC_ASSIGN_OR_RETURN(Tensor scale, FullRow(ctx, ctx.input(1), norm_shape));
  Tensor bias;
  if (!rms && ctx.has_input(2)) {
    TPC_ASSIGN_OR_RETURN(bias, FullRow(ctx, ctx.input(2), norm_shape));
  }
  Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(static_cast<size_t>(rank), 1);
  return NormRows(ctx, x.raw(), x.shape(), scale, bias, rows, cols, eps, rms, rms ? -1 : 1,
                  rms ? 1 : 2, stat_shape);
}

// onnxruntime's SkipLayerNormalization (input, skip, gamma, beta, bias) and
// SkipSimplifiedLayerNormalization (input, skip, gamma, bias): the norm of
// input + skip (+ bias) over the last dim; outputs output, mean, inv_std_var and the sum.
absl::Status SkipNormImpl(KernelContext& ctx, bool rms) {
  const Tensor& x = ctx.input(0);
  const Tensor& skip = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  if (x.rank() < 1 || x.rank() > math::kMaxDims) return ctx.Error("the input needs a hidden dim");
  const int64_t cols = x.dim(x.rank() - 1);
  const int64_t rows = cols == 0 ? 0 : x.num_elements() / cols;
  const Tensor* beta = rms ? nullptr : ctx.optional_input(3);
  const Tensor* bias = ctx.optional_input(rms ? 3 : 4);
  for (const Tensor* t : {&ctx.input(2), beta, bias}) {
    if (t != nullptr && (t->dtype() != x.dtype() || t->num_elements() != cols)) {
      return ctx.Error(absl::StrCat("gamma, beta and bias must hold ", cols,
                                    " elements (the hidden dim) of the input's type"));
    }
  }
  TPC_ASSIGN_OR_RETURN(Shape shape, cpu::BroadcastShapes(ctx, {x.shape(), skip.shape()}));
  if (shape != x.shape() || skip.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("skip ", skip.TypeString(), " does not broadcast to the input ",
                                  x.TypeString()));
  }
  // The sum: output 3 when wanted, else scratch.
  Tensor sum;
  if (ctx.wants_output(3)) {
    TPC_ASSIGN_OR_RETURN(Tensor * s, ctx.Output(3, x.shape(), x.dtype()));
    sum = *s;
  } else {
    TPC_ASSIGN_OR_RETURN(sum, Scratch(ctx, x.dtype(), x.shape()));
  }
  StridedView vx = math::ContiguousView(shape), vk = math::BroadcastView(skip.shape(), shape),
              vs = vx;
  math::Simplify({&vx, &vk, &vs});
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(k, BinaryOp::kAdd, x.raw(), vx, skip.raw(), vk,
                                              sum.raw(), sum.num_elements(), StreamOf(ctx))));
  if (bias != nullptr) {
    StridedView va = math::ContiguousView(shape), vb = math::BroadcastView({cols}, shape);
    math::Simplify({&va, &vb});
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(k, BinaryOp::kAdd, sum.raw(), va, bias->raw(), vb,
                                                sum.raw(), sum.num_elements(), StreamOf(ctx))));
  }
  Shape stat_shape = x.shape();
  stat_shape.back() = 1;
  const float eps = ctx.node().attr_float("epsilon", 1e-12f);
  return NormRows(ctx, sum.raw(), x.shape(), ctx.input(2), beta != nullptr ? *beta : Tensor(), rows,
                  cols, eps, rms, 1, 2, stat_shape);
}

// The reduced dims of input 0 (axes from the attribute or input 1; none listed: all,
// unless noop_with_empty_axes) and the output shape; nullopt for a no-op.
struct ReducedDims {
  std::vector<bool> reduced;
  Shape out;
};
absl::StatusOr<std::optional<ReducedDims>> ReadReducedDims(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(auto axes_opt, cpu::AxesFromAttrOrInput(ctx, "axes", 1));
  std::vector<int64_t> axes = axes_opt.value_or(std::vector<int64_t>{});
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  if (axes.empty() && ctx.node().attr_int("noop_with_empty_axes", 0) != 0) {
    return std::optional<ReducedDims>();
  }
  ReducedDims r;
  r.reduced.assign(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    TPC_ASSIGN_OR_RETURN(int64_t ax, cpu::NormalizeAxis(ctx, a, rank));
    r.reduced[static_cast<size_t>(ax)] = true;
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (!r.reduced[static_cast<size_t>(i)]) r.out.push_back(x.dim(i));
    if (r.reduced[static_cast<size_t>(i)] && keepdims) r.out.push_back(1);
  }
  return std::optional<ReducedDims>(std::move(r));
}

// Reduces `src` (shape `shape`, kind `src_kind`) over the reduced dims into `dst` (kind
// `dst_kind`): each run of adjacent reduced dims in one pass (the last run first), each pass
// one row kernel, the partial totals between passes in f32; a mean of equal-sized means is
// the mean, and sums, products and extremes compose the same way (math::ReducePass).
absl::Status ReduceDims(KernelContext& ctx, ReduceKind kind, const Tensor& src_in,
                        FloatKind src_kind_in, const std::vector<bool>& reduced, void* dst_out,
                        FloatKind dst_kind_out) {
  const int64_t rank = static_cast<int64_t>(reduced.size());
  std::vector<std::pair<int64_t, int64_t>> runs;  // [first, last] dims
  for (int64_t i = rank - 1; i >= 0; --i) {
    if (!reduced[static_cast<size_t>(i)]) continue;
    if (!runs.empty() && runs.back().first == i + 1) {
      runs.back().first = i;
    } else {
      runs.push_back({i, i});
    }
  }
  if (runs.empty()) {  // a scalar: its one term, finished (|x|, x², log x...)
    return Check(ctx, LaunchReduce(src_kind_in, dst_kind_out, kind, src_in.raw(), dst_out,
                                   RowLayout{src_in.num_elements(), 1, 1}, StreamOf(ctx)));
  }
  Shape cur = src_in.shape();
  Tensor src = src_in, tmp;
  FloatKind src_kind = src_kind_in;
  for (size_t t = 0; t < runs.size(); ++t) {
    const auto [first, last] = runs[t];
    RowLayout rl;
    for (int64_t i = 0; i < rank; ++i) {
      (i < first ? rl.outer : (i <= last ? rl.len : rl.inner)) *= cur[static_cast<size_t>(i)];
    }
    for (int64_t i = first; i <= last; ++i) cur[static_cast<size_t>(i)] = 1;
    const bool final_pass = t + 1 == runs.size();
    Tensor dst;
    if (!final_pass) {
      TPC_ASSIGN_OR_RETURN(dst, Scratch(ctx, ir::DType::kF32, cur));
    }
    void* dst_ptr = final_pass ? dst_out : dst.raw();
    const FloatKind dst_kind = final_pass ? dst_kind_out : FloatKind::kF32;
    const math::ReducePass pass(kind, t == 0, final_pass);
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchReduce(src_kind, dst_kind, pass, src.raw(), dst_ptr, rl, StreamOf(ctx))));
    tmp = src;  // keeps the previous scratch alive until the next pass is queued
    src = dst;
    src_kind = dst_kind;
  }
  return absl::OkStatus();
}

absl::Status ReduceImpl(KernelContext& ctx, ReduceKind kind) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const auto dims, ReadReducedDims(ctx));
  if (!dims) return cpu::CopyWithShape(ctx, x.shape());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, dims->out, x.dtype()));
  return ReduceDims(ctx, kind, x, k, dims->reduced, y->raw(), k);
}

// ReduceLogSumExp, shifted by the maximum as log(Σ exp(x − m)) + m in f32 (the CPU sums
// exp(x) in double, unshifted; the shift keeps f32 from overflowing): m over the reduced
// dims (kept), 0 where it is not finite (a row of −inf then gives log 0 = −inf, and +inf
// or NaN pass through the sum as the CPU's do); x − m and its exponential in f32 scratch;
// their sum, its log, plus m, in the output's type.
absl::Status ReduceLogSumExpImpl(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const auto dims, ReadReducedDims(ctx));
  if (!dims) return cpu::CopyWithShape(ctx, x.shape());
  if (x.rank() > math::kMaxDims) {
    return ctx.Error(
        absl::StrCat("rank ", x.rank(), " is over the CUDA kernels' ", math::kMaxDims));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, dims->out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  Shape kept = x.shape();
  for (size_t d = 0; d < kept.size(); ++d) {
    if (dims->reduced[d]) kept[d] = 1;
  }
  const cudaStream_t stream = StreamOf(ctx);
  TPC_ASSIGN_OR_RETURN(Tensor m, Scratch(ctx, ir::DType::kF32, kept));
  TPC_RETURN_IF_ERROR(
      ReduceDims(ctx, ReduceKind::kMax, x, k, dims->reduced, m.raw(), FloatKind::kF32));
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchUnary(FloatKind::kF32, UnaryOp::kFiniteOrZero, {}, m.raw(),
                                             m.raw(), m.num_elements(), stream)));
  TPC_ASSIGN_OR_RETURN(Tensor t, Scratch(ctx, ir::DType::kF32, x.shape()));
  const void* xf = x.raw();
  if (k != FloatKind::kF32) {
    TPC_RETURN_IF_ERROR(
        Check(ctx, LaunchCast(k, FloatKind::kF32, x.raw(), t.raw(), x.num_elements(), stream)));
    xf = t.raw();
  }
  StridedView vx = math::ContiguousView(x.shape()), vm = math::BroadcastView(kept, x.shape()),
              vt = vx;
  math::Simplify({&vx, &vm, &vt});
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(FloatKind::kF32, BinaryOp::kSub, xf, vx, m.raw(), vm,
                                              t.raw(), t.num_elements(), stream)));
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchUnary(FloatKind::kF32, UnaryOp::kExp, {}, t.raw(), t.raw(),
                                             t.num_elements(), stream)));
  TPC_ASSIGN_OR_RETURN(Tensor s, Scratch(ctx, ir::DType::kF32, kept));
  TPC_RETURN_IF_ERROR(ReduceDims(ctx, ReduceKind::kLogSum, t, FloatKind::kF32, dims->reduced,
                                 s.raw(), FloatKind::kF32));
  const StridedView vs = math::ContiguousView(kept);
  TPC_RETURN_IF_ERROR(Check(ctx, LaunchBinary(FloatKind::kF32, BinaryOp::kAdd, s.raw(), vs, m.raw(),
                                              vs, s.raw(), s.num_elements(), stream)));
  if (k == FloatKind::kF32) {
    ctx.backend().Copy(y->raw(), s.raw(), s.nbytes());
    return absl::OkStatus();
  }
  return Check(ctx, LaunchCast(FloatKind::kF32, k, s.raw(), y->raw(), s.num_elements(), stream));
}

}  // namespace

// Hardmax over the softmax's lines (the axis as each opset reads it).
absl::Status Hardmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::SoftmaxLines lines, cpu::ReadSoftmaxLines(ctx, x));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return Check(ctx, LaunchHardmax(k, x.raw(), y->raw(),
                                  RowLayout{lines.outer, lines.len, lines.inner}, StreamOf(ctx)));
}

absl::Status Softmax(KernelContext& ctx) { return SoftmaxImpl(ctx, false); }
absl::Status LogSoftmax(KernelContext& ctx) { return SoftmaxImpl(ctx, true); }
absl::Status LayerNormalization(KernelContext& ctx) { return NormImpl(ctx, false); }
absl::Status RMSNormalization(KernelContext& ctx) { return NormImpl(ctx, true); }
absl::Status SkipLayerNormalization(KernelContext& ctx) {
  return SkipNormImpl(ctx, ctx.node().op_type() == "SkipSimplifiedLayerNormalization");
}
absl::Status ReduceSum(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kSum); }
absl::Status ReduceMean(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kMean); }
absl::Status ReduceMax(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kMax); }
absl::Status ReduceMin(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kMin); }
namespace {

// ArgMax and ArgMin along `axis`: one row per (outer, inner) index, as the CPU kernel.
absl::Status ArgReduceImpl(KernelContext& ctx, bool max) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  Shape out = x.shape();
  if (keepdims) {
    out[static_cast<size_t>(axis)] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, ir::DType::kI64));
  const cpu::AxisSplit lines = cpu::SplitAt(x.shape(), axis);
  const RowLayout rl{lines.outer, lines.len, lines.inner};
  if (rl.rows() > 0 && rl.len == 0) {
    return ctx.Error(absl::StrCat("axis ", axis, " of ", x.TypeString(), " is empty"));
  }
  return Check(ctx, LaunchArgReduce(k, x.raw(), y->data<int64_t>(), rl, max, last, StreamOf(ctx)));
}

}  // namespace

// CumSum along the axis of input 1 (on the host): one thread per line.
absl::Status CumSum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const auto axis_v, cpu::ReadInts(ctx, ctx.input(1)));
  if (axis_v.size() != 1) return ctx.Error("axis must hold one value");
  TPC_ASSIGN_OR_RETURN(const int64_t axis, cpu::NormalizeAxis(ctx, axis_v[0], x.rank()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const cpu::AxisSplit lines = cpu::SplitAt(x.shape(), axis);
  const RowLayout rl{lines.outer, lines.len, lines.inner};
  return Check(ctx, LaunchCumSum(k, x.raw(), y->raw(), rl, ctx.node().attr_int("exclusive", 0) != 0,
                                 ctx.node().attr_int("reverse", 0) != 0, StreamOf(ctx)));
}

// TopK along `axis`, K on the host (input 1); values and indices sorted as the CPU's
// stable sort orders them.
absl::Status TopK(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const auto kv, cpu::ReadInts(ctx, ctx.input(1)));
  if (kv.size() != 1) return ctx.Error("K must hold one value");
  TPC_ASSIGN_OR_RETURN(const int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), x.rank()));
  const cpu::AxisSplit lines = cpu::SplitAt(x.shape(), axis);
  const RowLayout rl{lines.outer, lines.len, lines.inner};
  const int64_t top = kv[0];
  if (top < 0 || top > rl.len) return ctx.Error(absl::StrCat("K = ", top, " is out of range"));
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] = top;
  TPC_ASSIGN_OR_RETURN(Tensor * values, ctx.Output(0, out, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * indices, ctx.Output(1, out, ir::DType::kI64));
  return Check(ctx, LaunchTopK(k, x.raw(), values->raw(), indices->data<int64_t>(), rl, top,
                               ctx.node().attr_int("largest", 1) != 0, StreamOf(ctx)));
}

absl::Status ArgMax(KernelContext& ctx) { return ArgReduceImpl(ctx, true); }
absl::Status ArgMin(KernelContext& ctx) { return ArgReduceImpl(ctx, false); }
absl::Status ReduceProd(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kProd); }
absl::Status ReduceSumSquare(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kSumSquare); }
absl::Status ReduceL1(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kL1); }
absl::Status ReduceL2(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kL2); }
absl::Status ReduceLogSum(KernelContext& ctx) { return ReduceImpl(ctx, ReduceKind::kLogSum); }
absl::Status ReduceLogSumExp(KernelContext& ctx) { return ReduceLogSumExpImpl(ctx); }

namespace {

// GlobalAveragePool and GlobalMaxPool: one row per (image, channel) of its spatial
// elements, as the Reduce kernels; [N, C, 1, ...] out, as the CPU kernel.
absl::Status GlobalPool(KernelContext& ctx, ReduceKind kind) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error(absl::StrCat("X must be [N, C, ...], got ", x.TypeString()));
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  Shape out = x.shape();
  std::fill(out.begin() + 2, out.end(), 1);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  const int64_t planes = x.dim(0) * x.dim(1);
  if (planes == 0) return absl::OkStatus();
  const int64_t size = x.num_elements() / planes;
  if (size == 0) {
    // No spatial element: the CPU gives the average and the Lp norm 0 (all zero bits in
    // every float kind).
    if (kind == ReduceKind::kMax) return ctx.Error("no spatial element to take the maximum of");
    return Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx)));
  }
  return Check(ctx,
               LaunchReduce(k, kind, x.raw(), y->raw(), RowLayout{planes, size, 1}, StreamOf(ctx)));
}

}  // namespace

absl::Status GlobalAveragePool(KernelContext& ctx) { return GlobalPool(ctx, ReduceKind::kMean); }
absl::Status GlobalMaxPool(KernelContext& ctx) { return GlobalPool(ctx, ReduceKind::kMax); }

// GlobalLpPool: ReduceL1 or ReduceL2 rows for p = 1 or 2, any other p as LpPool with the
// whole plane as its window (one thread per plane).
absl::Status GlobalLpPool(KernelContext& ctx) {
  const int64_t p = ctx.node().attr_int("p", 2);
  if (p == 1 || p == 2) return GlobalPool(ctx, p == 1 ? ReduceKind::kL1 : ReduceKind::kL2);
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3 || x.rank() - 2 > math::kMaxSpatial) {
    return ctx.Error(absl::StrCat("X must be [N, C, spatial...] with 1 to ", math::kMaxSpatial,
                                  " spatial dims, got ", x.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  Shape out = x.shape();
  std::fill(out.begin() + 2, out.end(), 1);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const math::ConvGeometry g =
      math::WholePlaneWindow(x.shape().data() + 2, static_cast<int>(x.rank() - 2));
  if (g.in_size == 0) return Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx)));
  math::PoolParams pp;
  pp.op = math::PoolOp::kLp;
  pp.p = static_cast<float>(p);
  return Check(
      ctx, LaunchPool(k, g, pp, x.dim(0) * x.dim(1), x.raw(), y->raw(), nullptr, StreamOf(ctx)));
}

// MeanVarianceNormalization over `axes` (default 0, 2, 3): each group's mean (the Reduce
// passes, f32), then x − mean in f32 scratch and the sum of its squares, then one element
// kernel (math::MvnElement).
absl::Status MeanVarianceNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  if (x.rank() > math::kMaxDims) {
    return ctx.Error(
        absl::StrCat("rank ", x.rank(), " is over the CUDA kernels' ", math::kMaxDims));
  }
  const std::vector<int64_t> axes =
      ctx.node().has_attr("axes") ? ctx.node().attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (const int64_t a : axes) {
    TPC_ASSIGN_OR_RETURN(const int64_t d, cpu::NormalizeAxis(ctx, a, x.rank()));
    reduced[static_cast<size_t>(d)] = true;
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  Shape kept = x.shape();
  for (size_t d = 0; d < kept.size(); ++d) {
    if (reduced[d]) kept[d] = 1;
  }
  const cudaStream_t stream = StreamOf(ctx);
  const int64_t count = x.num_elements() / cpu::NumElements(kept);
  TPC_ASSIGN_OR_RETURN(Tensor mean, Scratch(ctx, ir::DType::kF32, kept));
  TPC_ASSIGN_OR_RETURN(Tensor squares, Scratch(ctx, ir::DType::kF32, kept));
  TPC_ASSIGN_OR_RETURN(Tensor centered, Scratch(ctx, ir::DType::kF32, x.shape()));
  TPC_RETURN_IF_ERROR(
      ReduceDims(ctx, ReduceKind::kMean, x, k, reduced, mean.raw(), FloatKind::kF32));
  const void* xf = x.raw();
  if (k != FloatKind::kF32) {
    TPC_RETURN_IF_ERROR(Check(
        ctx, LaunchCast(k, FloatKind::kF32, x.raw(), centered.raw(), x.num_elements(), stream)));
    xf = centered.raw();
  }
  StridedView vx = math::ContiguousView(x.shape()), vm = math::BroadcastView(kept, x.shape()),
              vc = vx;
  math::Simplify({&vx, &vm, &vc});
  TPC_RETURN_IF_ERROR(
      Check(ctx, LaunchBinary(FloatKind::kF32, BinaryOp::kSub, xf, vx, mean.raw(), vm,
                              centered.raw(), centered.num_elements(), stream)));
  TPC_RETURN_IF_ERROR(ReduceDims(ctx, ReduceKind::kSumSquare, centered, FloatKind::kF32, reduced,
                                 squares.raw(), FloatKind::kF32));
  return Check(ctx, LaunchMvn(k, x.raw(), mean.data<float>(), squares.data<float>(),
                              math::BroadcastView(kept, x.shape()), static_cast<float>(count),
                              y->raw(), y->num_elements(), stream));
}

}  // namespace tpc::runtime::cuda
