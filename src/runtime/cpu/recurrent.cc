// The recurrent operators RNN, GRU and LSTM: one gate loop over time, per direction. The
// input projections of all steps are one GEMM (X * W^T + Wb); each step adds the hidden
// state's projection (H * R^T) and applies the cell's gate arithmetic. Tensors are read in
// layout 0 ([seq, batch, ...]); layout 1 ([batch, seq, ...]) is transposed on the way in and
// out. `sequence_lens` ends a batch entry early: its later outputs are zero and its final
// state is the one of its last step (a reverse pass starts at that step).
#include <algorithm>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

using math::CellKind;

// Whether the function takes alpha / beta, and their defaults (onnxruntime's).
bool MakeActivation(const std::string& name, math::Activation* out, bool* takes_alpha,
                    bool* takes_beta) {
  struct Known {
    const char* name;
    math::RecurrentAct kind;
    bool alpha, beta;
    float alpha_default, beta_default;
  };
  using A = math::RecurrentAct;
  static const Known kKnown[] = {
      {"Affine", A::kAffine, true, true, 1, 0},
      {"Elu", A::kElu, true, false, 1, 0},
      {"HardSigmoid", A::kHardSigmoid, true, true, 0.2f, 0.5f},
      {"LeakyRelu", A::kLeakyRelu, true, false, 0.01f, 0},
      {"Relu", A::kRelu, false, false, 0, 0},
      {"ScaledTanh", A::kScaledTanh, true, true, 1, 1},
      {"Sigmoid", A::kSigmoid, false, false, 0, 0},
      {"Softplus", A::kSoftplus, false, false, 0, 0},
      {"Softsign", A::kSoftsign, false, false, 0, 0},
      {"Tanh", A::kTanh, false, false, 0, 0},
      {"ThresholdedRelu", A::kThresholdedRelu, true, false, 1, 0},
  };
  for (const Known& k : kKnown) {
    if (name == k.name) {
      *out = {k.kind, k.alpha_default, k.beta_default};
      *takes_alpha = k.alpha;
      *takes_beta = k.beta;
      return true;
    }
  }
  return false;
}

template <typename V>
const V* AttrAs(const KernelContext& ctx, const std::string& name) {
  auto it = ctx.node().attrs().find(name);
  return it == ctx.node().attrs().end() ? nullptr : std::get_if<V>(&it->second);
}

// The cell's activations per direction (`per_dir` each): the attribute `activations` with
// `activation_alpha` / `activation_beta` consumed in order by the functions that take them,
// or the defaults.
absl::StatusOr<std::vector<math::Activation>> ReadActivations(const KernelContext& ctx,
                                                              CellKind cell, int64_t dirs) {
  const size_t per_dir = cell == CellKind::kRnn ? 1 : cell == CellKind::kGru ? 2 : 3;
  std::vector<std::string> names;
  if (const auto* given = AttrAs<std::vector<std::string>>(ctx, "activations")) {
    names = *given;
  } else {
    const std::vector<std::string> defaults =
        cell == CellKind::kRnn   ? std::vector<std::string>{"Tanh"}
        : cell == CellKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                 : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  // One direction's list serves both directions when only it is given.
  if (names.size() == per_dir && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_dir * static_cast<size_t>(dirs)) {
    return ctx.Error(absl::StrCat("'activations' has ", names.size(), " functions, expected ",
                                  per_dir * static_cast<size_t>(dirs)));
  }
  std::vector<float> alphas, betas;
  if (const auto* a = AttrAs<std::vector<float>>(ctx, "activation_alpha")) alphas = *a;
  if (const auto* b = AttrAs<std::vector<float>>(ctx, "activation_beta")) betas = *b;
  size_t next_alpha = 0, next_beta = 0;
  std::vector<math::Activation> out(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    bool takes_alpha = false, takes_beta = false;
    if (!MakeActivation(names[i], &out[i], &takes_alpha, &takes_beta)) {
      return ctx.Error(absl::StrCat("unknown activation function '", names[i], "'"));
    }
    if (takes_alpha && next_alpha < alphas.size()) out[i].alpha = alphas[next_alpha++];
    if (takes_beta && next_beta < betas.size()) out[i].beta = betas[next_beta++];
  }
  return out;
}

// Swaps the first two dims of a [a, b, inner] block (layout 1 <-> layout 0).
template <typename T>
void SwapOuter(const T* src, T* dst, int64_t a, int64_t b, int64_t inner) {
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::copy(src + (i * b + j) * inner, src + (i * b + j + 1) * inner,
                dst + (j * a + i) * inner);
    }
  }
}

}  // namespace

