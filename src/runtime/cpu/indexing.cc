// Indexing: Slice, Gather, tpc::CheckIndices, GatherElements, GatherND, ScatterND, ScatterElements,
// Pad, CenterCropPad, ReverseSequence, Trilu.
#include <algorithm>

#include "kernels.h"
#include "tpc/runtime/math/pad.h"

namespace tpc::runtime::cpu {
namespace {

// Index `i` of a dim of size `dim`, negative counting from the end; error out of range.
absl::StatusOr<int64_t> CheckIndex(const KernelContext& ctx, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim) {
    return ctx.Error(absl::StrCat("index ", i, " is out of range for a dim of ", dim));
  }
  return i < 0 ? i + dim : i;
}

// Multi-index of flat element i of `shape`.
void Unravel(int64_t i, const Shape& shape, Shape& idx) {
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
}

template <typename T>
T Combine(const std::string& reduction, T a, T b) {
  if (reduction == "add") return static_cast<T>(a + b);
  if (reduction == "mul") return static_cast<T>(a * b);
  if (reduction == "max") return std::max(a, b);
  if (reduction == "min") return std::min(a, b);
  return b;
}

}  // namespace

absl::Status SliceGeometry(const KernelContext& ctx, const Tensor& x, Shape* begin_out,
                           Shape* step_out, Shape* out_shape) {
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(auto starts, ReadInts(ctx, ctx.input(1)));
  TPC_ASSIGN_OR_RETURN(auto ends, ReadInts(ctx, ctx.input(2)));
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) {
    TPC_ASSIGN_OR_RETURN(axes, ReadInts(ctx, ctx.input(3)));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has_input(4)) {
    TPC_ASSIGN_OR_RETURN(steps, ReadInts(ctx, ctx.input(4)));
  } else {
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return ctx.Error("starts, ends, axes and steps differ in length");
  }
  Shape begin(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1), out = x.shape();
  for (size_t i = 0; i < starts.size(); ++i) {
    TPC_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[i], rank));
    const int64_t dim = x.dim(a);
    const int64_t s = steps[i];
    if (s == 0) return ctx.Error("a step is zero");
    int64_t st = starts[i], en = ends[i];
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (s > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
    } else {
      st = std::clamp<int64_t>(st, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
    }
    const int64_t len = s > 0 ? (en - st + s - 1) / s : (st - en + (-s) - 1) / (-s);
    begin[static_cast<size_t>(a)] = st;
    step[static_cast<size_t>(a)] = s;
    out[static_cast<size_t>(a)] = std::max<int64_t>(0, len);
  }
  *begin_out = std::move(begin);
  *step_out = std::move(step);
  *out_shape = std::move(out);
  return absl::OkStatus();
}

absl::Status Slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  Shape begin, step, out;
  TPC_RETURN_IF_ERROR(SliceGeometry(ctx, x, &begin, &step, &out));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  const Shape strides = Strides(x.shape());
  if (rank > 0 && step.back() == 1 && y->num_elements() > 0) {
    // Runs of contiguous elements: the last dim (with step 1) and the dims before it
    // while the ones after are whole, each run one memcpy.
    int64_t k = rank - 1;
    int64_t run = out[static_cast<size_t>(k)];
    while (k > 0 && begin[static_cast<size_t>(k)] == 0 && out[static_cast<size_t>(k)] == x.dim(k) &&
           step[static_cast<size_t>(k - 1)] == 1) {
      --k;
      run *= out[static_cast<size_t>(k)];
    }
    const Shape outer_shape(out.begin(), out.begin() + k);
    const int64_t rows = NumElements(outer_shape);
    const size_t elem = static_cast<size_t>(ir::DTypeSize(x.dtype()));
    ctx.pool().ParallelFor(rows, std::max<int64_t>(1, 16384 / run), [&](int64_t b, int64_t e) {
      Shape idx(static_cast<size_t>(k));
      for (int64_t r = b; r < e; ++r) {
        Unravel(r, outer_shape, idx);
        int64_t off = begin[static_cast<size_t>(k)] * strides[static_cast<size_t>(k)];
        for (size_t d = 0; d < static_cast<size_t>(k); ++d)
          off += (begin[d] + idx[d] * step[d]) * strides[d];
        std::memcpy(y->raw() + r * run * static_cast<int64_t>(elem),
                    x.raw() + off * static_cast<int64_t>(elem), static_cast<size_t>(run) * elem);
      }
    });
    return absl::OkStatus();
  }
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() {
    const U* px = x.data<U>();
    U* py = y->data<U>();
    Shape idx(static_cast<size_t>(rank));
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      Unravel(i, out, idx);
      int64_t off = 0;
      for (size_t d = 0; d < static_cast<size_t>(rank); ++d)
        off += (begin[d] + idx[d] * step[d]) * strides[d];
      py[i] = px[off];
    }
    return absl::OkStatus();
  });
}

