// Kernels of the `tpc` collective ops (docs/collectives.md). The communicator moves
// flat blocks in rank order; an axis other than the outermost is re-laid around it.
#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// src [a, b, blk bytes] -> dst [b, a, blk bytes].
void SwapOuter(const uint8_t* src, uint8_t* dst, int64_t a, int64_t b, int64_t blk) {
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::memcpy(dst + (j * a + i) * blk, src + (i * b + j) * blk, static_cast<size_t>(blk));
    }
  }
}

}  // namespace

// The group size the node was compiled for must be the communicator's.
absl::StatusOr<int> GroupSize(const KernelContext& ctx) {
  const int64_t n = ctx.node().attr_int("group_size", 1);
  const int have = ctx.comm() ? ctx.comm()->size() : 1;
  if (n != have) {
    return ctx.Error(absl::StrCat("the plan was compiled for group_size ", n, ", but this run has ",
                                  have, " rank(s)"));
  }
  return have;
}

// Product of dims before / from `axis` (in bytes for the inner part).
void OuterInner(const Tensor& t, int64_t axis, int64_t* outer, int64_t* inner_bytes) {
  *outer = 1;
  *inner_bytes = ir::DTypeSize(t.dtype());
  for (int64_t d = 0; d < t.rank(); ++d) (d < axis ? *outer : *inner_bytes) *= t.dim(d);
}

// A blocked split (placement S(d/k)): the axis is k equal blocks, each split across the
// ranks, so the collective sees k times more outer rows of a k times smaller inner part.
absl::Status ApplyBlocks(const KernelContext& ctx, const Tensor& t, int64_t axis, int64_t* outer,
                         int64_t* inner_bytes) {
  const int64_t k = ctx.node().attr_int("blocks", 1);
  if (k == 1) return absl::OkStatus();
  if (k < 1 || t.dim(axis) % k != 0) {
    return ctx.Error(
        absl::StrCat("dim ", axis, " = ", t.dim(axis), " does not split into ", k, " blocks"));
  }
  *outer *= k;
  *inner_bytes /= k;
  return absl::OkStatus();
}

absl::Status AllReduce(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, GroupSize(ctx));
  ReduceOp op;
  TPC_RETURN_IF_ERROR(ParseReduceOp(ctx.node().attr_string("reduce", "sum"), &op));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (n == 1) return CopyWithShape(ctx, x.shape());
  return ctx.comm()->AllReduce(x.raw(), y->raw(), x.num_elements(), x.dtype(), op);
}

// `parts` = p < N (default N): the ranks hold p distinct parts, part k on ranks
// k·N/p, ..., (k+1)·N/p - 1 (placement S(d@p)); the result keeps one copy of each.
absl::Status AllGather(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  const int64_t parts = ctx.node().attr_int("parts", n);
  if (parts < 1 || parts > n || n % parts != 0) {
    return ctx.Error(absl::StrCat("parts ", parts, " does not divide ", n, " ranks"));
  }
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] *= parts;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (n == 1) return CopyWithShape(ctx, out);
  int64_t outer, inner;
  OuterInner(x, axis, &outer, &inner);
  TPC_RETURN_IF_ERROR(ApplyBlocks(ctx, x, axis, &outer, &inner));
  if (outer == 1 && parts == n) {
    return ctx.comm()->AllGather(x.raw(), y->raw(), x.num_elements(), x.dtype());
  }
  TPC_ASSIGN_OR_RETURN(Tensor tmp,
                       Tensor::Create(x.dtype(), {n * x.num_elements()}, ctx.node().Describe()));
  TPC_RETURN_IF_ERROR(ctx.comm()->AllGather(x.raw(), tmp.raw(), x.num_elements(), x.dtype()));
  if (parts == n) {
    SwapOuter(tmp.raw(), y->raw(), n, outer, inner);  // [N, outer, blk] -> [outer, N, blk]
    return absl::OkStatus();
  }
  // [N, outer, blk] -> [outer, parts, blk], block k from rank k·N/parts.
  const int64_t stride = n / parts;
  const uint8_t* src = tmp.raw();
  uint8_t* dst = y->raw();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < parts; ++k) {
      std::memcpy(dst + (o * parts + k) * inner, src + (k * stride * outer + o) * inner,
                  static_cast<size_t>(inner));
    }
  }
  return absl::OkStatus();
}

