// onnxruntime's GatherBlockQuantized as onnxruntime-genai's builder writes it for tied int4
// embeddings: rows of a table quantized as MatMulNBits' weight is (the logits' MatMulNBits
// B, reshaped to [rows, K · bits / 8]), each gathered row dequantized. The arithmetic is
// math/nbits.h's (MatMulNBits' conventions: codes low bits first, zero points packed the
// same way, 2^(bits - 1) without them), shared with the CUDA kernel.
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels.h"
#include "tpc/runtime/math/nbits.h"

namespace tpc::runtime::cpu {

absl::StatusOr<math::NBitsLayout> ReadBlockGather(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& scales = ctx.input(2);
  const Tensor* zero_points = ctx.optional_input(3);
  math::NBitsLayout l;
  l.bits = node.attr_int("bits", 4);
  l.block_size = node.attr_int("block_size", 128);
  const int64_t gather_axis = node.attr_int("gather_axis", 0);
  const int64_t quantize_axis = node.attr_int("quantize_axis", 1);
  if (data.dtype() != ir::DType::kU8 || data.rank() != 2 || gather_axis != 0 ||
      (quantize_axis != 1 && quantize_axis != -1)) {
    return ctx.Error(absl::StrCat("data ", data.TypeString(), " with gather_axis ", gather_axis,
                                  " and quantize_axis ", quantize_axis,
                                  " is not supported (a uint8 table [rows, K · bits / 8] "
                                  "gathered by rows, quantized along its last axis)"));
  }
  if (l.bits != 4 && l.bits != 8) {
    return ctx.Error(absl::StrCat("bits ", l.bits, " is not supported (4 or 8)"));
  }
  l.n = data.dim(0);
  l.k = data.dim(1) * 8 / l.bits;
  if (!l.valid() || l.k % l.block_size != 0) {
    return ctx.Error(absl::StrCat("K = ", l.k, " in blocks of ", l.block_size,
                                  ": needs a power-of-two block_size of at least 16 that "
                                  "divides K"));
  }
  if (indices.dtype() != ir::DType::kI64 && indices.dtype() != ir::DType::kI32) {
    return ctx.Error("indices must be int64 or int32");
  }
  const ir::DType t = scales.dtype();
  if ((t != ir::DType::kF32 && t != ir::DType::kF16 && t != ir::DType::kBF16) ||
      scales.shape() != Shape{l.n, l.blocks()}) {
    return ctx.Error(absl::StrCat("scales ", scales.TypeString(), " are not float [", l.n, ", ",
                                  l.blocks(), "]"));
  }
  if (zero_points != nullptr && (zero_points->dtype() != ir::DType::kU8 ||
                                 zero_points->shape() != Shape{l.n, l.packed_zero_point_bytes()})) {
    return ctx.Error(absl::StrCat("zero_points ", zero_points->TypeString(), " are not uint8 [",
                                  l.n, ", ", l.packed_zero_point_bytes(),
                                  "] (packed as the codes)"));
  }
  return l;
}

// GatherBlockQuantized(data, indices, scales, zero_points?) -> indices' shape + [K].
absl::Status GatherBlockQuantized(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::NBitsLayout l, ReadBlockGather(ctx));
  if (ctx.input(2).dtype() != ir::DType::kF32) {
    return ctx.Error("the CPU kernel takes float32 scales only");
  }
  const Tensor& indices = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, ReadInts(ctx, indices));
  for (const int64_t i : idx) {
    if (i < -l.n || i >= l.n) {
      return ctx.Error(absl::StrCat("index ", i, " is out of range for ", l.n, " rows"));
    }
  }
  Shape out = indices.shape();
  out.push_back(l.k);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, ir::DType::kF32));
  const uint8_t* data = ctx.input(0).data<uint8_t>();
  const float* scales = ctx.input(2).data<float>();
  const Tensor* zp = ctx.optional_input(3);
  const uint8_t* zero_points = zp != nullptr ? zp->data<uint8_t>() : nullptr;
  float* py = y->data<float>();
  ctx.pool().ParallelFor(y->num_elements(), 4096, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      math::NBitsGatherElement(
          l, data, idx.data(), [scales](int64_t j) { return scales[j]; }, zero_points, i, py + i);
    }
  });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