absl::Status Gather(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  TPC_ASSIGN_OR_RETURN(auto idx, ReadInts(ctx, indices));
  Shape out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, data.dtype()));
  int64_t outer = 1, inner = ir::DTypeSize(data.dtype());
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d < axis) outer *= data.dim(d);
    if (d > axis) inner *= data.dim(d);
  }
  const int64_t dim = data.dim(axis);
  const int64_t n = static_cast<int64_t>(idx.size());
  for (int64_t& i : idx) {
    TPC_ASSIGN_OR_RETURN(i, CheckIndex(ctx, i, dim));
  }
  ctx.pool().ParallelFor(outer * n, std::max<int64_t>(1, 65536 / std::max<int64_t>(inner, 1)),
                         [&](int64_t b, int64_t e) {
                           for (int64_t k = b; k < e; ++k) {
                             const int64_t o = k / n, j = k % n;
                             std::memcpy(
                                 y->raw() + k * inner,
                                 data.raw() + (o * dim + idx[static_cast<size_t>(j)]) * inner,
                                 static_cast<size_t>(inner));
                           }
                         });
  return absl::OkStatus();
}

// The index check of an op whose dim a lowering split across ranks (each rank sees only
// its part, so its own kernel can no longer tell an index out of range): `Gather`'s
// semantics with wrap=1 (negative indices count from the end), class labels with wrap=0
// (ignore_index passes through). The error names the op the lowering replaced.
absl::Status CheckIndices(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::Node& node = ctx.node();
  const int64_t dim = node.attr_int("dim", 0);
  const bool wrap = node.attr_int("wrap", 0) != 0;
  std::optional<int64_t> ignore;
  if (node.has_attr("ignore_index")) ignore = node.attr_int("ignore_index", 0);
  const std::string source = node.attr_string("source", node.Describe());
  if (x.dtype() != ir::DType::kI64 && x.dtype() != ir::DType::kI32) {
    return ctx.Error(absl::StrCat("expected an i64 or i32 tensor, got ", x.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  auto check = [&]<typename I>() -> absl::Status {
    const I* px = x.data<I>();
    I* py = y->data<I>();
    for (int64_t k = 0; k < x.num_elements(); ++k) {
      const int64_t i = px[k];
      if (wrap && i >= -dim && i < dim) {
        py[k] = static_cast<I>(i < 0 ? i + dim : i);
      } else if (!wrap && ((i >= 0 && i < dim) || (ignore && i == *ignore))) {
        py[k] = px[k];
      } else if (wrap) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": index ", i, " is out of range for a dim of ", dim));
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": label ", i, " is out of range for ", dim, " classes"));
      }
    }
    return absl::OkStatus();
  };
  return x.dtype() == ir::DType::kI64 ? check.operator()<int64_t>() : check.operator()<int32_t>();
}

absl::Status CheckElementIndices(const KernelContext& ctx, const Tensor& data,
                                 const Tensor& indices, int64_t axis) {
  if (indices.rank() != data.rank()) return ctx.Error("indices and data differ in rank");
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      return ctx.Error(absl::StrCat("indices ", indices.TypeString(), " reach past data ",
                                    data.TypeString(), " in dim ", d));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReadGatherNd(const KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  const int64_t q = indices.rank();
  if (q < 1 || b < 0 || b >= q) {
    return ctx.Error(
        absl::StrCat("indices ", indices.TypeString(), " and batch_dims ", b, " do not fit"));
  }
  const int64_t last = indices.dim(q - 1);
  if (last + b > data.rank()) return ctx.Error("indices address more dims than data has");
  for (int64_t d = 0; d < b; ++d) {
    if (indices.dim(d) != data.dim(d)) {
      return ctx.Error(absl::StrCat("batch dim ", d, " of indices ", indices.TypeString(),
                                    " differs from data's ", data.TypeString()));
    }
  }
  return last;
}

absl::Status GatherElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  TPC_RETURN_IF_ERROR(CheckElementIndices(ctx, data, indices, axis));
  TPC_ASSIGN_OR_RETURN(auto idx, ReadInts(ctx, indices));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, indices.shape(), data.dtype()));
  const Shape strides = Strides(data.shape());
  return VisitBySize(ctx, data.dtype(), [&]<typename U>() -> absl::Status {
    Shape pos(indices.shape().size());
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      Unravel(i, indices.shape(), pos);
      TPC_ASSIGN_OR_RETURN(pos[static_cast<size_t>(axis)],
                           CheckIndex(ctx, idx[static_cast<size_t>(i)], data.dim(axis)));
      int64_t off = 0;
      for (size_t d = 0; d < pos.size(); ++d) off += pos[d] * strides[d];
      y->data<U>()[i] = data.data<U>()[off];
    }
    return absl::OkStatus();
  });
}

