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
                 int64_t hd, const T* cos, const T* sin, int64_t half, bool interleaved,
                 RowFn angle_row) {
  const T* px = x.data<T>();
  T* py = y->data<T>();
  std::copy_n(px, x.num_elements(), py);  // the unrotated tail of each head
  const int64_t batch = x.dim(0);
  ctx.pool().ParallelFor(batch * seq, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t bs = lo; bs < hi; ++bs) {
      const int64_t b = bs / seq, s = bs % seq;
      const int64_t row = angle_row(bs);
      const T* c = cos + row * half;
      const T* sn = sin + row * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off =
            x.rank() == 4 ? ((b * heads + h) * seq + s) * hd : (bs * heads + h) * hd;
        math::RotateHead(px + off, c, sn, half, interleaved, py + off);
      }
    }
  });
}

}  // namespace

absl::StatusOr<math::RotaryLayout> ReadRotaryLayout(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  math::RotaryLayout l;
  if (node.domain() != "com.microsoft") {
    // ONNX's: (x, cos_cache, sin_cache, position_ids?).
    const Tensor& cos = ctx.input(1);
    const Tensor& sin = ctx.input(2);
    const Tensor* pos = ctx.optional_input(3);
    if (x.rank() != 3 && x.rank() != 4) {
      return ctx.Error(absl::StrCat("input must be 3-D or 4-D, got ", x.TypeString()));
    }
    l.batch = x.dim(0);
    l.four_d = x.rank() == 4;
    if (l.four_d) {
      l.heads = x.dim(1);
      l.seq = x.dim(2);
      l.hd = x.dim(3);
    } else {
      l.heads = node.attr_int("num_heads", 0);
      l.seq = x.dim(1);
      if (l.heads <= 0 || x.dim(2) % l.heads != 0) {
        return ctx.Error("a 3-D input needs num_heads, dividing its last dim");
      }
      l.hd = x.dim(2) / l.heads;
    }
    int64_t rd = node.attr_int("rotary_embedding_dim", 0);
    if (rd == 0) rd = l.hd;
    if (rd < 0 || rd > l.hd || rd % 2 != 0) {
      return ctx.Error(absl::StrCat("rotary_embedding_dim ", rd,
                                    " must be even and at most the head size ", l.hd));
    }
    l.half = rd / 2;
    const Shape want =
        pos ? Shape{cos.rank() > 0 ? cos.dim(0) : 0, l.half} : Shape{l.batch, l.seq, l.half};
    if (cos.shape() != want || sin.shape() != want || cos.dtype() != x.dtype() ||
        sin.dtype() != x.dtype()) {
      return ctx.Error(absl::StrCat(
          "cos_cache ", cos.TypeString(), " and sin_cache ", sin.TypeString(), " must be ",
          pos ? "[positions, " : "[batch, seq, ", l.half, "] of the input's type"));
    }
    if (pos != nullptr) {
      if (pos->shape() != Shape{l.batch, l.seq} ||
          (pos->dtype() != ir::DType::kI64 && pos->dtype() != ir::DType::kI32)) {
        return ctx.Error(absl::StrCat("position_ids ", pos->TypeString(),
                                      " must be [batch, seq] of int64 or int32"));
      }
      l.pos_mode = 1;
      l.cache_rows = cos.dim(0);
    } else {
      l.cache_rows = l.batch * l.seq;
    }
  } else {
    // onnxruntime's: (x, position_ids, cos_cache, sin_cache).
    const Tensor& pos = ctx.input(1);
    const Tensor& cos = ctx.input(2);
    const Tensor& sin = ctx.input(3);
    if ((x.rank() != 3 && x.rank() != 4) || cos.rank() != 2 || sin.shape() != cos.shape() ||
        cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
      return ctx.Error(absl::StrCat("input ", x.TypeString(), ", cos_cache ", cos.TypeString(),
                                    " and sin_cache ", sin.TypeString(),
                                    " must be 3-D or 4-D and [positions, rotary / 2] of its type"));
    }
    l.batch = x.dim(0);
    l.four_d = x.rank() == 4;
    l.seq = l.four_d ? x.dim(2) : x.dim(1);
    int64_t rd = node.attr_int("rotary_embedding_dim", 0);
    if (rd == 0) rd = 2 * cos.dim(1);
    if (l.four_d) {
      l.heads = x.dim(1);
      l.hd = x.dim(3);
    } else {
      l.heads = node.attr_int("num_heads", 0);
      l.hd = l.heads > 0 ? x.dim(2) / l.heads : rd;
      if (l.heads == 0 && l.hd > 0) l.heads = x.dim(2) / l.hd;
    }
    if (l.hd <= 0 || l.heads * l.hd != (l.four_d ? l.heads * x.dim(3) : x.dim(2)) || rd > l.hd ||
        rd % 2 != 0 || rd / 2 != cos.dim(1)) {
      return ctx.Error(absl::StrCat("rotary size ", rd, " does not fit heads of ", l.hd,
                                    " (num_heads ", node.attr_int("num_heads", 0), ")"));
    }
    const bool offset = pos.rank() == 1 && pos.num_elements() == 1;
    if ((pos.dtype() != ir::DType::kI64 && pos.dtype() != ir::DType::kI32) ||
        (!offset && pos.num_elements() != l.batch * l.seq)) {
      return ctx.Error(
          absl::StrCat("position_ids ", pos.TypeString(), " must be [batch, seq] or [1]"));
    }
    l.half = rd / 2;
    l.pos_mode = offset ? 2 : 1;
    l.cache_rows = cos.dim(0);
  }
  const int64_t interleaved = node.attr_int("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) {
    return ctx.Error(absl::StrCat("interleaved is ", interleaved, "; it must be 0 or 1"));
  }
  l.interleaved = interleaved == 1;
  return l;
}

