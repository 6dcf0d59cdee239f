// onnxruntime's MoE (mixture of experts) on the CPU: each token routed to its top k
// experts (math/moe.h), the tokens of each expert gathered and run through its FC1, the
// activation and its FC2 as two GEMMs, then each token's k results summed with its
// routing weights in a fixed order (the same sums whatever the threads).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels.h"
#include "tpc/runtime/math/moe.h"

namespace tpc::runtime::cpu {

// MoE(input [tokens, H] or [B, S, H], router_probs [tokens, E] (logits: the kernel takes
// their softmax), fc1_experts_weights [E, F·I, H], fc1_experts_bias [E, F·I],
// fc2_experts_weights [E, H, I], fc2_experts_bias [E, H]) -> [input's shape]; F = 2 for
// SwiGLU (gate and linear rows interleaved, swiglu_fusion = 1), else 1. What onnxruntime's
// CPU refuses is refused here too: FC3 (inputs 6, 7), SwiGLU not interleaved.
absl::Status ReadMoeAttributes(const KernelContext& ctx, math::MoeLayout* l) {
  const ir::Node& node = ctx.node();
  const std::string act = node.attr_string("activation_type", "relu");
  if (act == "relu") {
    l->activation = math::MoeActivation::kRelu;
  } else if (act == "gelu") {
    l->activation = math::MoeActivation::kGelu;
  } else if (act == "silu") {
    l->activation = math::MoeActivation::kSilu;
  } else if (act == "identity") {
    l->activation = math::MoeActivation::kIdentity;
  } else if (act == "swiglu") {
    l->activation = math::MoeActivation::kSwiGlu;
    if (node.attr_int("swiglu_fusion", 0) != 1) {
      return ctx.Error(absl::StrCat("swiglu_fusion ", node.attr_int("swiglu_fusion", 0),
                                    " is not supported (only 1: gate and linear interleaved)"));
    }
  } else {
    return ctx.Error(absl::StrCat("activation_type '", act,
                                  "' is not supported (relu, gelu, silu, identity, swiglu)"));
  }
  l->alpha = node.attr_float("activation_alpha", 1.0f);
  l->beta = node.attr_float("activation_beta", 0.0f);
  l->has_limit = node.has_attr("swiglu_limit");
  l->limit = node.attr_float("swiglu_limit", 0.0f);
  l->normalize = node.attr_int("normalize_routing_weights", 0) != 0;
  l->k = node.attr_int("k", 1);
  return absl::OkStatus();
}

absl::StatusOr<math::MoeLayout> ReadMoeLayout(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& router = ctx.input(1);
  const Tensor& w1 = ctx.input(2);
  const Tensor& w2 = ctx.input(4);
  const Tensor* b1 = ctx.optional_input(3);
  const Tensor* b2 = ctx.optional_input(5);
  if (ctx.optional_input(6) != nullptr || ctx.optional_input(7) != nullptr) {
    return ctx.Error("FC3 (fc3_experts_weights, fc3_experts_bias) is not supported");
  }
  math::MoeLayout l;
  TPC_RETURN_IF_ERROR(ReadMoeAttributes(ctx, &l));
  if (x.rank() < 2 || w1.rank() != 3 || w2.rank() != 3) {
    return ctx.Error(absl::StrCat("input ", x.TypeString(), ", fc1_experts_weights ",
                                  w1.TypeString(), " and fc2_experts_weights ", w2.TypeString(),
                                  " must be [tokens, H] or [B, S, H], [E, F·I, H] and [E, H, I]"));
  }
  l.hidden = x.dim(x.rank() - 1);
  l.tokens = l.hidden > 0 ? x.num_elements() / l.hidden : 0;
  l.experts = w1.dim(0);
  l.inter = w2.dim(2);
  const ir::DType t = x.dtype();
  const bool typed = (t == ir::DType::kF32 || t == ir::DType::kF16 || t == ir::DType::kBF16) &&
                     router.dtype() == t && w1.dtype() == t && w2.dtype() == t &&
                     (b1 == nullptr || b1->dtype() == t) && (b2 == nullptr || b2->dtype() == t);
  if (!typed) return ctx.Error("the operands must be of one float type (f32, f16 or bf16)");
  if (w1.shape() != Shape{l.experts, l.fc1_rows(), l.hidden} ||
      w2.shape() != Shape{l.experts, l.hidden, l.inter} ||
      (b1 != nullptr && b1->shape() != Shape{l.experts, l.fc1_rows()}) ||
      (b2 != nullptr && b2->shape() != Shape{l.experts, l.hidden}) ||
      router.shape() != Shape{l.tokens, l.experts}) {
    return ctx.Error(
        absl::StrCat("the operands do not fit ", l.tokens, " tokens of ", l.hidden, ", ", l.experts,
                     " experts of inner size ", l.inter, ": router_probs ", router.TypeString(),
                     ", fc1_experts_weights ", w1.TypeString(), b1 ? ", fc1_experts_bias " : "",
                     b1 ? b1->TypeString() : "", ", fc2_experts_weights ", w2.TypeString(),
                     b2 ? ", fc2_experts_bias " : "", b2 ? b2->TypeString() : ""));
  }
  if (l.k < 1 || l.k > l.experts) {
    return ctx.Error(absl::StrCat("k ", l.k, " must be 1 to the ", l.experts, " experts"));
  }
  return l;
}

absl::Status MoE(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::MoeLayout l, ReadMoeLayout(ctx));
  if (ctx.input(0).dtype() != ir::DType::kF32) {
    return ctx.Error("the CPU kernel takes float32 only");
  }
  const float* w1 = ctx.input(2).data<float>();
  const float* w2 = ctx.input(4).data<float>();
  const int64_t rows = l.fc1_rows(), h = l.hidden, inter = l.inter;
  auto product = [](const float* w, int64_t rows, int64_t cols) {
    return [w, rows, cols](int64_t e, const float* in, int64_t n, float* out, std::vector<float>*) {
      Gemm2D<float>(false, true, n, rows, cols, 1.0f, in, cols, w + e * rows * cols, cols, 1.0f,
                    out, rows);
    };
  };
  return RunMoe(ctx, l, product(w1, rows, h),
                ctx.optional_input(3) ? ctx.optional_input(3)->data<float>() : nullptr,
                product(w2, h, inter),
                ctx.optional_input(5) ? ctx.optional_input(5)->data<float>() : nullptr);
}

