// Data movement CUDA kernels: each is one or more strided copies (math/strided.h) or a
// gather. Shapes as the CPU kernels (shared geometry helpers).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::Status CheckRank(const KernelContext& ctx, size_t rank) {
  if (rank <= static_cast<size_t>(math::kMaxDims)) return absl::OkStatus();
  return ctx.Error(absl::StrCat("rank ", rank, " is over the CUDA kernels' ", math::kMaxDims));
}

// dst (viewed by vd) = src (viewed by vs), over the views' common dims.
absl::Status StridedCopy(const KernelContext& ctx, ir::DType dt, const void* src, StridedView vs,
                         void* dst, StridedView vd) {
  int64_t n = 1;
  for (int d = 0; d < vs.rank; ++d) n *= vs.dims[d];
  math::Simplify({&vs, &vd});
  return Check(ctx, LaunchCopy(ir::DTypeSize(dt), src, vs, dst, vd, n, StreamOf(ctx)));
}

}  // namespace

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

absl::Status Gather(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (indices.dtype() != ir::DType::kI64 && indices.dtype() != ir::DType::kI32) {
    return ctx.Error("indices must be int64 or int32");
  }
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  Shape out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, data.dtype()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d < axis) outer *= data.dim(d);
    if (d > axis) inner *= data.dim(d);
  }
  // An index out of range fails the run at its end, naming this node (as the CPU kernel
  // does at once).
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("an index is out of range for dim ", axis, " of ", data.TypeString()))
          .message()));
  return Check(ctx, LaunchGather(ir::DTypeSize(data.dtype()), data.raw(), indices.raw(),
                                 indices.dtype() == ir::DType::kI64, outer, data.dim(axis), inner,
                                 indices.num_elements(), y->raw(), BackendOf(ctx).flag(), code,
                                 StreamOf(ctx)));
}