namespace {

// Both RotaryEmbeddings on the host: the position ids checked against the caches.
absl::Status RotaryOnHost(KernelContext& ctx, const Tensor& x, const Tensor* pos, const Tensor& cos,
                          const Tensor& sin) {
  TPC_ASSIGN_OR_RETURN(const math::RotaryLayout l, ReadRotaryLayout(ctx));
  std::vector<int64_t> ids;
  if (pos != nullptr) {
    TPC_ASSIGN_OR_RETURN(ids, ReadInts(ctx, *pos));
  }
  auto row = [&](int64_t bs) {
    return l.pos_mode == 0   ? bs
           : l.pos_mode == 1 ? ids[static_cast<size_t>(bs)]
                             : ids[0] + bs % l.seq;
  };
  for (int64_t bs = 0; bs < l.batch * l.seq; ++bs) {
    if (row(bs) < 0 || row(bs) >= l.cache_rows) {
      return ctx.Error(absl::StrCat("position ", row(bs), " is outside the caches' ", l.cache_rows,
                                    " positions"));
    }
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    RotateHeads<T>(ctx, x, y, l.heads, l.seq, l.hd, cos.data<T>(), sin.data<T>(), l.half,
                   l.interleaved, row);
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RotaryEmbedding(KernelContext& ctx) {
  return RotaryOnHost(ctx, ctx.input(0), ctx.optional_input(3), ctx.input(1), ctx.input(2));
}

// onnxruntime's RotaryEmbedding(input, position_ids, cos_cache, sin_cache): input
// [batch, seq, hidden] or [batch, heads, seq, head]; position_ids [batch, seq], or [1]
// (the first position; the rest follow); caches [positions, rotary/2]. The head size of a
// 3-D input is hidden / num_heads, or the rotary size when num_heads is 0.
absl::Status MsRotaryEmbedding(KernelContext& ctx) {
  return RotaryOnHost(ctx, ctx.input(0), &ctx.input(1), ctx.input(2), ctx.input(3));
}

absl::StatusOr<MRopeLayout> ReadMRopeLayout(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& pos = ctx.input(1);
  const Tensor& cos = ctx.input(2);
  const Tensor& sin = ctx.input(3);
  MRopeLayout m;
  math::RotaryLayout& l = m.rotary;
  if (x.rank() != 3 && x.rank() != 4) {
    return ctx.Error(absl::StrCat("input must be 3-D or 4-D, got ", x.TypeString()));
  }
  if (node.attr_int("is_packed_batching", 0) != 0) {
    return ctx.Error("is_packed_batching (ragged batches) is not implemented");
  }
  l.batch = x.dim(0);
  l.four_d = x.rank() == 4;
  l.seq = l.four_d ? x.dim(2) : x.dim(1);
  l.heads = l.four_d ? x.dim(1) : node.attr_int("num_heads", 0);
  int64_t rd = node.attr_int("rotary_embedding_dim", 0);
  if (l.four_d) {
    l.hd = x.dim(3);
  } else if (l.heads > 0 && x.dim(2) % l.heads == 0) {
    l.hd = x.dim(2) / l.heads;
  } else {  // (onnxruntime refuses num_heads 0 here too)
    return ctx.Error(absl::StrCat("a 3-D input needs num_heads dividing its last dim ", x.dim(2),
                                  " (num_heads ", l.heads, ")"));
  }
  if (rd == 0) rd = l.hd;
  const std::vector<int64_t> sections = node.attr_ints("mrope_section");
  if (rd <= 0 || rd > l.hd || rd % 2 != 0 || cos.rank() != 2 || cos.dim(1) != rd / 2 ||
      sin.shape() != cos.shape() || cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("rotary size ", rd, ", cos_cache ", cos.TypeString(),
                                  " and sin_cache ", sin.TypeString(), " do not fit heads of ",
                                  l.hd, " (caches [positions, rotary / 2] of the input's type)"));
  }
  if (sections.size() != 3 || sections[0] < 0 || sections[1] < 0 || sections[2] < 0 ||
      sections[0] + sections[1] + sections[2] != rd / 2) {
    return ctx.Error(
        absl::StrCat("mrope_section must be 3 sizes summing to rotary / 2 = ", rd / 2));
  }
  const int64_t layout = node.attr_int("mrope_layout", 0);
  const int64_t interleaved = node.attr_int("interleaved", 0);
  if ((layout != 0 && layout != 1) || (interleaved != 0 && interleaved != 1)) {
    return ctx.Error("mrope_layout and interleaved must be 0 or 1");
  }
  if ((pos.dtype() != ir::DType::kI64 && pos.dtype() != ir::DType::kI32) ||
      pos.shape() != Shape{3, l.batch, l.seq}) {
    return ctx.Error(
        absl::StrCat("position_ids ", pos.TypeString(), " must be [3, batch, seq] of integers"));
  }
  l.half = rd / 2;
  l.interleaved = interleaved == 1;
  l.pos_mode = 0;  // the token-by-token caches M-RoPE makes
  l.cache_rows = l.batch * l.seq;
  m.sections = {sections[0], sections[1], sections[2], layout == 1};
  m.positions = cos.dim(0);
  m.scale = node.attr_float("scale", 1.0f);  // multiplies the angles' cos and sin
  return m;
}

// onnxruntime's MRotaryEmbedding(input, position_ids [3, batch, seq], cos_cache,
// sin_cache): the caches of each token gathered from its three positions
// (math::MRopeCacheRow), then RotaryEmbedding's rotation with them.
absl::Status MRotaryEmbedding(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const MRopeLayout m, ReadMRopeLayout(ctx));
  const math::RotaryLayout& l = m.rotary;
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> ids, ReadInts(ctx, ctx.input(1)));
  const int64_t tokens = l.batch * l.seq;
  // Element e of the token-by-token caches: its offset in the caches, its row checked.
  std::vector<int64_t> at(static_cast<size_t>(tokens * l.half));
  for (int64_t e = 0; e < tokens * l.half; ++e) {
    const int64_t row = math::MRopeCacheRow(m.sections, ids.data(), tokens, l.half, e);
    if (row < 0 || row >= m.positions) {
      return ctx.Error(
          absl::StrCat("position ", row, " is outside the caches' ", m.positions, " positions"));
    }
    at[static_cast<size_t>(e)] = row * l.half + e % l.half;
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    std::vector<T> cos(at.size()), sin(at.size());
    for (size_t e = 0; e < at.size(); ++e) {
      cos[e] = static_cast<T>(m.scale * ctx.input(2).data<T>()[at[e]]);
      sin[e] = static_cast<T>(m.scale * ctx.input(3).data<T>()[at[e]]);
    }
    RotateHeads<T>(ctx, x, y, l.heads, l.seq, l.hd, cos.data(), sin.data(), l.half, l.interleaved,
                   [](int64_t bs) { return bs; });
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
