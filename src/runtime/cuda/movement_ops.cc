// Data movement CUDA kernels: each is one or more strided copies (math/strided.h) or an
// element kernel over source positions (Pad, Trilu). Shapes as the CPU kernels (shared
// geometry helpers).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// dst (viewed by vd) = src (viewed by vs), over the views' common dims.
absl::Status StridedCopy(const KernelContext& ctx, ir::DType dt, const void* src, StridedView vs,
                         void* dst, StridedView vd) {
  int64_t n = 1;
  for (int d = 0; d < vs.rank; ++d) n *= vs.dims[d];
  math::Simplify({&vs, &vd});
  return Check(ctx, LaunchCopy(ir::DTypeSize(dt), src, vs, dst, vd, n, StreamOf(ctx)));
}

}  // namespace

absl::Status CheckRank(const KernelContext& ctx, size_t rank) {
  if (rank <= static_cast<size_t>(math::kMaxDims)) return absl::OkStatus();
  return ctx.Error(absl::StrCat("rank ", rank, " is over the CUDA kernels' ", math::kMaxDims));
}

absl::Status Transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  TPC_RETURN_IF_ERROR(CheckRank(ctx, static_cast<size_t>(rank)));
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty()) {
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int64_t>(perm.size()) != rank) return ctx.Error("perm does not match the rank");
  const Shape in_strides = math::ContiguousStrides(x.shape());
  Shape out(static_cast<size_t>(rank));
  StridedView vs;
  vs.rank = static_cast<int>(rank);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d = 0; d < rank; ++d) {
    TPC_ASSIGN_OR_RETURN(int64_t p, cpu::NormalizeAxis(ctx, perm[static_cast<size_t>(d)], rank));
    if (seen[static_cast<size_t>(p)]) return ctx.Error("perm repeats a dim");
    seen[static_cast<size_t>(p)] = true;
    out[static_cast<size_t>(d)] = x.dim(p);
    vs.dims[d] = x.dim(p);
    vs.strides[d] = in_strides[static_cast<size_t>(p)];
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  return StridedCopy(ctx, x.dtype(), x.raw(), vs, y->raw(), math::ContiguousView(out));
}

absl::Status Expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Shape shape, cpu::ReadInts(ctx, ctx.input(1)));
  TPC_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(ctx, {x.shape(), shape}));
  TPC_RETURN_IF_ERROR(CheckRank(ctx, out.size()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  return StridedCopy(ctx, x.dtype(), x.raw(), math::BroadcastView(x.shape(), out), y->raw(),
                     math::ContiguousView(out));
}

absl::Status Tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Shape repeats, cpu::ReadInts(ctx, ctx.input(1)));
  if (static_cast<int64_t>(repeats.size()) != x.rank()) {
    return ctx.Error("repeats must have one value per dim");
  }
  Shape out(repeats.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (repeats[d] < 0) return ctx.Error("repeats must not be negative");
    out[d] = x.shape()[d] * repeats[d];
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  StridedView vs, vd;
  if (!math::TileViews(x.shape(), repeats, &vs, &vd)) {
    return ctx.Error(absl::StrCat("tiling over ", math::kMaxDims,
                                  " dims (input and repeats together) has no CUDA kernel"));
  }
  return StridedCopy(ctx, x.dtype(), x.raw(), vs, y->raw(), vd);
}

// Dropout, as the CPU kernel: inference, the identity, and an all-true mask when asked for.
absl::Status Dropout(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (x.nbytes() > 0) ctx.backend().Copy(y->raw(), x.raw(), x.nbytes());
  if (ctx.num_outputs() < 2 || !ctx.wants_output(1)) return absl::OkStatus();
  TPC_ASSIGN_OR_RETURN(Tensor * mask, ctx.Output(1, x.shape(), ir::DType::kBool));
  return Check(ctx, cudaMemsetAsync(mask->raw(), 1, mask->nbytes(), StreamOf(ctx)));
}