absl::Status GatherND(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  TPC_ASSIGN_OR_RETURN(const int64_t last, ReadGatherNd(ctx));
  TPC_ASSIGN_OR_RETURN(auto idx, ReadInts(ctx, indices));
  Shape out(indices.shape().begin(), indices.shape().end() - 1);
  out.insert(out.end(), data.shape().begin() + b + last, data.shape().end());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, data.dtype()));
  int64_t batch = 1, slice = ir::DTypeSize(data.dtype());
  for (int64_t d = 0; d < b; ++d) batch *= data.dim(d);
  for (int64_t d = b + last; d < data.rank(); ++d) slice *= data.dim(d);
  const Shape strides = Strides(data.shape());
  const int64_t tuples = static_cast<int64_t>(idx.size()) / std::max<int64_t>(last, 1);
  const int64_t per_batch = tuples / std::max<int64_t>(batch, 1);
  const int64_t es = ir::DTypeSize(data.dtype());
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off =
        (t / std::max<int64_t>(per_batch, 1)) * (b > 0 ? strides[static_cast<size_t>(b - 1)] : 0);
    for (int64_t k = 0; k < last; ++k) {
      TPC_ASSIGN_OR_RETURN(
          int64_t i, CheckIndex(ctx, idx[static_cast<size_t>(t * last + k)], data.dim(b + k)));
      off += i * strides[static_cast<size_t>(b + k)];
    }
    std::memcpy(y->raw() + t * slice, data.raw() + off * es, static_cast<size_t>(slice));
  }
  return absl::OkStatus();
}

absl::Status ScatterND(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  const std::string reduction = ctx.node().attr_string("reduction", "none");
  TPC_ASSIGN_OR_RETURN(auto idx, ReadInts(ctx, indices));
  TPC_RETURN_IF_ERROR(CopyWithShape(ctx, data.shape()));
  Tensor& y = ctx.output(0);
  const int64_t last = indices.dim(indices.rank() - 1);
  int64_t slice = 1;
  for (int64_t d = last; d < data.rank(); ++d) slice *= data.dim(d);
  const Shape strides = Strides(data.shape());
  const int64_t tuples = last == 0 ? 1 : static_cast<int64_t>(idx.size()) / last;
  return VisitType(ctx, data.dtype(), [&]<typename T>() -> absl::Status {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t k = 0; k < last; ++k) {
        TPC_ASSIGN_OR_RETURN(int64_t i,
                             CheckIndex(ctx, idx[static_cast<size_t>(t * last + k)], data.dim(k)));
        off += i * strides[static_cast<size_t>(k)];
      }
      for (int64_t j = 0; j < slice; ++j) {
        T& dst = y.data<T>()[off + j];
        dst = Combine<T>(reduction, dst, updates.data<T>()[t * slice + j]);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status ScatterElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  const std::string reduction = ctx.node().attr_string("reduction", "none");
  TPC_ASSIGN_OR_RETURN(int64_t axis,
                       NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), data.rank()));
  TPC_ASSIGN_OR_RETURN(auto idx, ReadInts(ctx, indices));
  TPC_RETURN_IF_ERROR(CopyWithShape(ctx, data.shape()));
  Tensor& y = ctx.output(0);
  const Shape strides = Strides(data.shape());
  return VisitType(ctx, data.dtype(), [&]<typename T>() -> absl::Status {
    Shape pos(indices.shape().size());
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      Unravel(i, indices.shape(), pos);
      TPC_ASSIGN_OR_RETURN(pos[static_cast<size_t>(axis)],
                           CheckIndex(ctx, idx[static_cast<size_t>(i)], data.dim(axis)));
      int64_t off = 0;
      for (size_t d = 0; d < pos.size(); ++d) off += pos[d] * strides[d];
      T& dst = y.data<T>()[off];
      dst = Combine<T>(reduction, dst, updates.data<T>()[i]);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<PadShape> ReadPad(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  PadShape pad;
  const std::string mode = ctx.node().attr_string("mode", "constant");
  if (mode == "constant") {
    pad.mode = math::PadMode::kConstant;
  } else if (mode == "edge") {
    pad.mode = math::PadMode::kEdge;
  } else if (mode == "reflect") {
    pad.mode = math::PadMode::kReflect;
  } else if (mode == "wrap") {
    pad.mode = math::PadMode::kWrap;
  } else {
    return ctx.Error(absl::StrCat("mode '", mode, "' is not constant, edge, reflect or wrap"));
  }
  TPC_ASSIGN_OR_RETURN(auto pads_in, ReadInts(ctx, ctx.input(1)));
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    TPC_ASSIGN_OR_RETURN(axes, ReadInts(ctx, ctx.input(3)));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads_in.size() != 2 * axes.size()) return ctx.Error("pads must hold two values per axis");
  pad.before.assign(static_cast<size_t>(rank), 0);
  pad.out = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    TPC_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[i], rank));
    pad.before[static_cast<size_t>(a)] = pads_in[i];
    pad.out[static_cast<size_t>(a)] += pads_in[i] + pads_in[i + axes.size()];
    if (pad.out[static_cast<size_t>(a)] < 0) {
      return ctx.Error(absl::StrCat("pads crop axis ", a, " of ", x.TypeString(), " below 0"));
    }
  }
  return pad;
}

