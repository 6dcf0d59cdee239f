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
// SwiGLU and GeGLU (gate and linear rows interleaved, swiglu_fusion = 1), else 1. What
// onnxruntime's CPU refuses is refused here too: FC3 (inputs 6, 7), SwiGLU not
// interleaved. GeGLU (Gemma 4's experts, as onnxruntime-genai's builder writes them) only
// onnxruntime's CUDA kernel has: gelu_tanh(gate) · linear.
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
  } else if (act == "swiglu" || act == "geglu") {
    l->activation = act == "swiglu" ? math::MoeActivation::kSwiGlu : math::MoeActivation::kGeGlu;
    if (node.attr_int("swiglu_fusion", 0) != 1) {
      return ctx.Error(absl::StrCat("swiglu_fusion ", node.attr_int("swiglu_fusion", 0),
                                    " is not supported (only 1: gate and linear interleaved)"));
    }
  } else {
    return ctx.Error(
        absl::StrCat("activation_type '", act,
                     "' is not supported (relu, gelu, silu, identity, swiglu, geglu)"));
  }
  l->alpha = node.attr_float("activation_alpha", 1.0f);
  l->beta = node.attr_float("activation_beta", 0.0f);
  l->has_limit = node.has_attr("swiglu_limit");
  l->limit = node.attr_float("swiglu_limit", 0.0f);
  // GeGLU takes none of SwiGLU's parameters: other values would be ignored.
  if (l->activation == math::MoeActivation::kGeGlu &&
      (l->alpha != 1.0f || l->beta != 0.0f || l->has_limit)) {
    return ctx.Error(absl::StrCat("geglu with activation_alpha ", l->alpha, ", activation_beta ",
                                  l->beta, l->has_limit ? " and a swiglu_limit" : "",
                                  " is not supported (1, 0 and no limit)"));
  }
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
      // An expert's 4 to kDotRows tokens (one pass) multiply its weight rows in registers
      // (RowColumnDots: no packing); 1 to 3 keep the BLAS's GEMV, more its GEMM, whose
      // packing of the expert's weight then pays. The bench layer (16 experts, hidden
      // 512), 128 tokens (about 32 an expert), 1 and 2 threads: 16.5 -> 14.2 and 8.8 ->
      // 7.3 ms; 512 tokens (128 an expert) in passes of kDotRows: 26.3 against 23.2 ms
      // at 2 threads.
      if (n >= 4 && n <= kDotRows && cols % 16 == 0) {
        RowColumnDots(in, cols, n, w + (e * rows + first) * cols, cols, last - first, cols,
                      out + first, ld);
        return;
      }
      Gemm2D<float>(false, true, n, last - first, cols, 1.0f, in, cols,
                    w + (e * rows + first) * cols, cols, 0.0f, out + first, ld);
    };
    return p;
  };
  return RunMoe(ctx, l, product(ctx.input(2).data<float>(), l.fc1_rows(), l.hidden),
                ctx.optional_input(3) ? ctx.optional_input(3)->data<float>() : nullptr,
                product(ctx.input(4).data<float>(), l.hidden, l.inter),
                ctx.optional_input(5) ? ctx.optional_input(5)->data<float>() : nullptr);
}