// DepthToSpace (DCR or CRD) and SpaceToDepth: one strided copy (math::BlockMoveViews).
absl::Status BlockMove(KernelContext& ctx, bool to_space) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const cpu::BlockMoveShape sh, cpu::ReadBlockMove(ctx, to_space));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, sh.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  const bool crd = to_space && ctx.node().attr_string("mode", "DCR") == "CRD";
  StridedView space, depth;
  math::BlockMoveViews(sh.n, sh.cs, sh.hd, sh.wd, sh.b, crd, &space, &depth);
  return to_space ? StridedCopy(ctx, x.dtype(), x.raw(), depth, y->raw(), space)
                  : StridedCopy(ctx, x.dtype(), x.raw(), space, y->raw(), depth);
}
absl::Status DepthToSpace(KernelContext& ctx) { return BlockMove(ctx, true); }
absl::Status SpaceToDepth(KernelContext& ctx) { return BlockMove(ctx, false); }

// Pad: each output element reads its source (math::PadSourceIndex) or the constant (input
// 2 on the host, its bits passed to the kernel).
absl::Status Pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_RETURN_IF_ERROR(CheckRank(ctx, x.shape().size()));
  TPC_ASSIGN_OR_RETURN(const cpu::PadShape pad, cpu::ReadPad(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, pad.out, x.dtype()));
  const int64_t es = ir::DTypeSize(x.dtype());
  uint64_t fill = 0;
  if (const Tensor* cv = ctx.optional_input(2); cv != nullptr && cv->num_elements() > 0) {
    if (cv->dtype() != x.dtype()) return ctx.Error("constant_value differs from data in type");
    std::memcpy(&fill, cv->raw(), static_cast<size_t>(es));
  }
  math::PadLayout l;
  l.rank = static_cast<int>(x.rank());
  l.mode = pad.mode;
  const Shape strides = math::ContiguousStrides(x.shape());
  for (int d = 0; d < l.rank; ++d) {
    const size_t u = static_cast<size_t>(d);
    l.out[d] = pad.out[u];
    l.in[d] = x.shape()[u];
    l.in_strides[d] = strides[u];
    l.before[d] = pad.before[u];
  }
  return Check(ctx, LaunchPad(static_cast<int>(es), l, x.raw(), fill, y->raw(), y->num_elements(),
                              StreamOf(ctx)));
}

// Trilu: the matrices' elements kept, the others zero (k from input 1, on the host).
absl::Status Trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("Trilu needs rank >= 2");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    TPC_ASSIGN_OR_RETURN(const auto kv, cpu::ReadInts(ctx, ctx.input(1)));
    if (!kv.empty()) k = kv[0];
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return Check(ctx, LaunchTrilu(static_cast<int>(ir::DTypeSize(x.dtype())), x.raw(), y->raw(),
                                x.dim(x.rank() - 2), x.dim(x.rank() - 1), upper, k,
                                y->num_elements(), StreamOf(ctx)));
}

absl::Status Slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_RETURN_IF_ERROR(CheckRank(ctx, x.shape().size()));
  Shape begin, step, out;
  TPC_RETURN_IF_ERROR(cpu::SliceGeometry(ctx, x, &begin, &step, &out));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  const Shape strides = math::ContiguousStrides(x.shape());
  StridedView vs;
  vs.rank = static_cast<int>(x.rank());
  for (size_t d = 0; d < out.size(); ++d) {
    vs.offset += begin[d] * strides[d];
    vs.dims[d] = out[d];
    vs.strides[d] = step[d] * strides[d];
  }
  return StridedCopy(ctx, x.dtype(), x.raw(), vs, y->raw(), math::ContiguousView(out));
}

