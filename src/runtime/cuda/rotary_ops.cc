// RotaryEmbedding on the GPU: ONNX's (opset 23) and onnxruntime's, one element-wise
// kernel (rotary.cu) with the position ids on the device (one outside the caches fails the
// run at its end, naming the node). Checks and layouts as the CPU kernels (cpu/rotary.cc).
#include "absl/strings/str_cat.h"
#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

bool IsIndex(const Tensor* t) {
  return t != nullptr && (t->dtype() == ir::DType::kI64 || t->dtype() == ir::DType::kI32);
}

absl::Status Launch(KernelContext& ctx, const math::RotaryLayout& l, const Tensor& x,
                    const Tensor* pos, const Tensor& cos, const Tensor& sin) {
  TPC_ASSIGN_OR_RETURN(FloatKind k, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const int code = BackendOf(ctx).Expect(std::string(
      ctx.Error(absl::StrCat("a position is outside the caches' ", l.cache_rows, " rows"))
          .message()));
  return Check(ctx, LaunchRotaryEmbedding(k, l, x.raw(), pos != nullptr ? pos->raw() : nullptr,
                                          pos != nullptr && pos->dtype() == ir::DType::kI64,
                                          cos.raw(), sin.raw(), y->raw(), x.num_elements(),
                                          BackendOf(ctx).flag(), code, StreamOf(ctx)));
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
  math::RotaryLayout l;
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
    return ctx.Error(absl::StrCat("rotary_embedding_dim ", rd, " must be even and at most the ",
                                  "head size ", l.hd));
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
    if (pos->shape() != Shape{l.batch, l.seq} || !IsIndex(pos)) {
      return ctx.Error(absl::StrCat("position_ids ", pos->TypeString(),
                                    " must be [batch, seq] of int64 or int32"));
    }
    l.pos_mode = 1;
    l.cache_rows = cos.dim(0);
  } else {
    l.cache_rows = l.batch * l.seq;
  }
  l.interleaved = node.attr_int("interleaved", 0) != 0;
  return Launch(ctx, l, x, pos, cos, sin);
}

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
  math::RotaryLayout l;
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
  if (!IsIndex(&pos) || (!offset && pos.num_elements() != l.batch * l.seq)) {
    return ctx.Error(
        absl::StrCat("position_ids ", pos.TypeString(), " must be [batch, seq] or [1]"));
  }
  l.half = rd / 2;
  l.pos_mode = offset ? 2 : 1;
  l.cache_rows = cos.dim(0);
  l.interleaved = node.attr_int("interleaved", 0) != 0;
  return Launch(ctx, l, x, &pos, cos, sin);
}

}  // namespace tpc::runtime::cuda
