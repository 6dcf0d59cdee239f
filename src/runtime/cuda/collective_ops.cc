// The tpc collectives on the GPU, for a communicator whose buffers are device memory
// (NCCL, or the in-process one of ranks sharing a GPU): the same geometry as the CPU
// kernels (cpu/collectives.cc), with the re-layout around the communicator as strided
// device copies instead of memcpy.
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// dst[j, i, :] = src[i, j, :] for src [a, b, blk] (blk in elements of `dt`).
absl::Status SwapOuter(const KernelContext& ctx, ir::DType dt, const void* src, void* dst,
                       int64_t a, int64_t b, int64_t blk) {
  StridedView vs, vd;
  vs.rank = vd.rank = 3;
  const int64_t dims[3] = {b, a, blk};
  const int64_t src_strides[3] = {blk, b * blk, 1};
  const int64_t dst_strides[3] = {a * blk, blk, 1};
  for (int d = 0; d < 3; ++d) {
    vs.dims[d] = vd.dims[d] = dims[d];
    vs.strides[d] = src_strides[d];
    vd.strides[d] = dst_strides[d];
  }
  math::Simplify({&vs, &vd});
  return Check(ctx, LaunchCopy(ir::DTypeSize(dt), src, vs, dst, vd, a * b * blk, StreamOf(ctx)));
}

absl::Status Copy(KernelContext& ctx, const Shape& shape) { return cpu::CopyWithShape(ctx, shape); }

}  // namespace

absl::Status AllReduce(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, cpu::GroupSize(ctx));
  ReduceOp op;
  TPC_RETURN_IF_ERROR(ParseReduceOp(ctx.node().attr_string("reduce", "sum"), &op));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (n == 1) return Copy(ctx, x.shape());
  return ctx.comm()->AllReduce(x.raw(), y->raw(), x.num_elements(), x.dtype(), op);
}

absl::Status AllGather(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, cpu::GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  const int64_t parts = ctx.node().attr_int("parts", n);
  if (parts < 1 || parts > n || n % parts != 0) {
    return ctx.Error(absl::StrCat("parts ", parts, " does not divide ", n, " ranks"));
  }
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] *= parts;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (n == 1) return Copy(ctx, out);
  int64_t outer, inner;
  cpu::OuterInner(x, axis, &outer, &inner);
  TPC_RETURN_IF_ERROR(cpu::ApplyBlocks(ctx, x, axis, &outer, &inner));
  if (outer == 1 && parts == n) {
    return ctx.comm()->AllGather(x.raw(), y->raw(), x.num_elements(), x.dtype());
  }
  const int64_t es = ir::DTypeSize(x.dtype()), blk = inner / es;
  TPC_ASSIGN_OR_RETURN(Tensor tmp, Scratch(ctx, x.dtype(), {n * x.num_elements()}));
  TPC_RETURN_IF_ERROR(ctx.comm()->AllGather(x.raw(), tmp.raw(), x.num_elements(), x.dtype()));
  if (parts == n) return SwapOuter(ctx, x.dtype(), tmp.raw(), y->raw(), n, outer, blk);
  // [N, outer, blk] -> [outer, parts, blk], part k from rank k·N/parts.
  const int64_t stride = n / parts;
  StridedView vs, vd = math::ContiguousView({outer, parts, blk});
  vs.rank = 3;
  const int64_t dims[3] = {outer, parts, blk}, strides[3] = {blk, stride * outer * blk, 1};
  for (int d = 0; d < 3; ++d) {
    vs.dims[d] = dims[d];
    vs.strides[d] = strides[d];
  }
  math::Simplify({&vs, &vd});
  return Check(ctx, LaunchCopy(static_cast<int>(es), tmp.raw(), vs, y->raw(), vd,
                               outer * parts * blk, StreamOf(ctx)));
}

absl::Status ReduceScatter(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, cpu::GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  ReduceOp op;
  TPC_RETURN_IF_ERROR(ParseReduceOp(ctx.node().attr_string("reduce", "sum"), &op));
  if (x.dim(axis) % n != 0) {
    return ctx.Error(absl::StrCat("dim ", axis, " = ", x.dim(axis), " does not divide by ", n));
  }
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] /= n;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (n == 1) return Copy(ctx, out);
  int64_t outer, inner;
  cpu::OuterInner(x, axis, &outer, &inner);
  TPC_RETURN_IF_ERROR(cpu::ApplyBlocks(ctx, x, axis, &outer, &inner));
  const int64_t count = x.num_elements() / n;
  if (outer == 1) return ctx.comm()->ReduceScatter(x.raw(), y->raw(), count, x.dtype(), op);
  const int64_t blk = inner / ir::DTypeSize(x.dtype()) / n;
  TPC_ASSIGN_OR_RETURN(Tensor tmp, Scratch(ctx, x.dtype(), x.shape()));
  // [outer, N, blk] -> [N, outer, blk]
  TPC_RETURN_IF_ERROR(SwapOuter(ctx, x.dtype(), x.raw(), tmp.raw(), outer, n, blk));
  return ctx.comm()->ReduceScatter(tmp.raw(), y->raw(), count, x.dtype(), op);
}

absl::Status AllToAll(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, cpu::GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t split,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("split_axis", 0), x.rank()));
  TPC_ASSIGN_OR_RETURN(int64_t concat,
                       cpu::NormalizeAxis(ctx, ctx.node().attr_int("concat_axis", 0), x.rank()));
  if (x.dim(split) % n != 0) {
    return ctx.Error(absl::StrCat("dim ", split, " = ", x.dim(split), " does not divide by ", n));
  }
  Shape block = x.shape();
  block[static_cast<size_t>(split)] /= n;
  Shape out = block;
  out[static_cast<size_t>(concat)] *= n;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (n == 1) return Copy(ctx, out);
  const int64_t es = ir::DTypeSize(x.dtype());
  const int64_t count = x.num_elements() / n;
  int64_t outer, inner;
  cpu::OuterInner(x, split, &outer, &inner);
  TPC_ASSIGN_OR_RETURN(Tensor send, Scratch(ctx, x.dtype(), x.shape()));
  TPC_ASSIGN_OR_RETURN(Tensor recv, Scratch(ctx, x.dtype(), x.shape()));
  TPC_RETURN_IF_ERROR(SwapOuter(ctx, x.dtype(), x.raw(), send.raw(), outer, n, inner / n / es));
  TPC_RETURN_IF_ERROR(ctx.comm()->AllToAll(send.raw(), recv.raw(), count, x.dtype()));
  Tensor b(x.dtype(), block, nullptr);
  cpu::OuterInner(b, concat, &outer, &inner);
  return SwapOuter(ctx, x.dtype(), recv.raw(), y->raw(), n, outer, inner / es);
}

absl::Status Shard(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const cpu::ShardGeometry g, cpu::ShardGeometryOf(ctx, x));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, x.dtype()));
  const int64_t es = ir::DTypeSize(x.dtype());
  const int64_t part = g.part_bytes / es;
  StridedView vs, vd = math::ContiguousView({g.rows, part});
  vs.rank = 2;
  vs.offset = g.offset_bytes / es;
  vs.dims[0] = g.rows;
  vs.dims[1] = part;
  vs.strides[0] = g.row_bytes / es;
  vs.strides[1] = 1;
  math::Simplify({&vs, &vd});
  return Check(ctx, LaunchCopy(static_cast<int>(es), x.raw(), vs, y->raw(), vd, g.rows * part,
                               StreamOf(ctx)));
}

}  // namespace tpc::runtime::cuda