absl::StatusOr<RecurrentShape> ReadRecurrent(const KernelContext& ctx, math::CellKind cell) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3) {
    return ctx.Error("X, W and R must have rank 3");
  }
  RecurrentShape n;
  n.layout1 = node.attr_int("layout", 0) != 0;
  const int64_t gates = cell == CellKind::kRnn ? 1 : cell == CellKind::kGru ? 3 : 4;
  n.seq = x.dim(n.layout1 ? 1 : 0);
  n.batch = x.dim(n.layout1 ? 0 : 1);
  n.input = x.dim(2);
  n.hidden = node.attr_int("hidden_size", r.dim(2));
  n.dirs = w.dim(0);
  const std::string direction = node.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return ctx.Error(absl::StrCat("unknown direction '", direction, "'"));
  }
  n.reverse = direction == "reverse";
  if (n.dirs != (direction == "bidirectional" ? 2 : 1)) {
    return ctx.Error(absl::StrCat("W has ", n.dirs, " directions for direction '", direction, "'"));
  }
  const int64_t gh = gates * n.hidden;
  if (w.shape() != Shape{n.dirs, gh, n.input} || r.shape() != Shape{n.dirs, gh, n.hidden}) {
    return ctx.Error(absl::StrCat("W ", w.TypeString(), " or R ", r.TypeString(),
                                  " does not match ", gates, " gates of hidden size ", n.hidden,
                                  " over an input of size ", n.input));
  }
  const Tensor* b = ctx.optional_input(3);
  if (b != nullptr && b->shape() != Shape{n.dirs, 2 * gh}) {
    return ctx.Error(absl::StrCat("B has shape ", ShapeString(b->shape()), ", expected ",
                                  ShapeString({n.dirs, 2 * gh})));
  }
  if (const Tensor* sl = ctx.optional_input(4); sl != nullptr && sl->num_elements() != n.batch) {
    return ctx.Error("sequence_lens must have one length per batch entry");
  }
  n.state_shape = n.layout1 ? Shape{n.batch, n.dirs, n.hidden} : Shape{n.dirs, n.batch, n.hidden};
  for (int i : {5, cell == CellKind::kLstm ? 6 : 5}) {
    const Tensor* t = ctx.optional_input(i);
    if (t != nullptr && t->shape() != n.state_shape) {
      return ctx.Error(absl::StrCat("input ", i, " has shape ", ShapeString(t->shape()),
                                    ", expected ", ShapeString(n.state_shape)));
    }
  }
  if (cell == CellKind::kLstm) {
    const Tensor* p = ctx.optional_input(7);
    if (p != nullptr && p->shape() != Shape{n.dirs, 3 * n.hidden}) {
      return ctx.Error("P must have shape [num_directions, 3 * hidden_size]");
    }
  }
  TPC_ASSIGN_OR_RETURN(std::vector<math::Activation> acts, ReadActivations(ctx, cell, n.dirs));
  for (int64_t d = 0; d < n.dirs; ++d) {
    math::CellParams c;
    c.cell = cell;
    c.hidden = n.hidden;
    // The direction's functions f, g (GRU, LSTM) and h (LSTM).
    const size_t a0 = acts.size() / static_cast<size_t>(n.dirs) * static_cast<size_t>(d);
    c.f = acts[a0];
    c.g = cell == CellKind::kRnn ? c.f : acts[a0 + 1];
    c.h = cell == CellKind::kLstm ? acts[a0 + 2] : c.f;
    c.has_clip = node.has_attr("clip");
    c.clip = node.attr_float("clip", 0);
    c.linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
    c.input_forget = node.attr_int("input_forget", 0) != 0;
    n.cells.push_back(c);
  }
  return n;
}