absl::Status Pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(const PadShape pad, ReadPad(ctx));
  const Shape& before = pad.before;
  const Shape& out = pad.out;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  const Tensor* cv = ctx.optional_input(2);
  const Shape strides = Strides(x.shape());
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() -> absl::Status {
    U fill{};
    if (cv != nullptr && cv->num_elements() > 0) std::memcpy(&fill, cv->raw(), sizeof(U));
    Shape idx(static_cast<size_t>(rank));
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      Unravel(i, out, idx);
      int64_t off = 0;
      bool outside = false;
      for (size_t d = 0; d < static_cast<size_t>(rank) && !outside; ++d) {
        const int64_t p = math::PadSourceIndex(pad.mode, idx[d] - before[d], x.shape()[d]);
        outside = p < 0;
        off += p * strides[d];
      }
      y->data<U>()[i] = outside ? fill : x.data<U>()[off];
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<CropPadShape> ReadCenterCropPad(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(auto sizes, ReadInts(ctx, ctx.input(1)));
  std::vector<int64_t> axes;
  if (ctx.node().has_attr("axes")) {
    axes = ctx.node().attr_ints("axes");
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (sizes.size() != axes.size()) {
    return ctx.Error(absl::StrCat("shape has ", sizes.size(), " sizes for ", axes.size(), " axes"));
  }
  CropPadShape r;
  r.out = x.shape();
  r.shift.assign(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    TPC_ASSIGN_OR_RETURN(const int64_t a, NormalizeAxis(ctx, axes[i], rank));
    const auto d = static_cast<size_t>(a);
    if (sizes[i] < 0) return ctx.Error("sizes must not be negative");
    r.shift[d] =
        x.shape()[d] >= sizes[i] ? (x.shape()[d] - sizes[i]) / 2 : -((sizes[i] - x.shape()[d]) / 2);
    r.out[d] = sizes[i];
  }
  return r;
}

// Each axis of `axes` (default all) cropped or zero-padded to its size in `shape`, centred:
// the odd element cropped or padded at the end.
absl::Status CenterCropPad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const CropPadShape r, ReadCenterCropPad(ctx));
  const Shape &out = r.out, &shift = r.shift;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  const Shape strides = Strides(x.shape());
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() -> absl::Status {
    Shape idx(static_cast<size_t>(x.rank()));
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      Unravel(i, out, idx);
      int64_t off = 0;
      bool inside = true;
      for (size_t d = 0; d < idx.size() && inside; ++d) {
        const int64_t p = idx[d] + shift[d];
        inside = p >= 0 && p < x.shape()[d];
        off += p * strides[d];
      }
      y->data<U>()[i] = inside ? x.data<U>()[off] : U{};
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<ReverseSequenceShape> ReadReverseSequence(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ReverseSequenceShape r;
  TPC_ASSIGN_OR_RETURN(r.lens, ReadInts(ctx, ctx.input(1)));
  r.batch_axis = ctx.node().attr_int("batch_axis", 1);
  const int64_t time_axis = ctx.node().attr_int("time_axis", 0);
  if (x.rank() < 2 || (r.batch_axis != 0 && r.batch_axis != 1) || time_axis + r.batch_axis != 1) {
    return ctx.Error("batch_axis and time_axis must be 0 and 1 (either way) of a rank >= 2 input");
  }
  const int64_t batch = x.dim(r.batch_axis), time = x.dim(time_axis);
  if (static_cast<int64_t>(r.lens.size()) != batch) {
    return ctx.Error(
        absl::StrCat("sequence_lens has ", r.lens.size(), " lengths for a batch of ", batch));
  }
  for (int64_t len : r.lens) {
    if (len < 0 || len > time) {
      return ctx.Error(absl::StrCat("a sequence length ", len, " is outside [0, ", time, "]"));
    }
  }
  return r;
}

// The first sequence_lens[b] elements along time_axis reversed, for each b along batch_axis.
absl::Status ReverseSequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const ReverseSequenceShape r, ReadReverseSequence(ctx));
  const int64_t batch_axis = r.batch_axis, time_axis = 1 - r.batch_axis;
  const int64_t batch = x.dim(batch_axis), time = x.dim(time_axis);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const int64_t inner = x.num_elements() / std::max<int64_t>(batch * time, 1);
  const Shape strides = Strides(x.shape());
  const int64_t sb = strides[static_cast<size_t>(batch_axis)];
  const int64_t st = strides[static_cast<size_t>(time_axis)];
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() -> absl::Status {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = r.lens[static_cast<size_t>(b)];
      for (int64_t t = 0; t < time; ++t) {
        const int64_t from = t < len ? len - 1 - t : t;
        std::memcpy(y->data<U>() + b * sb + t * st, x.data<U>() + b * sb + from * st,
                    static_cast<size_t>(inner) * sizeof(U));
      }
    }
    return absl::OkStatus();
  });
}