absl::Status RunMoe(KernelContext& ctx, const math::MoeLayout& l, const ExpertProduct& fc1,
                    const float* b1, const ExpertProduct& fc2, const float* b2) {
  const Tensor& x = ctx.input(0);
  const float* router = ctx.input(1).data<float>();
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kF32));
  const int64_t tokens = l.tokens, k = l.k, h = l.hidden, inter = l.inter, rows = l.fc1_rows();
  // The routing: token t's j-th expert and weight at t · k + j.
  std::vector<int64_t> experts(static_cast<size_t>(tokens * k));
  std::vector<float> weights(experts.size());
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = router + t * l.experts;
    math::MoeRoute(
        l, [&](int64_t e) { return row[e]; }, experts.data() + t * k, weights.data() + t * k);
  }
  // Each expert's slots (t · k + j), in token order.
  std::vector<std::vector<int64_t>> slots(static_cast<size_t>(l.experts));
  for (int64_t s = 0; s < tokens * k; ++s) {
    slots[static_cast<size_t>(experts.data()[s])].push_back(s);
  }
  // Each slot's FC2 output (bias included), before its weight.
  std::vector<float> results(static_cast<size_t>(tokens * k * h));
  ctx.pool().ParallelFor(l.experts, 1, [&](int64_t first, int64_t last) {
    // The expert's token rows, FC1's output, the activation, FC2's output, and its
    // weights when they are dequantized.
    std::vector<float> in, fc1_out, act, fc2_out, scratch;
    for (int64_t e = first; e < last; ++e) {
      const std::vector<int64_t>& mine = slots[static_cast<size_t>(e)];
      const int64_t n = static_cast<int64_t>(mine.size());
      if (n == 0) continue;
      in.resize(static_cast<size_t>(n * h));
      for (int64_t i = 0; i < n; ++i) {
        const float* src = x.data<float>() + (mine[static_cast<size_t>(i)] / k) * h;
        std::copy_n(src, h, in.data() + i * h);
      }
      fc1_out.resize(static_cast<size_t>(n * rows));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < rows; ++c) {
          fc1_out.data()[i * rows + c] = b1 ? b1[e * rows + c] : 0.0f;
        }
      }
      fc1(e, in.data(), n, fc1_out.data(), &scratch);
      act.resize(static_cast<size_t>(n * inter));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < inter; ++c) {
          act.data()[i * inter + c] = math::MoeActivate(l, fc1_out.data() + i * rows, c);
        }
      }
      fc2_out.resize(static_cast<size_t>(n * h));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < h; ++c) fc2_out.data()[i * h + c] = b2 ? b2[e * h + c] : 0.0f;
      }
      fc2(e, act.data(), n, fc2_out.data(), &scratch);
      for (int64_t i = 0; i < n; ++i) {
        std::copy_n(fc2_out.data() + i * h, h, results.data() + mine[static_cast<size_t>(i)] * h);
      }
    }
  });
  float* out = y->data<float>();
  ctx.pool().ParallelFor(tokens, 16, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      for (int64_t c = 0; c < h; ++c) {
        out[t * h + c] = math::MoeCombine(l, weights.data(), results.data(), t, c);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
