// The CUDA kernels that index by values: Gather, GatherElements, GatherND, ScatterND and
// ScatterElements without a reduction, MaxUnpool (indexing.cu, math/indexing.h). An index
// out of range sets the backend's check flag; the run fails at its end naming the node, as
// the CPU kernel fails at once.
#include <string>

#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

absl::Status CheckIndices(const KernelContext& ctx, const Tensor& indices) {
  if (indices.dtype() == ir::DType::kI64 || indices.dtype() == ir::DType::kI32) {
    return absl::OkStatus();
  }
  return ctx.Error("indices must be int64 or int32");
}

// Gather's and GatherElements' indices checked, and the axis they index: the check code
// of the node's out-of-range error (an index out of range fails the run at its end, naming
// this node, as the CPU kernel fails at once).
struct GatherAxis {
  int64_t axis = 0;
  int code = 0;
};
absl::StatusOr<GatherAxis> ReadGatherAxis(const KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  TPC_RETURN_IF_ERROR(CheckIndices(ctx, ctx.input(1)));
  GatherAxis g;
  TPC_ASSIGN_OR_RETURN(g.axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  g.code =
      BackendOf(ctx).Expect(std::string(ctx.Error(absl::StrCat("an index is out of range for dim ",
                                                               g.axis, " of ", data.TypeString()))
                                            .message()));
  return g;
}

}  // namespace

absl::Status Gather(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(const GatherAxis g, ReadGatherAxis(ctx));
  const int64_t axis = g.axis;
  Shape out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, data.dtype()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d < axis) outer *= data.dim(d);
    if (d > axis) inner *= data.dim(d);
  }
  return Check(ctx, LaunchGather(ir::DTypeSize(data.dtype()), data.raw(), indices.raw(),
                                 indices.dtype() == ir::DType::kI64, outer, data.dim(axis), inner,
                                 indices.num_elements(), y->raw(), BackendOf(ctx).flag(), g.code,
                                 StreamOf(ctx)));
}

absl::Status GatherElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(const GatherAxis g, ReadGatherAxis(ctx));
  const int64_t axis = g.axis;
  TPC_RETURN_IF_ERROR(cpu::CheckElementIndices(ctx, data, indices, axis));
  TPC_RETURN_IF_ERROR(CheckRank(ctx, data.shape().size()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, indices.shape(), data.dtype()));
  const Shape strides = math::ContiguousStrides(data.shape());
  StridedView base = math::ViewOf(indices.shape(), strides),
              out = math::ContiguousView(indices.shape());
  base.strides[axis] = 0;
  math::Simplify({&base, &out});
  return Check(ctx,
               LaunchGatherElements(ir::DTypeSize(data.dtype()), data.raw(), base, indices.raw(),
                                    indices.dtype() == ir::DType::kI64, data.dim(axis),
                                    strides[static_cast<size_t>(axis)], y->raw(), y->num_elements(),
                                    BackendOf(ctx).flag(), g.code, StreamOf(ctx)));
}

namespace {

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