namespace {

template <typename T>
absl::Status RunRecurrent(KernelContext& ctx, CellKind cell) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  TPC_ASSIGN_OR_RETURN(const RecurrentShape n, ReadRecurrent(ctx, cell));
  const bool layout1 = n.layout1;
  const int64_t gh = n.cells[0].gates() * n.hidden;
  const Tensor* b = ctx.optional_input(3);
  std::vector<int64_t> lens(static_cast<size_t>(n.batch), n.seq);
  if (const Tensor* sl = ctx.optional_input(4)) {
    TPC_ASSIGN_OR_RETURN(lens, ReadInts(ctx, *sl));
    for (int64_t len : lens) {
      if (len < 0 || len > n.seq) return ctx.Error("a sequence length is out of range");
    }
  }
  // Initial states in layout 0: [dirs, batch, hidden].
  auto initial = [&](int i) -> std::vector<T> {
    std::vector<T> s(static_cast<size_t>(n.dirs * n.batch * n.hidden), T(0));
    const Tensor* t = ctx.optional_input(i);
    if (t == nullptr) return s;
    if (layout1) {
      SwapOuter(t->data<T>(), s.data(), n.batch, n.dirs, n.hidden);
    } else {
      std::copy(t->data<T>(), t->data<T>() + s.size(), s.begin());
    }
    return s;
  };
  std::vector<T> h_all = initial(5), c_all;
  const Tensor* p = nullptr;
  if (cell == CellKind::kLstm) {
    c_all = initial(6);
    p = ctx.optional_input(7);
  }

  // X in layout 0.
  std::vector<T> x0(static_cast<size_t>(x.num_elements()));
  if (layout1) {
    SwapOuter(x.data<T>(), x0.data(), n.batch, n.seq, n.input);
  } else {
    std::copy(x.data<T>(), x.data<T>() + x0.size(), x0.begin());
  }
  // Y in layout 0: [seq, dirs, batch, hidden], zero past each sequence's end.
  const int64_t hs = n.hidden;
  std::vector<T> y0(static_cast<size_t>(n.seq * n.dirs * n.batch * hs), T(0));

  const int64_t rows = n.seq * n.batch;
  std::vector<T> xw(static_cast<size_t>(rows * gh));
  std::vector<T> hr(static_cast<size_t>(n.batch * gh));
  std::vector<T> rh(static_cast<size_t>(hs));               // GRU: ((r (.) H) * Rh^T), one row
  std::vector<T> reset(static_cast<size_t>(hs));            // GRU: r (.) H, one row
  std::vector<T> h_new(static_cast<size_t>(n.batch * hs));  // a step's new hidden state