absl::Status ReduceScatter(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  ReduceOp op;
  TPC_RETURN_IF_ERROR(ParseReduceOp(ctx.node().attr_string("reduce", "sum"), &op));
  if (x.dim(axis) % n != 0) {
    return ctx.Error(absl::StrCat("dim ", axis, " = ", x.dim(axis), " does not divide by ", n));
  }
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] /= n;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (n == 1) return CopyWithShape(ctx, out);
  int64_t outer, inner;
  OuterInner(x, axis, &outer, &inner);
  TPC_RETURN_IF_ERROR(ApplyBlocks(ctx, x, axis, &outer, &inner));
  const int64_t count = x.num_elements() / n;
  if (outer == 1) return ctx.comm()->ReduceScatter(x.raw(), y->raw(), count, x.dtype(), op);
  TPC_ASSIGN_OR_RETURN(Tensor tmp, Tensor::Create(x.dtype(), x.shape(), ctx.node().Describe()));
  SwapOuter(x.raw(), tmp.raw(), outer, n, inner / n);  // [outer, N, blk] -> [N, outer, blk]
  return ctx.comm()->ReduceScatter(tmp.raw(), y->raw(), count, x.dtype(), op);
}

absl::Status AllToAll(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int n, GroupSize(ctx));
  TPC_ASSIGN_OR_RETURN(int64_t split,
                       NormalizeAxis(ctx, ctx.node().attr_int("split_axis", 0), x.rank()));
  TPC_ASSIGN_OR_RETURN(int64_t concat,
                       NormalizeAxis(ctx, ctx.node().attr_int("concat_axis", 0), x.rank()));
  if (x.dim(split) % n != 0) {
    return ctx.Error(absl::StrCat("dim ", split, " = ", x.dim(split), " does not divide by ", n));
  }
  Shape block = x.shape();
  block[static_cast<size_t>(split)] /= n;
  Shape out = block;
  out[static_cast<size_t>(concat)] *= n;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (n == 1) return CopyWithShape(ctx, out);
  const int64_t count = x.num_elements() / n;
  int64_t outer, inner;
  OuterInner(x, split, &outer, &inner);
  TPC_ASSIGN_OR_RETURN(Tensor send, Tensor::Create(x.dtype(), x.shape(), ctx.node().Describe()));
  TPC_ASSIGN_OR_RETURN(Tensor recv, Tensor::Create(x.dtype(), x.shape(), ctx.node().Describe()));
  SwapOuter(x.raw(), send.raw(), outer, n, inner / n);  // block j of the split axis -> slot j
  TPC_RETURN_IF_ERROR(ctx.comm()->AllToAll(send.raw(), recv.raw(), count, x.dtype()));
  // recv is [N, block]; concatenate the blocks on `concat` in rank order.
  Tensor b(x.dtype(), block, nullptr);
  OuterInner(b, concat, &outer, &inner);
  SwapOuter(recv.raw(), y->raw(), n, outer, inner);
  return absl::OkStatus();
}

// This rank's part of a value its group holds whole: each block along `axis` cut in
// `parts` (default N), rank r taking part (r / stride) % parts (no communication).
absl::StatusOr<ShardGeometry> ShardGeometryOf(const KernelContext& ctx, const Tensor& x) {
  const int n = ctx.comm() ? ctx.comm()->size() : 1;
  const int64_t group = ctx.node().attr_int("group_size", 1);
  if (group != n) {
    return ctx.Error(absl::StrCat("the plan was compiled for group_size ", group,
                                  ", but this run has ", n, " rank(s)"));
  }
  const int r = ctx.comm() ? ctx.comm()->rank() : 0;
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  const int64_t k = ctx.node().attr_int("blocks", 1);
  const int64_t parts = ctx.node().attr_int("parts", n);
  const int64_t stride = ctx.node().attr_int("stride", 1);
  if (parts < 1 || stride < 1 || parts * stride > n) {
    return ctx.Error(
        absl::StrCat("parts ", parts, " with stride ", stride, " do not fit ", n, " ranks"));
  }
  if (k < 1 || x.dim(axis) % (k * parts) != 0) {
    return ctx.Error(absl::StrCat("dim ", axis, " = ", x.dim(axis), " does not split into ", k,
                                  " blocks of ", parts, " parts"));
  }
  ShardGeometry g;
  g.out = x.shape();
  g.out[static_cast<size_t>(axis)] /= parts;
  int64_t outer, inner;
  OuterInner(x, axis, &outer, &inner);
  g.rows = outer * k;
  g.row_bytes = inner / k;
  g.part_bytes = g.row_bytes / parts;
  g.offset_bytes = ((r / stride) % parts) * g.part_bytes;
  return g;
}

absl::Status Shard(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const ShardGeometry g, ShardGeometryOf(ctx, x));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, x.dtype()));
  const uint8_t* src = x.raw();
  uint8_t* dst = y->raw();
  for (int64_t o = 0; o < g.rows; ++o) {
    std::memcpy(dst + o * g.part_bytes, src + o * g.row_bytes + g.offset_bytes,
                static_cast<size_t>(g.part_bytes));
  }
  return absl::OkStatus();
}

absl::Status Rank(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {}, ir::DType::kI64));
  y->data<int64_t>()[0] = ctx.comm() ? ctx.comm()->rank() : 0;
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
