// onnxruntime's QMoE (a mixture of experts with integer-quantized expert weights, as
// onnxruntime-genai's builder writes its int4 exports of LFM2-MoE and the like) on the CPU:
// MoE's routing and arithmetic (moe.cc's RunMoe), each chosen expert's 4-bit codes read by
// MatMulNBits' loops (a decode step's few tokens straight from the codes, more against
// tiles dequantized in registers' order), other layouts dequantized a tile at a time for
// the BLAS; each weight as math::MoeQuantWeight reads it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "int8_blocks.h"
#include "kernels.h"
#include "tpc/runtime/math/moe.h"

namespace tpc::runtime::cpu {
namespace {

// The bits of FC `fc` (1 or 2): fc{fc}_expert_weight_bits, else expert_weight_bits.
int BitsOf(const ir::Node& node, int fc) {
  const std::string own = absl::StrCat("fc", fc, "_expert_weight_bits");
  return static_cast<int>(node.attr_int(own, node.attr_int("expert_weight_bits", 4)));
}

// Checks one FC's codes [E, rows, cols · bits / 8] and scales [E, rows, cols / block] (or
// [E, rows] without a block_size: one scale per row) and gives its quantization.
absl::StatusOr<math::MoeQuant> ReadFc(const KernelContext& ctx, int fc, int64_t experts,
                                      int64_t rows, int64_t cols, int64_t block,
                                      ir::DType float_type) {
  const Tensor& codes = ctx.input(fc == 1 ? 2 : 5);
  const Tensor* scales = ctx.optional_input(fc == 1 ? 3 : 6);
  math::MoeQuant q;
  q.bits = BitsOf(ctx.node(), fc);
  q.block = block > 0 ? block : std::max<int64_t>(cols, 1);
  q.per_row = block <= 0;
  const std::string name = absl::StrCat("fc", fc);
  if (scales == nullptr) return ctx.Error(absl::StrCat(name, "_scales are missing"));
  const Shape want_scales = block > 0 ? Shape{experts, rows, cols / block} : Shape{experts, rows};
  if (codes.dtype() != ir::DType::kU8 || codes.shape() != Shape{experts, rows, q.row_bytes(cols)} ||
      scales->dtype() != float_type || scales->shape() != want_scales ||
      (block > 0 && cols % block != 0) || (q.bits == 4 && cols % 2 != 0)) {
    return ctx.Error(absl::StrCat(name, "_experts_weights ", codes.TypeString(), " and ", name,
                                  "_scales ", scales->TypeString(), " do not hold ", experts,
                                  " experts' ", rows, " rows of ", cols, " weights of ", q.bits,
                                  " bits (uint8 [", experts, ", ", rows, ", ", q.row_bytes(cols),
                                  "], scales of the input's type ", ShapeString(want_scales),
                                  block > 0 ? absl::StrCat(", in blocks of ", block) : "", ")"));
  }
  return q;
}

// Row `codes` of `cols` weights dequantized into `out`, as math::MoeQuantWeight reads each
// (the same (code - zero) · scale in f32), a block at a time: no division per weight.
void DequantizeRow(const math::MoeQuant& q, const uint8_t* codes, const float* scales, int64_t cols,
                   float* out) {
  const int zero = 1 << (q.bits - 1);
  for (int64_t b = 0; b * q.block < cols; ++b) {
    const float s = scales[b];
    const int64_t first = b * q.block, last = std::min(cols, first + q.block);
    if (q.bits == 8) {
      for (int64_t c = first; c < last; ++c) {
        out[c] = static_cast<float>(static_cast<int>(codes[c]) - zero) * s;
      }
    } else {  // 4 bits: first and last are even (blocks of 16 or more, or a whole even row)
      for (int64_t c = first; c < last; c += 2) {
        const uint8_t byte = codes[c / 2];
        out[c] = static_cast<float>(static_cast<int>(byte & 0x0F) - zero) * s;
        out[c + 1] = static_cast<float>(static_cast<int>(byte >> 4) - zero) * s;
      }
    }
  }
}

}  // namespace

// QMoE(input, router_probs, fc1_experts_weights, fc1_scales, fc1_experts_bias,
// fc2_experts_weights, fc2_scales, fc2_experts_bias): MoE's operands with FC1's and FC2's
// weights as codes and scales. Only integer quantization of 4 or 8 bits with the default
// zero point 2^(bits - 1) and the raw layout (weights_prepacked -1 or 0); FC3, zero points,
// router_weights and the FP4/FP8 inputs are refused at import (schema_extra.cc). The
// experts compute in f32, but with 8-bit codes in blocks each FC's input rows are first
// rounded to int8 per block, as onnxruntime 1.32's CPU does with such codes as constants
// (math::MoeInt8Activations; given them as graph inputs it computes in f32: the node
// tests hold them as initializers), whatever accuracy_level says.
absl::StatusOr<QMoeLayout> ReadQMoeLayout(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& router = ctx.input(1);
  const Tensor* b1 = ctx.optional_input(4);
  const Tensor* b2 = ctx.optional_input(7);
  for (int i = 8; i < ctx.num_inputs(); ++i) {
    if (ctx.optional_input(i) != nullptr) {
      return ctx.Error(absl::StrCat("input ", i,
                                    " (FC3, zero points, router_weights, global or activation "
                                    "scales) is not supported"));
    }
  }
  const int64_t prepacked = node.attr_int("weights_prepacked", -1);
  if (prepacked != -1 && prepacked != 0) {
    return ctx.Error(absl::StrCat("weights_prepacked ", prepacked,
                                  " is not supported (the raw layout: -1 or 0)"));
  }
  QMoeLayout q;
  math::MoeLayout& l = q.moe;
  TPC_RETURN_IF_ERROR(ReadMoeAttributes(ctx, &l));
  const Tensor& w1 = ctx.input(2);
  const Tensor& w2 = ctx.input(5);
  if (x.rank() < 2 || w1.rank() != 3 || w2.rank() != 3) {
    return ctx.Error(absl::StrCat("input ", x.TypeString(), ", fc1_experts_weights ",
                                  w1.TypeString(), " and fc2_experts_weights ", w2.TypeString(),
                                  " must be [tokens, H] or [B, S, H], [E, F·I, H·bits/8] and "
                                  "[E, H, I·bits/8]"));
  }
  // The widths first: FC2's gives the inner size.
  const int bits1 = BitsOf(node, 1), bits2 = BitsOf(node, 2);
  for (const int bits : {bits1, bits2}) {
    if (bits != 4 && bits != 8) {
      return ctx.Error(absl::StrCat("weights of ", bits, " bits are not supported (4 or 8 bits)"));
    }
  }
  if (bits1 != bits2) {
    return ctx.Error(absl::StrCat("FC1's ", bits1, "-bit and FC2's ", bits2,
                                  "-bit weights: widths that differ are not supported"));
  }
  // onnxruntime's CPU kernel renormalizes the k routing weights whatever the attribute
  // says (the shape rule refuses it at import; this is for graphs that skipped it).
  if (node.attr_int("normalize_routing_weights", 0) != 1) {
    return ctx.Error("normalize_routing_weights must be 1 (onnxruntime normalizes anyway)");
  }
  const ir::DType t = x.dtype();
  if ((t != ir::DType::kF32 && t != ir::DType::kF16 && t != ir::DType::kBF16) ||
      router.dtype() != t || (b1 != nullptr && b1->dtype() != t) ||
      (b2 != nullptr && b2->dtype() != t)) {
    return ctx.Error("the input, router_probs and biases must be of one float type");
  }
  l.hidden = x.dim(x.rank() - 1);
  l.tokens = l.hidden > 0 ? x.num_elements() / l.hidden : 0;
  l.experts = w1.dim(0);
  l.inter = w2.dim(2) * 8 / bits2;
  // block_size 0 (or absent): one scale per row, as onnxruntime reads it.
  const int64_t block = node.attr_int("block_size", 0);
  if (block > 0 && (block < 16 || (block & (block - 1)) != 0)) {
    return ctx.Error(absl::StrCat("block_size ", block, " must be a power of two, at least 16"));
  }
  TPC_ASSIGN_OR_RETURN(q.fc1, ReadFc(ctx, 1, l.experts, l.fc1_rows(), l.hidden, block, t));
  TPC_ASSIGN_OR_RETURN(q.fc2, ReadFc(ctx, 2, l.experts, l.hidden, l.inter, block, t));
  if ((b1 != nullptr && b1->shape() != Shape{l.experts, l.fc1_rows()}) ||
      (b2 != nullptr && b2->shape() != Shape{l.experts, l.hidden}) ||
      router.shape() != Shape{l.tokens, l.experts}) {
    return ctx.Error(absl::StrCat("the operands do not fit ", l.tokens, " tokens of ", l.hidden,
                                  ", ", l.experts, " experts of inner size ", l.inter,
                                  ": router_probs ", router.TypeString(),
                                  b1 ? ", fc1_experts_bias " : "", b1 ? b1->TypeString() : "",
                                  b2 ? ", fc2_experts_bias " : "", b2 ? b2->TypeString() : ""));
  }
  if (l.k < 1 || l.k > l.experts) {
    return ctx.Error(absl::StrCat("k ", l.k, " must be 1 to the ", l.experts, " experts"));
  }
  return q;
}

absl::Status QMoE(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const QMoeLayout q, ReadQMoeLayout(ctx));
  if (ctx.input(0).dtype() != ir::DType::kF32) {
    return ctx.Error("the CPU kernel takes float32 only");
  }
  const math::MoeLayout& l = q.moe;
  // Expert e's product with FC `fc` ([rows, cols] weights as `codes` and `scales`).
  auto product = [](const math::MoeQuant& fc, const Tensor& codes, const Tensor& scales,
                    int64_t rows, int64_t cols) {
    const int64_t row_bytes = fc.row_bytes(cols), row_scales = fc.row_scales(cols);
    const uint8_t* c = codes.data<uint8_t>();
    const float* s = scales.data<float>();
    ExpertProduct p;
    // An item's dequantized columns stay in the core's cache (MatMulNBits' tiles).
    p.max_columns = std::max<int64_t>(16, kExpertTileWeights / std::max<int64_t>(cols, 1));
    if (fc.bits == 4 && fc.block % 32 == 0 && cols % fc.block == 0) {
      // The usual int4 layout: the input rows rearranged once into each block's even and
      // odd values, the order of the codes' low and high nibbles.
      const int64_t block = fc.block, half = fc.block / 2;
      p.arrange = [cols, block](const float* in, int64_t n, float* out) {
        EvenOddPairs(in, n, cols, block, out);
      };
      p.run = [=](int64_t e, const float* in, int64_t n, int64_t first, int64_t last, float* out,
                  int64_t ld, AlignedVector<float>* scratch) {
        const uint8_t* ce = c + (e * rows + first) * row_bytes;
        const float* se = s + (e * rows + first) * row_scales;
        // A decode step's few tokens straight from the codes (MatMulNBits' decode path).
        if (n <= kInt4DirectRows) {
          Int4ColumnsDot(ce, se, nullptr, nullptr, 0, last - first, row_scales, half, in, cols, n,
                         out + first, ld);
          return;
        }
        // A tile of the item's columns dequantized once (in the order of the input's
        // pairs) and every token multiplied by it in registers, kDotRows a pass.
        scratch->resize(static_cast<size_t>((last - first) * cols));
        Int4DequantizeColumns(ce, row_bytes, se, nullptr, nullptr, 0, row_scales, half,
                              last - first, scratch->data(), cols);
        for (int64_t r0 = 0; r0 < n; r0 += kDotRows) {
          RowColumnDots(in + r0 * cols, cols, std::min(kDotRows, n - r0), scratch->data(), cols,
                        last - first, cols, out + r0 * ld + first, ld);
        }
      };
      return p;
    }
    // 8-bit codes in blocks: the input rows rounded to int8 per block first (onnxruntime's
    // CPU: math::MoeInt8Activations).
    if (math::MoeInt8Activations(fc)) {
      const int64_t block = fc.block;
      p.arrange = [cols, block](const float* in, int64_t n, float* out) {
        Int8RoundRows(in, n, cols, block, out);
      };
    }
    // Otherwise (8 bits, per-row scales of other widths) the item's rows dequantized and
    // multiplied by one GEMM.
    p.run = [=](int64_t e, const float* in, int64_t n, int64_t first, int64_t last, float* out,
                int64_t ld, AlignedVector<float>* scratch) {
      scratch->resize(static_cast<size_t>((last - first) * cols));
      for (int64_t j = first; j < last; ++j) {
        DequantizeRow(fc, c + (e * rows + j) * row_bytes, s + (e * rows + j) * row_scales, cols,
                      scratch->data() + (j - first) * cols);
      }
      Gemm2D<float>(false, true, n, last - first, cols, 1.0f, in, cols, scratch->data(), cols, 0.0f,
                    out + first, ld);
    };
    return p;
  };
  return RunMoe(ctx, l, product(q.fc1, ctx.input(2), ctx.input(3), l.fc1_rows(), l.hidden),
                ctx.optional_input(4) ? ctx.optional_input(4)->data<float>() : nullptr,
                product(q.fc2, ctx.input(5), ctx.input(6), l.hidden, l.inter),
                ctx.optional_input(7) ? ctx.optional_input(7)->data<float>() : nullptr);
}

}  // namespace tpc::runtime::cpu