absl::Status GatherElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (indices.dtype() != ir::DType::kI64 && indices.dtype() != ir::DType::kI32) {
    return ctx.Error("indices must be int64 or int32");
  }
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  TPC_RETURN_IF_ERROR(cpu::CheckElementIndices(ctx, data, indices, axis));
  TPC_RETURN_IF_ERROR(CheckRank(ctx, data.shape().size()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, indices.shape(), data.dtype()));
  const Shape strides = math::ContiguousStrides(data.shape());
  StridedView base = math::ViewOf(indices.shape(), strides),
              out = math::ContiguousView(indices.shape());
  base.strides[axis] = 0;
  math::Simplify({&base, &out});
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("an index is out of range for dim ", axis, " of ", data.TypeString()))
          .message()));
  return Check(ctx,
               LaunchGatherElements(ir::DTypeSize(data.dtype()), data.raw(), base, indices.raw(),
                                    indices.dtype() == ir::DType::kI64, data.dim(axis),
                                    strides[static_cast<size_t>(axis)], y->raw(), y->num_elements(),
                                    BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

namespace {

absl::Status CheckIndices(const KernelContext& ctx, const Tensor& indices) {
  if (indices.dtype() == ir::DType::kI64 || indices.dtype() == ir::DType::kI32) {
    return absl::OkStatus();
  }
  return ctx.Error("indices must be int64 or int32");
}

// The ND addressing of data's dims [first, first + last) (row-major element strides).
absl::StatusOr<math::NdIndex> NdAddressing(const KernelContext& ctx, const Tensor& data,
                                           int64_t first, int64_t last) {
  if (last < 0 || first + last > data.rank()) {
    return ctx.Error(
        absl::StrCat("indices address ", first + last, " dims of ", data.TypeString()));
  }
  if (last > math::kMaxDims) {
    return ctx.Error(absl::StrCat("tuples of ", last, " indices (over ", math::kMaxDims, ")"));
  }
  const Shape strides = math::ContiguousStrides(data.shape());
  math::NdIndex nd;
  nd.last = static_cast<int>(last);
  for (int64_t k = 0; k < last; ++k) {
    nd.dims[k] = data.dim(first + k);
    nd.strides[k] = strides[static_cast<size_t>(first + k)];
  }
  return nd;
}

std::string OutOfRange(const KernelContext& ctx, const Tensor& data) {
  return std::string(
      ctx.Error(absl::StrCat("an index is out of range for ", data.TypeString())).message());
}

}  // namespace

absl::Status GatherND(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_RETURN_IF_ERROR(CheckIndices(ctx, indices));
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  TPC_ASSIGN_OR_RETURN(const int64_t last, cpu::ReadGatherNd(ctx));
  TPC_ASSIGN_OR_RETURN(const math::NdIndex nd, NdAddressing(ctx, data, b, last));
  Shape out(indices.shape().begin(), indices.shape().end() - 1);
  out.insert(out.end(), data.shape().begin() + b + last, data.shape().end());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, data.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  int64_t batch = 1, slice = 1, batch_stride = 1;
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d < b) batch *= data.dim(d);
    if (d >= b) batch_stride *= data.dim(d);
    if (d >= b + last) slice *= data.dim(d);
  }
  const int64_t tuples = y->num_elements() / slice;
  const int code = BackendOf(ctx).Expect(OutOfRange(ctx, data));
  return Check(
      ctx, LaunchGatherNd(ir::DTypeSize(data.dtype()), data.raw(), nd, indices.raw(),
                          indices.dtype() == ir::DType::kI64, slice, tuples / batch, batch_stride,
                          y->raw(), y->num_elements(), BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

// ScatterND without a reduction (the registry's placement): y = data, then the updates.
absl::Status ScatterND(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  TPC_RETURN_IF_ERROR(CheckIndices(ctx, indices));
  if (ctx.node().attr_string("reduction", "none") != "none") {
    return ctx.Error("a reduction has no CUDA kernel");
  }
  if (indices.rank() < 1 || updates.dtype() != data.dtype()) {
    return ctx.Error("indices must have a tuple dim and updates data's type");
  }
  const int64_t last = indices.dim(indices.rank() - 1);
  TPC_ASSIGN_OR_RETURN(const math::NdIndex nd, NdAddressing(ctx, data, 0, last));
  Shape want(indices.shape().begin(), indices.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + last, data.shape().end());
  if (updates.shape() != want) {
    return ctx.Error(
        absl::StrCat("updates ", updates.TypeString(), " are not ", ShapeString(want)));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, data.shape(), data.dtype()));
  if (data.nbytes() > 0) ctx.backend().Copy(y->raw(), data.raw(), data.nbytes());
  int64_t slice = 1;
  for (int64_t d = last; d < data.rank(); ++d) slice *= data.dim(d);
  const int code = BackendOf(ctx).Expect(OutOfRange(ctx, data));
  return Check(ctx,
               LaunchScatterNd(ir::DTypeSize(data.dtype()), nd, indices.raw(),
                               indices.dtype() == ir::DType::kI64, updates.raw(), slice, y->raw(),
                               updates.num_elements(), BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

// ScatterElements without a reduction: y = data, then each update at its coordinates with
// the axis one from the indices.
absl::Status ScatterElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  TPC_RETURN_IF_ERROR(CheckIndices(ctx, indices));
  if (ctx.node().attr_string("reduction", "none") != "none") {
    return ctx.Error("a reduction has no CUDA kernel");
  }
  TPC_ASSIGN_OR_RETURN(const int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  if (updates.shape() != indices.shape() || updates.dtype() != data.dtype()) {
    return ctx.Error(absl::StrCat("indices ", indices.TypeString(), " and updates ",
                                  updates.TypeString(), " must be of one shape, data's type"));
  }
  TPC_RETURN_IF_ERROR(cpu::CheckElementIndices(ctx, data, indices, axis));
  TPC_RETURN_IF_ERROR(CheckRank(ctx, data.shape().size()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, data.shape(), data.dtype()));
  if (data.nbytes() > 0) ctx.backend().Copy(y->raw(), data.raw(), data.nbytes());
  const Shape strides = math::ContiguousStrides(data.shape());
  StridedView base = math::ViewOf(indices.shape(), strides);
  base.strides[axis] = 0;
  math::Simplify({&base});
  const int code = BackendOf(ctx).Expect(OutOfRange(ctx, data));
  return Check(ctx, LaunchScatterElements(ir::DTypeSize(data.dtype()), base, indices.raw(),
                                          indices.dtype() == ir::DType::kI64, data.dim(axis),
                                          strides[static_cast<size_t>(axis)], updates.raw(),
                                          y->raw(), updates.num_elements(), BackendOf(ctx).flag(),
                                          code, StreamOf(ctx)));
}

// MaxUnpool: y zeroed, then each element of X at the position its index names in the
// pool's inverse geometry, which y holds in its leading corner (cpu::ReadMaxUnpool).
absl::Status MaxUnpool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_RETURN_IF_ERROR(CheckIndices(ctx, indices));
  TPC_ASSIGN_OR_RETURN(const cpu::UnpoolShape u, cpu::ReadMaxUnpool(ctx));
  TPC_RETURN_IF_ERROR(CheckRank(ctx, u.out.size()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, u.out, x.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx))));
  const StridedView out = math::ViewOf(u.inferred, math::ContiguousStrides(u.out));
  const int code = BackendOf(ctx).Expect(OutOfRange(ctx, *y));
  return Check(ctx, LaunchMaxUnpool(ir::DTypeSize(x.dtype()), out, indices.raw(),
                                    indices.dtype() == ir::DType::kI64,
                                    cpu::NumElements(u.inferred), x.raw(), y->raw(),
                                    x.num_elements(), BackendOf(ctx).flag(), code, StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
