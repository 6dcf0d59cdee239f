// ONNX's RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim elements of every
// head by the angles of its position, read from cos/sin caches ([positions, dim/2] indexed by
// position_ids, or [batch, seq, dim/2] without them); halves (default) or interleaved pairs.
#include <algorithm>
#include <vector>

#include "kernels.h"
#include "tpc/runtime/math/rotary.h"

namespace tpc::runtime::cpu {
namespace {

// y = x with the first 2 · half elements of every head rotated by the angles of cache row
// angle_row(b · seq + s); x is [batch, heads, seq, hd] (4-D) or [batch, seq, heads · hd].
template <typename T, typename RowFn>
void RotateHeads(KernelContext& ctx, const Tensor& x, Tensor* y, int64_t heads, int64_t seq,
                 int64_t hd, const Tensor& cos, const Tensor& sin, int64_t half, bool interleaved,
                 RowFn angle_row) {
  const T* px = x.data<T>();
  T* py = y->data<T>();
  std::copy_n(px, x.num_elements(), py);  // the unrotated tail of each head
  const int64_t batch = x.dim(0);
  ctx.pool().ParallelFor(batch * seq, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t bs = lo; bs < hi; ++bs) {
      const int64_t b = bs / seq, s = bs % seq;
      const int64_t row = angle_row(bs);
      const T* c = cos.data<T>() + row * half;
      const T* sn = sin.data<T>() + row * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off =
            x.rank() == 4 ? ((b * heads + h) * seq + s) * hd : (bs * heads + h) * hd;
        math::RotateHead(px + off, c, sn, half, interleaved, py + off);
      }
    }
  });
}

}  // namespace

absl::Status RotaryEmbedding(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  const Tensor* pos = ctx.optional_input(3);
  const ir::Node& node = ctx.node();
  if (x.rank() != 3 && x.rank() != 4) {
    return ctx.Error(absl::StrCat("input must be 3-D or 4-D, got ", x.TypeString()));
  }
  const int64_t batch = x.dim(0);
  int64_t heads = 0, seq = 0, hd = 0;
  if (x.rank() == 4) {
    heads = x.dim(1);
    seq = x.dim(2);
    hd = x.dim(3);
  } else {
    heads = node.attr_int("num_heads", 0);
    seq = x.dim(1);
    if (heads <= 0 || x.dim(2) % heads != 0) {
      return ctx.Error("a 3-D input needs num_heads, dividing its last dim");
    }
    hd = x.dim(2) / heads;
  }
  int64_t rd = node.attr_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = hd;
  if (rd < 0 || rd > hd || rd % 2 != 0) {
    return ctx.Error(absl::StrCat("rotary_embedding_dim ", rd, " must be even and at most the ",
                                  "head size ", hd));
  }
  const int64_t half = rd / 2;
  const Shape want = pos ? Shape{cos.rank() > 0 ? cos.dim(0) : 0, half} : Shape{batch, seq, half};
  if (cos.shape() != want || sin.shape() != want || cos.dtype() != x.dtype() ||
      sin.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat(
        "cos_cache ", cos.TypeString(), " and sin_cache ", sin.TypeString(), " must be ",
        pos ? "[positions, " : "[batch, seq, ", half, "] of the input's type"));
  }
  std::vector<int64_t> positions;
  if (pos != nullptr) {
    if (pos->shape() != Shape{batch, seq}) {
      return ctx.Error(absl::StrCat("position_ids ", pos->TypeString(), " must be [batch, seq]"));
    }
    TPC_ASSIGN_OR_RETURN(positions, ReadInts(ctx, *pos));
    for (int64_t p : positions) {
      if (p < 0 || p >= cos.dim(0)) {
        return ctx.Error(
            absl::StrCat("position id ", p, " is outside the caches' ", cos.dim(0), " positions"));
      }
    }
  }
  const bool interleaved = node.attr_int("interleaved", 0) != 0;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    RotateHeads<T>(ctx, x, y, heads, seq, hd, cos, sin, half, interleaved,
                   [&](int64_t bs) { return pos ? positions[static_cast<size_t>(bs)] : bs; });
    return absl::OkStatus();
  });
}

// onnxruntime's RotaryEmbedding(input, position_ids, cos_cache, sin_cache): input
// [batch, seq, hidden] or [batch, heads, seq, head]; position_ids [batch, seq], or [1]
// (the first position; the rest follow); caches [positions, rotary/2]. The head size of a
// 3-D input is hidden / num_heads, or the rotary size when num_heads is 0.
absl::Status MsRotaryEmbedding(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& pos = ctx.input(1);
  const Tensor& cos = ctx.input(2);
  const Tensor& sin = ctx.input(3);
  const ir::Node& node = ctx.node();
  if ((x.rank() != 3 && x.rank() != 4) || cos.rank() != 2 || sin.shape() != cos.shape() ||
      cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("input ", x.TypeString(), ", cos_cache ", cos.TypeString(),
                                  " and sin_cache ", sin.TypeString(),
                                  " must be 3-D or 4-D and [positions, rotary / 2] of its type"));
  }
  const int64_t batch = x.dim(0), seq = x.rank() == 4 ? x.dim(2) : x.dim(1);
  int64_t rd = node.attr_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = 2 * cos.dim(1);
  int64_t heads = 0, hd = 0;
  if (x.rank() == 4) {
    heads = x.dim(1);
    hd = x.dim(3);
  } else {
    heads = node.attr_int("num_heads", 0);
    hd = heads > 0 ? x.dim(2) / heads : rd;
    if (heads == 0 && hd > 0) heads = x.dim(2) / hd;
  }
  if (hd <= 0 || heads * hd != (x.rank() == 4 ? heads * x.dim(3) : x.dim(2)) || rd > hd ||
      rd % 2 != 0 || rd / 2 != cos.dim(1)) {
    return ctx.Error(absl::StrCat("rotary size ", rd, " does not fit heads of ", hd, " (num_heads ",
                                  node.attr_int("num_heads", 0), ")"));
  }
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> ids, ReadInts(ctx, pos));
  const bool offset = pos.rank() == 1 && ids.size() == 1;
  if (!offset && static_cast<int64_t>(ids.size()) != batch * seq) {
    return ctx.Error(
        absl::StrCat("position_ids ", pos.TypeString(), " must be [batch, seq] or [1]"));
  }
  const int64_t half = rd / 2;
  const bool interleaved = node.attr_int("interleaved", 0) != 0;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  auto position = [&](int64_t bs) {
    return offset ? ids[0] + bs % seq : ids[static_cast<size_t>(bs)];
  };
  for (int64_t bs = 0; bs < batch * seq; ++bs) {
    if (position(bs) < 0 || position(bs) >= cos.dim(0)) {
      return ctx.Error(absl::StrCat("position ", position(bs), " is outside the caches' ",
                                    cos.dim(0), " positions"));
    }
  }
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    RotateHeads<T>(ctx, x, y, heads, seq, hd, cos, sin, half, interleaved, position);
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
