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
  auto product = [](const float* w, int64_t rows, int64_t cols) {
    ExpertProduct p;
    p.run = [w, rows, cols](int64_t e, const float* in, int64_t n, int64_t first, int64_t last,
                            float* out, int64_t ld, AlignedVector<float>*) {
      Gemm2D<float>(false, true, n, last - first, cols, 1.0f, in, cols,
                    w + (e * rows + first) * cols, cols, 0.0f, out + first, ld);
    };
    p.columns = std::max<int64_t>(16, kExpertItemWeights / std::max<int64_t>(cols, 1));
    return p;
  };
  return RunMoe(ctx, l, product(ctx.input(2).data<float>(), l.fc1_rows(), l.hidden),
                ctx.optional_input(3) ? ctx.optional_input(3)->data<float>() : nullptr,
                product(ctx.input(4).data<float>(), l.hidden, l.inter),
                ctx.optional_input(5) ? ctx.optional_input(5)->data<float>() : nullptr);
}

namespace {

// Floats of a pass's largest buffer ([tokens · k, max(hidden, FC1's rows)], 64 MiB): a
// long prompt goes through in passes of tokens.
constexpr int64_t kPassFloats = int64_t{16} << 20;

// The slots of a pass (t · k + j: token t's j-th expert) grouped by expert, in token order
// within each: expert e's rows are [begin[e], begin[e + 1]) of the grouped buffers.
struct Grouping {
  std::vector<int64_t> begin;   // [experts + 1]
  std::vector<int64_t> slot;    // row -> slot
  std::vector<int64_t> expert;  // row -> expert
};

Grouping GroupSlots(const std::vector<int64_t>& experts, int64_t num_experts) {
  Grouping g;
  g.begin.assign(static_cast<size_t>(num_experts + 1), 0);
  for (const int64_t e : experts) ++g.begin[static_cast<size_t>(e + 1)];
  for (size_t e = 0; e < static_cast<size_t>(num_experts); ++e) g.begin[e + 1] += g.begin[e];
  std::vector<int64_t> next(g.begin.begin(), g.begin.end() - 1);
  g.slot.resize(experts.size());
  g.expert.resize(experts.size());
  for (size_t s = 0; s < experts.size(); ++s) {
    const int64_t row = next[static_cast<size_t>(experts[s])]++;
    g.slot[static_cast<size_t>(row)] = static_cast<int64_t>(s);
    g.expert[static_cast<size_t>(row)] = experts[s];
  }
  return g;
}

// out [rows of g, width] = fc's product of `in` (grouped rows) for every expert, as items
// of (expert, fc.columns output columns) spread over the threads.
void RunProduct(ThreadPool& pool, const ExpertProduct& fc, const Grouping& g, const float* in,
                int64_t cols, int64_t width, float* out, AlignedVector<float>* arranged) {
  if (fc.arrange) {
    const int64_t n = g.begin.back();
    arranged->resize(static_cast<size_t>(n * cols));
    pool.ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
                     [&](int64_t lo, int64_t hi) {
                       fc.arrange(in + lo * cols, hi - lo, arranged->data() + lo * cols);
                     });
    in = arranged->data();
  }
  struct Item {
    int64_t expert, first, last;
  };
  std::vector<Item> items;
  for (int64_t e = 0; e + 1 < static_cast<int64_t>(g.begin.size()); ++e) {
    if (g.begin[static_cast<size_t>(e + 1)] == g.begin[static_cast<size_t>(e)]) continue;
    for (int64_t c = 0; c < width; c += fc.columns) {
      items.push_back({e, c, std::min(width, c + fc.columns)});
    }
  }
  pool.ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t lo, int64_t hi) {
    AlignedVector<float> scratch;
    for (int64_t i = lo; i < hi; ++i) {
      const Item& it = items[static_cast<size_t>(i)];
      const int64_t row = g.begin[static_cast<size_t>(it.expert)];
      const int64_t n = g.begin[static_cast<size_t>(it.expert + 1)] - row;
      fc.run(it.expert, in + row * cols, n, it.first, it.last, out + row * width, width, &scratch);
    }
  });
}

}  // namespace