absl::Status Concat(KernelContext& ctx) {
  const Tensor& x0 = ctx.input(0);
  TPC_RETURN_IF_ERROR(CheckRank(ctx, x0.shape().size()));
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x0.rank()));
  Shape out = x0.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& xi = ctx.input(i);
    if (xi.rank() != x0.rank() || xi.dtype() != x0.dtype()) {
      return ctx.Error(absl::StrCat("input ", i, " (", xi.TypeString(),
                                    ") does not match input 0 (", x0.TypeString(), ")"));
    }
    for (int64_t d = 0; d < x0.rank(); ++d) {
      if (d != axis && xi.dim(d) != x0.dim(d)) {
        return ctx.Error(absl::StrCat("input ", i, " differs from input 0 in dim ", d));
      }
    }
    out[static_cast<size_t>(axis)] += xi.dim(axis);
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x0.dtype()));
  const Shape out_strides = math::ContiguousStrides(out);
  int64_t at = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& xi = ctx.input(i);
    if (xi.num_elements() > 0) {
      StridedView vd = math::ContiguousView(xi.shape());
      for (int d = 0; d < vd.rank; ++d) vd.strides[d] = out_strides[static_cast<size_t>(d)];
      vd.offset = at * out_strides[static_cast<size_t>(axis)];
      TPC_RETURN_IF_ERROR(
          StridedCopy(ctx, xi.dtype(), xi.raw(), math::ContiguousView(xi.shape()), y->raw(), vd));
    }
    at += xi.dim(axis);
  }
  return absl::OkStatus();
}

absl::Status Split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_RETURN_IF_ERROR(CheckRank(ctx, x.shape().size()));
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  TPC_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, cpu::SplitSizes(ctx, x, axis));
  const Shape in_strides = math::ContiguousStrides(x.shape());
  int64_t at = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Shape shape = x.shape();
    shape[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(i, shape, x.dtype()));
    if (y->num_elements() > 0) {
      StridedView vs = math::ContiguousView(shape);
      for (int d = 0; d < vs.rank; ++d) vs.strides[d] = in_strides[static_cast<size_t>(d)];
      vs.offset = at * in_strides[static_cast<size_t>(axis)];
      TPC_RETURN_IF_ERROR(
          StridedCopy(ctx, x.dtype(), x.raw(), vs, y->raw(), math::ContiguousView(shape)));
    }
    at += sizes[static_cast<size_t>(i)];
  }
  return absl::OkStatus();
}

// CenterCropPad: y zeroed where it pads, then the part of y inside x as one strided copy
// (math::CropPadViews; sizes and axes read as the CPU kernel reads them).
absl::Status CenterCropPad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const cpu::CropPadShape r, cpu::ReadCenterCropPad(ctx));
  TPC_RETURN_IF_ERROR(CheckRank(ctx, r.out.size()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  bool pads = false;
  for (size_t d = 0; d < r.out.size(); ++d) pads = pads || r.out[d] > x.shape()[d];
  if (pads)
    TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx))));
  StridedView vs, vd;
  if (!math::CropPadViews(x.shape(), r.out, r.shift, &vs, &vd)) return absl::OkStatus();
  return StridedCopy(ctx, x.dtype(), x.raw(), vs, y->raw(), vd);
}

// ReverseSequence: y = x, then each batch entry's first sequence_lens[b] steps copied back
// reversed (a view with a negative time stride, math::ReversedStepsViews): one copy per
// entry with a length of 2 or more. sequence_lens is a host input.
absl::Status ReverseSequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const cpu::ReverseSequenceShape r, cpu::ReadReverseSequence(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  ctx.backend().Copy(y->raw(), x.raw(), x.nbytes());
  const int64_t inner = x.num_elements() / (x.dim(0) * x.dim(1));
  for (size_t b = 0; b < r.lens.size(); ++b) {
    if (r.lens[b] < 2) continue;
    StridedView vs, vd;
    math::ReversedStepsViews(x.shape(), static_cast<int>(r.batch_axis), static_cast<int64_t>(b),
                             r.lens[b], &vs, &vd);
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchCopy(ir::DTypeSize(x.dtype()), x.raw(), vs, y->raw(), vd,
                                              r.lens[b] * inner, StreamOf(ctx))));
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cuda