  for (int64_t d = 0; d < n.dirs; ++d) {
    const math::CellParams& cp = n.cells[static_cast<size_t>(d)];
    const bool reverse = n.reverse || d == 1;
    const T* wd = w.data<T>() + d * gh * n.input;
    const T* rd = r.data<T>() + d * gh * hs;
    const T* wb = b != nullptr ? b->data<T>() + d * 2 * gh : nullptr;
    const T* rb = wb != nullptr ? wb + gh : nullptr;
    const T* pd = p != nullptr ? p->data<T>() + d * 3 * hs : nullptr;
    T* h = h_all.data() + d * n.batch * hs;
    T* c = cell == CellKind::kLstm ? c_all.data() + d * n.batch * hs : nullptr;

    // XW = X * W^T (the biases are added per gate, math::GatePre).
    std::fill(xw.begin(), xw.end(), T(0));
    if (rows > 0 && n.input > 0) {
      ParallelGemm2D<T>(ctx.pool(), false, true, rows, gh, n.input, T(1), x0.data(), n.input, wd,
                        n.input, T(0), xw.data(), gh);
    }
    const bool gru_reset_first = cell == CellKind::kGru && !cp.linear_before_reset;
    for (int64_t s = 0; s < n.seq; ++s) {
      // HR = H * R^T (for GRU without linear_before_reset, only the z and r gates are used).
      std::fill(hr.begin(), hr.end(), T(0));
      if (n.batch > 0 && hs > 0) {
        Gemm2D<T>(false, true, n.batch, gh, hs, T(1), h, hs, rd, hs, T(0), hr.data(), gh);
      }
      for (int64_t bi = 0; bi < n.batch; ++bi) {
        const int64_t len = lens[static_cast<size_t>(bi)];
        if (s >= len) continue;
        const int64_t t = reverse ? len - 1 - s : s;
        const T* pre = xw.data() + (t * n.batch + bi) * gh;
        const T* hrow = hr.data() + bi * gh;
        const T* hb = h + bi * hs;
        if (gru_reset_first) {
          // (r (.) H) * Rh^T, one row.
          for (int64_t m = 0; m < hs; ++m)
            reset[static_cast<size_t>(m)] = math::GruReset(cp, pre, hrow, wb, rb, m) * hb[m];
          for (int64_t k = 0; k < hs; ++k) {
            T acc = T(0);
            for (int64_t m = 0; m < hs; ++m)
              acc += reset[static_cast<size_t>(m)] * rd[(2 * hs + k) * hs + m];
            rh[static_cast<size_t>(k)] = acc;
          }
        }
        T* hn = h_new.data() + bi * hs;
        for (int64_t k = 0; k < hs; ++k) {
          hn[k] = math::CellStep(cp, pre, hrow, wb, rb, hb[k], rh[static_cast<size_t>(k)],
                                 c != nullptr ? c + bi * hs + k : nullptr, pd, k);
        }
        std::copy(hn, hn + hs, y0.data() + ((t * n.dirs + d) * n.batch + bi) * hs);
      }
      for (int64_t bi = 0; bi < n.batch; ++bi) {
        if (s >= lens[static_cast<size_t>(bi)]) continue;
        std::copy(h_new.data() + bi * hs, h_new.data() + (bi + 1) * hs, h + bi * hs);
      }
    }
  }

  // Outputs: Y, Y_h and (LSTM) Y_c, in the node's layout.
  if (ctx.wants_output(0)) {
    const Shape shape =
        layout1 ? Shape{n.batch, n.seq, n.dirs, hs} : Shape{n.seq, n.dirs, n.batch, hs};
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape));
    if (layout1) {
      // [seq, dirs, batch, h] -> [batch, seq, dirs, h].
      for (int64_t t = 0; t < n.seq; ++t) {
        for (int64_t d = 0; d < n.dirs; ++d) {
          for (int64_t bi = 0; bi < n.batch; ++bi) {
            const T* src = y0.data() + ((t * n.dirs + d) * n.batch + bi) * hs;
            std::copy(src, src + hs, y->data<T>() + ((bi * n.seq + t) * n.dirs + d) * hs);
          }
        }
      }
    } else {
      std::copy(y0.begin(), y0.end(), y->data<T>());
    }
  }
  auto write_state = [&](int i, const std::vector<T>& state) -> absl::Status {
    if (!ctx.wants_output(i)) return absl::OkStatus();
    TPC_ASSIGN_OR_RETURN(Tensor * out, ctx.Output(i, n.state_shape));
    if (layout1) {
      SwapOuter(state.data(), out->data<T>(), n.dirs, n.batch, hs);
    } else {
      std::copy(state.begin(), state.end(), out->data<T>());
    }
    return absl::OkStatus();
  };
  TPC_RETURN_IF_ERROR(write_state(1, h_all));
  if (cell == CellKind::kLstm) TPC_RETURN_IF_ERROR(write_state(2, c_all));
  return absl::OkStatus();
}

absl::Status Recurrent(KernelContext& ctx, CellKind cell) {
  return VisitFloat(ctx, ctx.input(0).dtype(),
                    [&]<typename T>() { return RunRecurrent<T>(ctx, cell); });
}

}  // namespace

absl::Status GRU(KernelContext& ctx) { return Recurrent(ctx, CellKind::kGru); }
absl::Status LSTM(KernelContext& ctx) { return Recurrent(ctx, CellKind::kLstm); }
absl::Status RNN(KernelContext& ctx) { return Recurrent(ctx, CellKind::kRnn); }

}  // namespace tpc::runtime::cpu