absl::Status RunMoe(KernelContext& ctx, const math::MoeLayout& l, const ExpertProduct& fc1,
                    const float* b1, const ExpertProduct& fc2, const float* b2) {
  const Tensor& x = ctx.input(0);
  const float* router = ctx.input(1).data<float>();
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kF32));
  const int64_t k = l.k, h = l.hidden, inter = l.inter, rows = l.fc1_rows();
  ThreadPool& pool = ctx.pool();
  const int64_t pass = std::max<int64_t>(1, kPassFloats / (k * std::max({h, rows, int64_t{1}})));
  // A pass's buffers: the routing, its slots' inputs, FC1's outputs, the activations, FC2's
  // outputs (grouped by expert), and FC2's outputs in slot order, biases added.
  std::vector<int64_t> experts;
  std::vector<float> weights;
  std::vector<float> in, fc1_out, act, fc2_out, results;
  AlignedVector<float> arranged;
  for (int64_t t0 = 0; t0 < l.tokens; t0 += pass) {
    const int64_t tokens = std::min(pass, l.tokens - t0), slots = tokens * k;
    experts.resize(static_cast<size_t>(slots));
    weights.resize(static_cast<size_t>(slots));
    for (int64_t t = 0; t < tokens; ++t) {
      const float* row = router + (t0 + t) * l.experts;
      math::MoeRoute(
          l, [&](int64_t e) { return row[e]; }, experts.data() + t * k, weights.data() + t * k);
    }
    const Grouping g = GroupSlots(experts, l.experts);
    in.resize(static_cast<size_t>(slots * h));
    pool.ParallelFor(slots, std::max<int64_t>(1, 4096 / std::max<int64_t>(h, 1)),
                     [&](int64_t lo, int64_t hi) {
                       for (int64_t r = lo; r < hi; ++r) {
                         const int64_t t = t0 + g.slot[static_cast<size_t>(r)] / k;
                         std::copy_n(x.data<float>() + t * h, h, in.data() + r * h);
                       }
                     });
    fc1_out.resize(static_cast<size_t>(slots * rows));
    RunProduct(pool, fc1, g, in.data(), h, rows, fc1_out.data(), &arranged);
    act.resize(static_cast<size_t>(slots * inter));
    pool.ParallelFor(slots, std::max<int64_t>(1, 4096 / std::max<int64_t>(rows, 1)),
                     [&](int64_t lo, int64_t hi) {
                       for (int64_t r = lo; r < hi; ++r) {
                         float* f = fc1_out.data() + r * rows;
                         if (b1 != nullptr) {
                           const float* b = b1 + g.expert[static_cast<size_t>(r)] * rows;
                           for (int64_t c = 0; c < rows; ++c) f[c] += b[c];
                         }
                         for (int64_t c = 0; c < inter; ++c) {
                           act.data()[r * inter + c] = math::MoeActivate(l, f, c);
                         }
                       }
                     });
    fc2_out.resize(static_cast<size_t>(slots * h));
    RunProduct(pool, fc2, g, act.data(), inter, h, fc2_out.data(), &arranged);
    results.resize(static_cast<size_t>(slots * h));
    pool.ParallelFor(
        slots, std::max<int64_t>(1, 4096 / std::max<int64_t>(h, 1)), [&](int64_t lo, int64_t hi) {
          for (int64_t r = lo; r < hi; ++r) {
            const float* f = fc2_out.data() + r * h;
            const float* b = b2 != nullptr ? b2 + g.expert[static_cast<size_t>(r)] * h : nullptr;
            float* dst = results.data() + g.slot[static_cast<size_t>(r)] * h;
            for (int64_t c = 0; c < h; ++c) dst[c] = f[c] + (b ? b[c] : 0.0f);
          }
        });
    float* out = y->data<float>() + t0 * h;
    pool.ParallelFor(tokens, 16, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        for (int64_t c = 0; c < h; ++c) {
          out[t * h + c] = math::MoeCombine(l, weights.data(), results.data(), t, c);
        }
      }
    });
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
