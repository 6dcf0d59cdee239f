// Shape and data movement: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout,
// Transpose, DepthToSpace, SpaceToDepth, Expand, Tile, Concat, Split. Element types do not matter
// here: elements move by their size.
#include <algorithm>
#include <numeric>

#include "kernels.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime::cpu {

absl::Status Reshape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Shape target, ReadInts(ctx, ctx.input(1)));
  const bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) {
      if (i >= x.shape().size())
        return ctx.Error("0 in the target shape has no matching input dim");
      target[i] = x.dim(static_cast<int64_t>(i));
    }
    if (target[i] == -1) {
      if (infer >= 0) return ctx.Error("more than one -1 in the target shape");
      infer = static_cast<int>(i);
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.num_elements() % known != 0) {
      return ctx.Error(
          absl::StrCat("cannot reshape ", x.TypeString(), " to ", ShapeString(target)));
    }
    target[static_cast<size_t>(infer)] = x.num_elements() / known;
  }
  return CopyWithShape(ctx, target);
}

absl::Status Flatten(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank()) return ctx.Error("axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? a : b) *= x.dim(i);
  return CopyWithShape(ctx, {a, b});
}

absl::Status Squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, "axes", 1));
  std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
  if (axes && !axes->empty()) {  // no axes, or an empty list: every dim that is 1
    for (int64_t a : *axes) {
      TPC_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(ctx, a, x.rank()));
      if (x.dim(ax) != 1)
        return ctx.Error(absl::StrCat("cannot squeeze dim ", ax, " of ", x.TypeString()));
      drop[static_cast<size_t>(ax)] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) drop[static_cast<size_t>(i)] = x.dim(i) == 1;
  }
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!drop[static_cast<size_t>(i)]) out.push_back(x.dim(i));
  }
  return CopyWithShape(ctx, out);
}

absl::Status Unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, "axes", 1));
  if (!axes) return ctx.Error("axes are missing");
  const int64_t rank = x.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> added(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    TPC_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(ctx, a, rank));
    added[static_cast<size_t>(ax)] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    out.push_back(added[static_cast<size_t>(i)] ? 1 : x.shape()[next++]);
  return CopyWithShape(ctx, out);
}

absl::Status Identity(KernelContext& ctx) { return CopyWithShape(ctx, ctx.input(0).shape()); }

absl::Status Dropout(KernelContext& ctx) {
  // Inference: the identity, and an all-true mask when asked for.
  TPC_RETURN_IF_ERROR(CopyWithShape(ctx, ctx.input(0).shape()));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * mask, ctx.Output(1, ctx.input(0).shape(), ir::DType::kBool));
    std::fill(mask->data<bool>(), mask->data<bool>() + mask->num_elements(), true);
  }
  return absl::OkStatus();
}

absl::Status Transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t rank = static_cast<size_t>(x.rank());
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty()) {
    perm.resize(rank);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (perm.size() != rank) return ctx.Error("perm does not match the input's rank");
  Shape out(rank);
  const Shape in_strides = Strides(x.shape());
  Shape strides(rank);  // input stride of each output dim
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank)) return ctx.Error("perm out of range");
    out[i] = x.shape()[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (rank == 0) return CopyWithShape(ctx, out);
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() {
    const U* px = x.data<U>();
    U* py = y->data<U>();
    const int64_t last = out[rank - 1];
    const int64_t last_stride = strides[rank - 1];
    const int64_t rows = last == 0 ? 0 : y->num_elements() / last;
    ctx.pool().ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(last, 1)),
                           [&](int64_t b, int64_t e) {
                             for (int64_t r = b; r < e; ++r) {
                               int64_t rem = r, off = 0;
                               for (size_t d = rank - 1; d-- > 0;) {
                                 off += (rem % out[d]) * strides[d];
                                 rem /= out[d];
                               }
                               U* dst = py + r * last;
                               for (int64_t j = 0; j < last; ++j)
                                 dst[j] = px[off + j * last_stride];
                             }
                           });
    return absl::OkStatus();
  });
}

absl::StatusOr<BlockMoveShape> ReadBlockMove(const KernelContext& ctx, bool to_space) {
  const Tensor& x = ctx.input(0);
  const int64_t b = ctx.node().attr_int("blocksize", 0);
  if (x.rank() != 4 || b <= 0) return ctx.Error("needs a 4-D input and a positive blocksize");
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (to_space ? c % (b * b) != 0 : (h % b != 0 || w % b != 0)) {
    return ctx.Error(absl::StrCat("blocksize ", b, " does not divide ", x.TypeString()));
  }
  BlockMoveShape sh;
  sh.n = n;
  sh.b = b;
  sh.cs = to_space ? c / (b * b) : c;
  sh.hd = to_space ? h : h / b;
  sh.wd = to_space ? w : w / b;
  sh.out = to_space ? Shape{n, sh.cs, h * b, w * b} : Shape{n, c * b * b, h / b, w / b};
  return sh;
}