absl::Status Trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("Trilu needs rank >= 2");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    TPC_ASSIGN_OR_RETURN(auto kv, ReadInts(ctx, ctx.input(1)));
    if (!kv.empty()) k = kv[0];
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  TPC_RETURN_IF_ERROR(CopyWithShape(ctx, x.shape()));
  Tensor& y = ctx.output(0);
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const int64_t es = ir::DTypeSize(x.dtype());
  const int64_t mats = rows * cols == 0 ? 0 : x.num_elements() / (rows * cols);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        if (!math::TriluKeeps(upper, k, i, j))
          std::memset(y.raw() + ((m * rows + i) * cols + j) * es, 0, static_cast<size_t>(es));
      }
    }
  }
  return absl::OkStatus();
}

// The slices along `axis` (or, without it, the elements of the flattened input) whose
// condition is true; the condition may be shorter than the dim.
absl::Status Compress(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != ir::DType::kBool || cond.rank() != 1) {
    return ctx.Error("the condition must be a 1-D bool tensor");
  }
  const bool has_axis = ctx.node().has_attr("axis");
  int64_t axis = 0, outer = 1, len = x.num_elements(), inner = 1;
  if (has_axis) {
    TPC_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
    len = x.dim(axis);
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (d < axis) outer *= x.dim(d);
      if (d > axis) inner *= x.dim(d);
    }
  }
  if (cond.num_elements() > len) return ctx.Error("the condition is longer than the dim");
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < cond.num_elements(); ++i) {
    if (cond.data<bool>()[i]) kept.push_back(i);
  }
  const int64_t k = static_cast<int64_t>(kept.size());
  Shape shape{k};
  if (has_axis) {
    shape = x.shape();
    shape[static_cast<size_t>(axis)] = k;
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape, x.dtype()));
  return VisitBySize(ctx, x.dtype(), [&]<typename U>() {
    const U* px = x.data<U>();
    U* py = y->data<U>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < k; ++j) {
        const U* src = px + (o * len + kept[static_cast<size_t>(j)]) * inner;
        std::copy(src, src + inner, py + (o * k + j) * inner);
      }
    }
    return absl::OkStatus();
  });
}

// The indices of the non-zero elements: [rank, count], in row-major order.
absl::Status NonZero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  TPC_RETURN_IF_ERROR(VisitType(ctx, x.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      if (x.data<T>()[i] != T(0)) hits.push_back(i);
    }
    return absl::OkStatus();
  }));
  const int64_t rank = x.rank(), count = static_cast<int64_t>(hits.size());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {rank, count}, ir::DType::kI64));
  for (int64_t j = 0; j < count; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for (int64_t d = rank; d-- > 0;) {
      y->data<int64_t>()[d * count + j] = rem % x.dim(d);
      rem /= x.dim(d);
    }
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