namespace {

// Floats of a pass's results ([tokens · k, hidden], 64 MiB): a long prompt goes through in
// passes of tokens.
constexpr int64_t kPassFloats = int64_t{16} << 20;
// Floats of a group's largest buffer ([rows, max(hidden, FC1's rows)], 8 MiB): the experts
// of a pass go through in groups of about that many rows, each expert's in one group (its
// weights read once a pass). The bench layer's 512 tokens make one group: in two (4 MiB),
// 2 threads took 8% longer.
constexpr int64_t kGroupFloats = int64_t{2} << 20;
// Items of a group's FC (RunProduct), whatever the threads: the same items, so the same
// sums, on any number of threads. (Not whatever the batch: a QMoE expert with up to 3
// tokens reads its codes directly, with more it takes the tiles, and a group's size sets
// the f32 GEMMs' shapes, so a token's last bits may depend on the tokens beside it.)
constexpr int64_t kMoeItems = 16;

// RunMoe's buffers, kept by the thread between calls while they hold at most kKeptFloats
// (32 MiB: a decode step's, a prompt's of several hundred tokens), so that each call does
// not fault in fresh pages (the bench layer, 512 tokens, one thread: 5000 page faults and
// 13 ms of 58 while they were fresh); a longer prompt's are freed after it.
struct MoeBuffers {
  // On cache lines: RowColumnDots and the int4 loops read the rows in 16-float vectors.
  AlignedVector<float> in, fc1_out, act, results, arranged;
  size_t floats() const {
    return in.capacity() + fc1_out.capacity() + act.capacity() + results.capacity() +
           arranged.capacity();
  }
};
constexpr size_t kKeptFloats = size_t{8} << 20;
thread_local MoeBuffers tls_moe_buffers;

// The slots of a pass (t · k + j: token t's j-th expert) grouped by expert, in token order
// within each: expert e's rows are [begin[e], begin[e + 1]).
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

// out [rows, width] = fc's product of `in` [rows, cols] for experts [e0, e1) of g, whose
// rows start at g.begin[e0] (row 0 of in and out), as items of (expert, a share of the
// output columns) spread over the threads: about kMoeItems in all (each expert at least
// one, and at most fc.max_columns columns an item), each expert's share that of its rows.
void RunProduct(ThreadPool& pool, const ExpertProduct& fc, const Grouping& g, int64_t e0,
                int64_t e1, const float* in, int64_t cols, int64_t width, float* out,
                AlignedVector<float>* arranged) {
  const int64_t base = g.begin[static_cast<size_t>(e0)];
  const int64_t rows = g.begin[static_cast<size_t>(e1)] - base;
  if (fc.arrange) {
    arranged->resize(static_cast<size_t>(rows * cols));
    pool.ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
                     [&](int64_t lo, int64_t hi) {
                       fc.arrange(in + lo * cols, hi - lo, arranged->data() + lo * cols);
                     });
    in = arranged->data();
  }
  struct Item {
    int64_t expert, first, last;
  };
  std::vector<Item> items;
  for (int64_t e = e0; e < e1; ++e) {
    const int64_t n = g.begin[static_cast<size_t>(e + 1)] - g.begin[static_cast<size_t>(e)];
    if (n == 0) continue;
    // The expert's share of the items, in columns rounded up to 16.
    const int64_t shares = std::max<int64_t>(1, (kMoeItems * n + rows - 1) / rows);
    int64_t columns = ((width + shares - 1) / shares + 15) / 16 * 16;
    if (fc.max_columns > 0) columns = std::min(columns, fc.max_columns);
    columns = std::max<int64_t>(columns, 1);
    for (int64_t c = 0; c < width; c += columns) {
      items.push_back({e, c, std::min(width, c + columns)});
    }
  }
  pool.ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t lo, int64_t hi) {
    AlignedVector<float> scratch;
    for (int64_t i = lo; i < hi; ++i) {
      const Item& it = items[static_cast<size_t>(i)];
      const int64_t row = g.begin[static_cast<size_t>(it.expert)] - base;
      const int64_t n = g.begin[static_cast<size_t>(it.expert + 1)] - base - row;
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
  const int64_t pass = std::max<int64_t>(1, kPassFloats / (k * std::max<int64_t>(h, 1)));
  const int64_t group_rows = std::max<int64_t>(1, kGroupFloats / std::max({h, rows, int64_t{1}}));
  // A pass's routing and its FC2 outputs in slot order, biases added; a group's slots'
  // inputs, FC1's outputs, the activations and FC2's outputs (grouped by expert).
  std::vector<int64_t> experts;
  std::vector<float> weights;
  MoeBuffers& b = tls_moe_buffers;
  AlignedVector<float>&in = b.in, &fc1_out = b.fc1_out, &act = b.act, &results = b.results;
  AlignedVector<float>& fc2_out = b.in;  // the slots' inputs are read by then
  AlignedVector<float>& arranged = b.arranged;
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
    results.resize(static_cast<size_t>(slots * h));
    for (int64_t e0 = 0, e1 = 1; e0 < l.experts; e0 = e1, e1 = e0 + 1) {
      // Experts [e0, e1): group_rows rows or fewer, or one expert with more.
      const int64_t r0 = g.begin[static_cast<size_t>(e0)];
      while (e1 < l.experts && g.begin[static_cast<size_t>(e1 + 1)] - r0 <= group_rows) ++e1;
      const int64_t n = g.begin[static_cast<size_t>(e1)] - r0;
      if (n == 0) continue;
      in.resize(static_cast<size_t>(n * h));
      pool.ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(h, 1)),
                       [&](int64_t lo, int64_t hi) {
                         for (int64_t r = lo; r < hi; ++r) {
                           const int64_t t = t0 + g.slot[static_cast<size_t>(r0 + r)] / k;
                           std::copy_n(x.data<float>() + t * h, h, in.data() + r * h);
                         }
                       });
      fc1_out.resize(static_cast<size_t>(n * rows));
      RunProduct(pool, fc1, g, e0, e1, in.data(), h, rows, fc1_out.data(), &arranged);
      act.resize(static_cast<size_t>(n * inter));
      pool.ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(rows, 1)),
                       [&](int64_t lo, int64_t hi) {
                         for (int64_t r = lo; r < hi; ++r) {
                           float* f = fc1_out.data() + r * rows;
                           if (b1 != nullptr) {
                             const float* bias = b1 + g.expert[static_cast<size_t>(r0 + r)] * rows;
                             for (int64_t c = 0; c < rows; ++c) f[c] += bias[c];
                           }
                           for (int64_t c = 0; c < inter; ++c) {
                             act.data()[r * inter + c] = math::MoeActivate(l, f, c);
                           }
                         }
                       });
      fc2_out.resize(static_cast<size_t>(n * h));
      RunProduct(pool, fc2, g, e0, e1, act.data(), inter, h, fc2_out.data(), &arranged);
      pool.ParallelFor(
          n, std::max<int64_t>(1, 4096 / std::max<int64_t>(h, 1)), [&](int64_t lo, int64_t hi) {
            for (int64_t r = lo; r < hi; ++r) {
              const float* f = fc2_out.data() + r * h;
              const float* bias =
                  b2 != nullptr ? b2 + g.expert[static_cast<size_t>(r0 + r)] * h : nullptr;
              float* dst = results.data() + g.slot[static_cast<size_t>(r0 + r)] * h;
              for (int64_t c = 0; c < h; ++c) dst[c] = f[c] + (bias ? bias[c] : 0.0f);
            }
          });
    }
    float* out = y->data<float>() + t0 * h;
    pool.ParallelFor(tokens, 16, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        for (int64_t c = 0; c < h; ++c) {
          out[t * h + c] = math::MoeCombine(l, weights.data(), results.data(), t, c);
        }
      }
    });
  }
  if (b.floats() > kKeptFloats) b = MoeBuffers{};
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