namespace {

// DepthToSpace (to_space) and SpaceToDepth over [N, C, H, W] with blocks of b x b; `crd`:
// DepthToSpace's CRD mode (channel, then block row and column) instead of DCR.
absl::Status BlockMove(KernelContext& ctx, bool to_space, bool crd) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const BlockMoveShape sh, ReadBlockMove(ctx, to_space));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, sh.out, x.dtype()));
  math::StridedView space, depth;
  math::BlockMoveViews(sh.n, sh.cs, sh.hd, sh.wd, sh.b, crd, &space, &depth);
  const math::StridedView& from = to_space ? depth : space;
  const math::StridedView& to = to_space ? space : depth;
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() {
    const U* px = x.data<U>();
    U* py = y->data<U>();
    for (int64_t i = 0; i < x.num_elements(); ++i) py[to.At(i)] = px[from.At(i)];
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status DepthToSpace(KernelContext& ctx) {
  return BlockMove(ctx, true, ctx.node().attr_string("mode", "DCR") == "CRD");
}
absl::Status SpaceToDepth(KernelContext& ctx) { return BlockMove(ctx, false, false); }

absl::Status Expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Shape target, ReadInts(ctx, ctx.input(1)));
  TPC_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ctx, {x.shape(), target}));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() {
    const U* px = x.data<U>();
    U* py = y->data<U>();
    ForEachBroadcast<1>(ctx.pool(), out, {x.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) { py[i] = px[o[0]]; });
    return absl::OkStatus();
  });
}

absl::Status Tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Shape repeats, ReadInts(ctx, ctx.input(1)));
  if (static_cast<int64_t>(repeats.size()) != x.rank())
    return ctx.Error("repeats must have one value per dim");
  Shape out(repeats.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = x.shape()[i] * repeats[i];
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  const Shape in_strides = Strides(x.shape());
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() {
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      int64_t rem = i, off = 0;
      for (size_t d = out.size(); d-- > 0;) {
        off += (rem % out[d]) % x.shape()[d] * in_strides[d];
        rem /= out[d];
      }
      y->data<U>()[i] = x.data<U>()[off];
    }
    return absl::OkStatus();
  });
}

absl::Status Concat(KernelContext& ctx) {
  std::vector<const Tensor*> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ins.push_back(&ctx.input(i));
  }
  if (ins.empty()) return ctx.Error("no inputs");
  const Tensor& first = *ins[0];
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), first.rank()));
  Shape out = first.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (const Tensor* t : ins) {
    if (t->rank() != first.rank() || t->dtype() != first.dtype()) {
      return ctx.Error(absl::StrCat("inputs ", first.TypeString(), " and ", t->TypeString(),
                                    " do not concatenate"));
    }
    for (int64_t d = 0; d < t->rank(); ++d) {
      if (d != axis && t->dim(d) != first.dim(d)) {
        return ctx.Error(absl::StrCat("inputs ", first.TypeString(), " and ", t->TypeString(),
                                      " differ outside axis ", axis));
      }
    }
    out[static_cast<size_t>(axis)] += t->dim(axis);
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, first.dtype()));
  int64_t outer = 1, inner = ir::DTypeSize(first.dtype());
  for (int64_t d = 0; d < first.rank(); ++d) {
    if (d < axis) outer *= first.dim(d);
    if (d > axis) inner *= first.dim(d);
  }
  const int64_t row = out[static_cast<size_t>(axis)] * inner;
  int64_t offset = 0;
  for (const Tensor* t : ins) {
    const int64_t chunk = t->dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o) {
      if (chunk > 0)
        std::memcpy(y->raw() + o * row + offset, t->raw() + o * chunk, static_cast<size_t>(chunk));
    }
    offset += chunk;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> SplitSizes(const KernelContext& ctx, const Tensor& x,
                                                int64_t axis) {
  const int64_t dim = x.dim(axis);
  const int n = ctx.num_outputs();
  std::vector<int64_t> sizes;
  if (ctx.has_input(1)) {
    TPC_ASSIGN_OR_RETURN(sizes, ReadInts(ctx, ctx.input(1)));
  } else if (ctx.node().has_attr("split")) {
    sizes = ctx.node().attr_ints("split");
  }
  if (sizes.empty()) {  // no sizes, or an empty list
    // Equal parts; with opset 18's num_outputs the last part may be smaller.
    const int64_t part = (dim + n - 1) / n;
    for (int i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(part, dim - part * i)));
  }
  if (static_cast<int>(sizes.size()) != n ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != dim) {
    return ctx.Error(absl::StrCat("split sizes do not add up to dim ", axis, " = ", dim));
  }
  return sizes;
}

absl::Status Split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  const int64_t dim = x.dim(axis);
  const int n = ctx.num_outputs();
  TPC_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, SplitSizes(ctx, x, axis));
  int64_t outer = 1, inner = ir::DTypeSize(x.dtype());
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) inner *= x.dim(d);
  }
  std::vector<uint8_t*> outs;
  for (int i = 0; i < n; ++i) {
    Shape shape = x.shape();
    shape[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(i, shape, x.dtype()));
    outs.push_back(y->raw());
  }
  // Each outer row of the input goes out in pieces, one per output; rows over the threads.
  const int64_t row = dim * inner;
  ctx.pool().ParallelFor(
      outer, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(row, 1)),
      [&](int64_t first, int64_t last) {
        for (int64_t o = first; o < last; ++o) {
          int64_t offset = 0;
          for (int i = 0; i < n; ++i) {
            const int64_t chunk = sizes[static_cast<size_t>(i)] * inner;
            if (chunk > 0) {
              std::memcpy(outs[static_cast<size_t>(i)] + o * chunk, x.raw() + o * row + offset,
                          static_cast<size_t>(chunk));
            }
            offset += chunk;
          }
        }
      });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
