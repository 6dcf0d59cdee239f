// The fusion patterns (see tpc/runtime/fusion.h for the chains and what replaces them).
#include "patterns.h"

#include <cmath>
#include <cstring>

#include "tpc/util/half.h"

namespace tpc::runtime::fusion {
namespace {

bool IsCall(const ir::Node* n, const char* op_type) {
  return n != nullptr && n->is_call() && n->domain().empty() && n->op_type() == op_type;
}

bool IsConstant(const ir::Value* v) {
  return v != nullptr && v->producer()->kind() == ir::NodeKind::kConstant &&
         v->producer()->tensor().has_data();
}

// The value's rank; -1 when unknown.
int64_t RankOf(const ir::Value* v) {
  return v->type().shape ? static_cast<int64_t>(v->type().shape->size()) : -1;
}

// A float element type a chain may have: f32, or the f16/bf16 of a half-precision plan
// (the fused kernel then computes in f32 between its half inputs and output, as the
// chain's kernels do one by one).
bool IsFloatType(ir::DType t) {
  return t == ir::DType::kF32 || t == ir::DType::kF16 || t == ir::DType::kBF16;
}

// `v` holds elements of the chain's float type `t`.
bool Is(const ir::Value* v, ir::DType t) { return v != nullptr && v->type().dtype == t; }

// The value of a float `want` once stored as `t` (what a half-precision plan's
// constants hold).
float Rounded(float want, ir::DType t) {
  if (t == ir::DType::kF16) return HalfToFloat(FloatToHalf(want));
  if (t == ir::DType::kBF16) return BFloat16ToFloat(FloatToBFloat16(want));
  return want;
}

// The single node that reads `v` (one use), else null.
ir::Node* OnlyUser(const ir::Value* v) {
  return v->uses().size() == 1 ? v->uses()[0].user : nullptr;
}

// The value of a one-element float constant (f32, f16 or bf16).
std::optional<float> ScalarConstant(const ir::Value* v) {
  if (!IsConstant(v) || !IsFloatType(v->type().dtype)) return std::nullopt;
  const ir::Tensor& t = v->producer()->tensor();
  if (t.num_elements() != 1) return std::nullopt;
  if (t.dtype() == ir::DType::kF32) {
    float f;
    std::memcpy(&f, t.data(), sizeof(f));
    return f;
  }
  uint16_t h;
  std::memcpy(&h, t.data(), sizeof(h));
  return t.dtype() == ir::DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

// The int64 values of a constant, or of a shape computation that shape inference
// evaluated to numbers (Llama's rotate_half slices at Shape(x)[-1] / 2); else nothing.
std::optional<std::vector<int64_t>> IntsConstant(const ir::Value* v) {
  if (v == nullptr || v->type().dtype != ir::DType::kI64) return std::nullopt;
  if (!IsConstant(v)) {
    if (!v->known_value()) return std::nullopt;
    std::vector<int64_t> out;
    for (const ir::Dim& d : *v->known_value()) {
      if (!d.is_static()) return std::nullopt;
      out.push_back(d.value());
    }
    return out;
  }
  const ir::Tensor& t = v->producer()->tensor();
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  std::memcpy(out.data(), t.data(), out.size() * sizeof(int64_t));
  return out;
}

// The operand of a binary node other than `v` (v must be one of its two inputs, and not
// both).
ir::Value* OtherOperand(const ir::Node* n, const ir::Value* v) {
  if (n->num_inputs() != 2 || n->input(0) == n->input(1)) return nullptr;
  return n->input(0) == v ? n->input(1) : (n->input(1) == v ? n->input(0) : nullptr);
}

// The softmax's axis is the last one of its rank-`rank` input (from opset 13 any axis
// means itself; before, `axis` flattens into 2-D rows, the same only for the last axis).
bool SoftmaxOnLastAxis(const ir::Node* n, int64_t rank) {
  const int64_t axis = n->attr_int("axis", n->graph()->onnx_opset() >= 13 ? -1 : 1);
  return axis == -1 || axis == rank - 1;
}

// MatMul(x, W) with W a constant matrix of x's float type, then optionally + bias (a constant whose
// only non-1 dim is the last, W's columns), then optionally one activation.
std::optional<Match> MatchMatMulEpilogue(ir::Node* mm) {
  if (!IsCall(mm, "MatMul") || mm->num_inputs() != 2) return std::nullopt;
  ir::Value* x = mm->input(0);
  ir::Value* w = mm->input(1);
  const ir::DType t = x->type().dtype;
  if (!IsFloatType(t) || !Is(w, t) || !IsConstant(w) || RankOf(w) != 2 || RankOf(x) < 2) {
    return std::nullopt;
  }
  const int64_t n = w->producer()->tensor().shape()[1];
  Match m;
  m.op_type = "FusedMatMul";
  m.nodes = {mm};
  m.inputs = {x, w};
  std::string activation;
  ir::Value* y = mm->output();
  // + bias
  if (ir::Node* add = OnlyUser(y); IsCall(add, "Add")) {
    ir::Value* b = OtherOperand(add, y);
    if (b != nullptr && IsConstant(b) && Is(b, t)) {
      const auto& shape = b->producer()->tensor().shape();
      bool row = !shape.empty() && shape.back() == n && shape.size() <= 2;
      for (size_t d = 0; d + 1 < shape.size(); ++d) row = row && shape[d] == 1;
      if (row) {
        m.nodes.push_back(add);
        m.inputs.push_back(b);
        y = add->output();
      }
    }
  }
  // → activation
  if (ir::Node* act = OnlyUser(y); act != nullptr && act->is_call() && act->domain().empty()) {
    if (act->op_type() == "Gelu") {
      const std::string approximate = act->attr_string("approximate", "none");
      if (approximate == "none" || approximate == "tanh") {
        activation = approximate == "tanh" ? "GeluTanh" : "Gelu";
      }
    } else if (act->op_type() == "Relu" || act->op_type() == "Tanh") {
      activation = act->op_type();
    }
    if (!activation.empty()) {
      m.nodes.push_back(act);
      y = act->output();
    }
  } else if (y->uses().size() == 2) {
    // x · Sigmoid(x): SiLU (Llama's MLP gate), read in either order.
    ir::Node* sig = nullptr;
    ir::Node* mul = nullptr;
    for (const ir::Use& u : y->uses()) {
      if (IsCall(u.user, "Sigmoid")) sig = u.user;
      if (IsCall(u.user, "Mul")) mul = u.user;
    }
    if (sig != nullptr && mul != nullptr && OnlyUser(sig->output()) == mul &&
        OtherOperand(mul, y) == sig->output()) {
      activation = "SiLU";
      m.nodes.push_back(sig);
      m.nodes.push_back(mul);
      y = mul->output();
    }
  }
  // (A Cast to f32 after a half chain, a half-precision plan's logits, stays out: the
  // chain's result is rounded to half first, as a plan whose collective stands between
  // them computes it; the GEMM writing f32 itself differed from that by up to half an ulp.)
  if (m.nodes.size() == 1) return std::nullopt;  // a bare MatMul
  if (!activation.empty()) m.attrs["activation"] = activation;
  m.result = y;
  return m;
}

// The dims of a value's type when every one is known (static or symbolic); else nothing.
std::optional<std::vector<ir::Dim>> KnownDims(const ir::Value* v) {
  if (!v->type().shape) return std::nullopt;
  for (const ir::Dim& d : *v->type().shape) {
    if (d.is_unknown()) return std::nullopt;
  }
  return *v->type().shape;
}

// K or V repeated for groups of query heads, as torch exports Llama's repeat_kv:
// y = Reshape(Expand(Unsqueeze(x, [r - 2]), [.., h, n, t, d]), [.., h·n, t, d]) with x
// [.., h, t, d] of rank r: head j of y is head j / n of x. The dims are checked
// symbolically (batch and sequence dims stay symbols in a plan), so the chain is exactly
// the grouping whatever they are bound to at run time.
struct RepeatedHeads {
  ir::Value* x = nullptr;
  ir::Dim group;                 // n
  std::vector<ir::Node*> nodes;  // Unsqueeze, Expand, Reshape
};

// The chain's values are read only along it and y only by `consumer`, so the chain goes
// with the core (a repeat read elsewhere, or one value as both K and V, is left alone and
// the core fused without grouping).
std::optional<RepeatedHeads> MatchRepeatedHeads(ir::Value* y, const ir::Node* consumer) {
  ir::Node* reshape = y->producer();
  if (!IsCall(reshape, "Reshape") || OnlyUser(y) != consumer) return std::nullopt;
  ir::Node* expand = reshape->input(0)->producer();
  if (!IsCall(expand, "Expand") || OnlyUser(expand->output()) != reshape) return std::nullopt;
  ir::Node* unsqueeze = expand->input(0)->producer();
  if (!IsCall(unsqueeze, "Unsqueeze") || OnlyUser(unsqueeze->output()) != expand) {
    return std::nullopt;
  }
  ir::Value* x = unsqueeze->input(0);
  const auto xs = KnownDims(x);
  const auto es = KnownDims(expand->output());
  const auto ys = KnownDims(y);
  if (!xs || !es || !ys) return std::nullopt;
  const int64_t r = static_cast<int64_t>(xs->size());
  if (r < 3 || static_cast<int64_t>(es->size()) != r + 1 || static_cast<int64_t>(ys->size()) != r) {
    return std::nullopt;
  }
  std::vector<int64_t> axes = unsqueeze->attr_ints("axes");  // before opset 13
  if (unsqueeze->num_inputs() > 1) {
    const auto from_input = IntsConstant(unsqueeze->input(1));
    if (!from_input) return std::nullopt;
    axes = *from_input;
  }
  if (axes.size() != 1 || (axes[0] != r - 2 && axes[0] != -3)) return std::nullopt;
  const auto x_at = [&](int64_t i) { return (*xs)[static_cast<size_t>(i)]; };
  const auto e_at = [&](int64_t i) { return (*es)[static_cast<size_t>(i)]; };
  const auto y_at = [&](int64_t i) { return (*ys)[static_cast<size_t>(i)]; };
  const ir::Dim n = e_at(r - 2);
  for (int64_t i = 0; i < r; ++i) {  // x's dims stay in place around the new one
    if (e_at(i < r - 2 ? i : i + 1) != x_at(i)) return std::nullopt;
    if (i != r - 3 && y_at(i) != x_at(i)) return std::nullopt;
  }
  if (y_at(r - 3) != x_at(r - 3) * n) return std::nullopt;
  return RepeatedHeads{x, n, {unsqueeze, expand, reshape}};
}

// MatMul(Q, Kᵀ) [÷ or · scalar] [+ mask] → Softmax(last axis) → MatMul(·, V), with Kᵀ
// read through a Transpose of its last two axes when there is one.
std::optional<Match> MatchAttentionCore(ir::Node* qk) {
  if (!IsCall(qk, "MatMul") || qk->num_inputs() != 2) return std::nullopt;
  ir::Value* q = qk->input(0);
  ir::Value* kt = qk->input(1);
  const int64_t rank = RankOf(q);
  const ir::DType t = q->type().dtype;
  if (!IsFloatType(t) || !Is(kt, t) || rank < 2 || RankOf(kt) < 2 || IsConstant(kt)) {
    return std::nullopt;
  }
  Match m;
  m.op_type = "AttentionCore";
  ir::Value* k = kt;
  int64_t k_transposed = 1;  // the input is Kᵀ [.., d, t]
  ir::Node* transpose = kt->producer();
  if (IsCall(transpose, "Transpose") && OnlyUser(kt) == qk) {
    const auto perm = transpose->attr_ints("perm");
    const int64_t r = RankOf(kt);
    bool swap = static_cast<int64_t>(perm.size()) == r && r >= 2;
    for (int64_t d = 0; swap && d < r; ++d) {
      const int64_t want = d + 2 < r ? d : (d + 2 == r ? r - 1 : r - 2);
      swap = perm[static_cast<size_t>(d)] == want;
    }
    if (swap) {
      k = transpose->input(0);
      k_transposed = 0;  // the input is K [.., t, d]
      m.nodes.push_back(transpose);
    }
  }
  m.nodes.push_back(qk);
  ir::Value* s = qk->output();
  const int64_t scores_rank = RankOf(s);
  float scale = 1;
  int64_t divide = 0;
  ir::Node* next = OnlyUser(s);
  if (IsCall(next, "Div") || IsCall(next, "Mul")) {
    const bool div = next->op_type() == "Div";
    // Div takes the scale second; Mul either way.
    ir::Value* c = div ? (next->input(0) == s ? next->input(1) : nullptr) : OtherOperand(next, s);
    if (const auto v = c != nullptr ? ScalarConstant(c) : std::nullopt) {
      scale = *v;
      divide = div ? 1 : 0;
      m.nodes.push_back(next);
      s = next->output();
      next = OnlyUser(s);
    }
  }
  ir::Value* mask = nullptr;
  if (IsCall(next, "Add")) {
    mask = OtherOperand(next, s);
    if (mask == nullptr || !Is(mask, t) || RankOf(mask) > scores_rank) {
      return std::nullopt;
    }
    m.nodes.push_back(next);
    s = next->output();
    next = OnlyUser(s);
  }
  if (!IsCall(next, "Softmax") || !SoftmaxOnLastAxis(next, scores_rank) ||
      RankOf(s) != scores_rank) {
    return std::nullopt;
  }
  m.nodes.push_back(next);
  ir::Node* pv = OnlyUser(next->output());
  if (!IsCall(pv, "MatMul") || pv->input(0) != next->output() || pv->input(1) == next->output() ||
      !Is(pv->input(1), t) || RankOf(pv->input(1)) < 2) {
    return std::nullopt;
  }
  m.nodes.push_back(pv);
  ir::Value* v = pv->input(1);
  // K and V repeated for groups of query heads (GQA): the core reads each head of K and V
  // for its n query heads, and the repeats are never written. Q's head dim must be the
  // repeated one (not a 1 broadcasting over it).
  const auto rk = MatchRepeatedHeads(k, k_transposed == 0 ? transpose : qk);
  const auto rv = MatchRepeatedHeads(v, pv);
  const auto qs = KnownDims(q);
  const auto ks = KnownDims(k);
  const auto vs = KnownDims(v);
  const auto heads = [](const std::vector<ir::Dim>& dims) { return dims[dims.size() - 3]; };
  if (rk && rv && qs && ks && vs && rk->group == rv->group && qs->size() == ks->size() &&
      qs->size() == vs->size() && heads(*qs) == heads(*ks) && heads(*qs) == heads(*vs)) {
    m.nodes.insert(m.nodes.begin(), rv->nodes.begin(), rv->nodes.end());
    m.nodes.insert(m.nodes.begin(), rk->nodes.begin(), rk->nodes.end());
    k = rk->x;
    v = rv->x;
    m.attrs["kv_grouped"] = int64_t{1};
  }
  m.inputs = {q, k, v};
  if (mask != nullptr) m.inputs.push_back(mask);
  m.attrs["scale"] = scale;
  m.attrs["scale_divides"] = divide;
  m.attrs["k_transposed"] = k_transposed;
  m.result = pv->output();
  return m;
}

// x / Sqrt(ReduceMean(Pow(x, 2), last axis) + eps) · w, or x · (1 / Sqrt(..)) · w, as
// torch exports a Llama RMSNorm, with w a constant row: onnxruntime's
// SimplifiedLayerNormalization(x, w).
std::optional<Match> MatchRmsNorm(ir::Node* pow) {
  if (!IsCall(pow, "Pow") || pow->num_inputs() != 2) return std::nullopt;
  ir::Value* x = pow->input(0);
  const int64_t rank = RankOf(x);
  const auto two = ScalarConstant(pow->input(1));
  const ir::DType t = x->type().dtype;
  if (!IsFloatType(t) || rank < 1 || !two || *two != 2.0f) return std::nullopt;
  ir::Node* mean = OnlyUser(pow->output());
  if (!IsCall(mean, "ReduceMean") || mean->attr_int("keepdims", 1) != 1) return std::nullopt;
  std::vector<int64_t> axes = mean->attr_ints("axes");
  if (mean->num_inputs() > 1 && mean->input(1) != nullptr) {
    const auto from_input = IntsConstant(mean->input(1));
    if (!from_input) return std::nullopt;
    axes = *from_input;
  }
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != rank - 1)) return std::nullopt;
  ir::Node* add = OnlyUser(mean->output());
  if (!IsCall(add, "Add")) return std::nullopt;
  ir::Value* eps_value = OtherOperand(add, mean->output());
  if (eps_value == nullptr) return std::nullopt;
  const std::optional<float> eps_read = ScalarConstant(eps_value);
  ir::Node* sqrt = OnlyUser(add->output());
  if (!eps_read.has_value() || !IsCall(sqrt, "Sqrt")) return std::nullopt;
  const float eps = eps_read.value_or(0.0f);
  std::vector<ir::Node*> nodes = {pow, mean, add, sqrt};
  // x / rms, or x · (1 / rms) as torch exports `x * torch.rsqrt(..)`.
  ir::Node* div = OnlyUser(sqrt->output());
  ir::Value* normed = nullptr;
  if (IsCall(div, "Div") && div->input(0) == x && div->input(1) == sqrt->output()) {
    nodes.push_back(div);
    normed = div->output();
  } else if ((IsCall(div, "Div") && div->input(1) == sqrt->output() &&
              ScalarConstant(div->input(0)).value_or(0.0f) == 1.0f) ||
             IsCall(div, "Reciprocal")) {
    ir::Node* scale = OnlyUser(div->output());
    if (IsCall(scale, "Mul") && OtherOperand(scale, div->output()) == x) {
      nodes.push_back(div);
      nodes.push_back(scale);
      normed = scale->output();
    }
  }
  if (normed == nullptr) return std::nullopt;
  ir::Node* mul = OnlyUser(normed);
  if (!IsCall(mul, "Mul")) return std::nullopt;
  ir::Value* w = OtherOperand(mul, normed);
  if (w == nullptr || !IsConstant(w) || !Is(w, t)) return std::nullopt;
  const auto& ws = w->producer()->tensor().shape();
  const ir::Dim& hidden = x->type().shape->back();
  if (ws.size() != 1 || !hidden.is_static() || hidden.value() != ws[0]) return std::nullopt;
  Match m;
  m.domain = "com.microsoft";
  m.op_type = "SimplifiedLayerNormalization";
  nodes.push_back(mul);
  m.nodes = std::move(nodes);
  m.inputs = {x, w};
  m.attrs["axis"] = int64_t{-1};
  m.attrs["epsilon"] = eps;
  m.result = mul->output();
  return m;
}

// A constant near `want`, or `want` as a half-precision plan of `t` stores it.
bool IsNear(const ir::Value* v, float want, float tolerance, ir::DType t) {
  const auto f = v != nullptr ? ScalarConstant(v) : std::nullopt;
  return f.has_value() && (std::abs(*f - want) <= tolerance || *f == Rounded(want, t));
}

// GELU's common tail: v = 1 + f(x) (the chain so far in m) times 0.5·x, as
// (0.5·x)·v or x·v·0.5. Completes m as Gelu(x) with `approximate`, or fails.
std::optional<Match> GeluTail(Match m, ir::Value* x, ir::Value* v, const char* approximate) {
  const ir::DType t = x->type().dtype;
  ir::Node* last = v != nullptr ? OnlyUser(v) : nullptr;
  if (!IsCall(last, "Mul")) return std::nullopt;
  ir::Value* h = OtherOperand(last, v);
  ir::Node* half = h != nullptr ? h->producer() : nullptr;
  if (IsCall(half, "Mul") && OtherOperand(half, x) != nullptr &&
      IsNear(OtherOperand(half, x), 0.5f, 0, t) && OnlyUser(h) == last) {
    // (0.5·x)·(1 + f(x))
    m.nodes.insert(m.nodes.begin(), half);
    m.nodes.push_back(last);
    m.result = last->output();
  } else if (h == x) {
    // x·(1 + f(x))·0.5
    ir::Node* scale = OnlyUser(last->output());
    if (!IsCall(scale, "Mul") || !IsNear(OtherOperand(scale, last->output()), 0.5f, 0, t)) {
      return std::nullopt;
    }
    m.nodes.push_back(last);
    m.nodes.push_back(scale);
    m.result = scale->output();
  } else {
    return std::nullopt;
  }
  m.domain = "";
  m.op_type = "Gelu";
  m.inputs = {x};
  m.attrs["approximate"] = std::string(approximate);
  return m;
}

// The single reader of `in` if it is an `op_type` whose other operand passes `other`
// (then appended to m's chain): its output, else null.
template <typename Other>
ir::Value* Step(Match& m, ir::Value* in, const char* op_type, Other other) {
  ir::Node* n = in != nullptr ? OnlyUser(in) : nullptr;
  if (!IsCall(n, op_type) || !other(OtherOperand(n, in))) return nullptr;
  m.nodes.push_back(n);
  return n->output();
}

// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as GPT-2's NewGELU exports.
std::optional<Match> MatchGeluTanh(ir::Node* pow) {
  if (!IsCall(pow, "Pow") || pow->num_inputs() != 2) return std::nullopt;
  ir::Value* x = pow->input(0);
  const ir::DType t = x->type().dtype;
  if (!IsFloatType(t) || !IsNear(pow->input(1), 3.0f, 0, t)) return std::nullopt;
  Match m;
  m.nodes = {pow};
  ir::Value* v = Step(m, pow->output(), "Mul",
                      [&](const ir::Value* c) { return IsNear(c, 0.044715f, 1e-6f, t); });
  v = Step(m, v, "Add", [&](const ir::Value* c) { return c == x; });
  v = Step(m, v, "Mul", [&](const ir::Value* c) { return IsNear(c, 0.7978845608f, 1e-5f, t); });
  ir::Node* tanh = v != nullptr ? OnlyUser(v) : nullptr;
  if (!IsCall(tanh, "Tanh")) return std::nullopt;
  m.nodes.push_back(tanh);
  v = Step(m, tanh->output(), "Add", [&](const ir::Value* c) { return IsNear(c, 1.0f, 0, t); });
  if (v == nullptr) return std::nullopt;
  return GeluTail(std::move(m), x, v, "tanh");
}

// 0.5·x·(1 + erf(x / √2)) (or x · (1/√2)), as torch exports nn.GELU() and BERT's gelu.
std::optional<Match> MatchGeluErf(ir::Node* erf) {
  if (!IsCall(erf, "Erf")) return std::nullopt;
  ir::Node* scale = erf->input(0)->producer();
  if (!IsCall(scale, "Div") && !IsCall(scale, "Mul")) return std::nullopt;
  if (OnlyUser(scale->output()) != erf) return std::nullopt;
  const bool div = scale->op_type() == "Div";
  ir::Value* x = scale->input(0);
  ir::Value* c = scale->input(1);
  if (!div && ScalarConstant(x).has_value()) std::swap(x, c);  // Mul takes either order
  const ir::DType t = x->type().dtype;
  if (!IsFloatType(t) || !IsNear(c, div ? 1.41421356f : 0.70710678f, 1e-5f, t)) {
    return std::nullopt;
  }
  Match m;
  m.nodes = {scale, erf};
  ir::Value* v =
      Step(m, erf->output(), "Add", [&](const ir::Value* k) { return IsNear(k, 1.0f, 0, t); });
  if (v == nullptr) return std::nullopt;
  return GeluTail(std::move(m), x, v, "none");
}

// Slice(x, [start], [end], [last axis]) with unit steps: {start, end}, or nothing.
std::optional<std::pair<int64_t, int64_t>> LastAxisSlice(const ir::Node* n, int64_t rank) {
  if (!IsCall(n, "Slice") || n->num_inputs() < 4 || n->num_inputs() > 5) return std::nullopt;
  const auto starts = IntsConstant(n->input(1)), ends = IntsConstant(n->input(2)),
             axes = IntsConstant(n->input(3));
  if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
      ((*axes)[0] != -1 && (*axes)[0] != rank - 1)) {
    return std::nullopt;
  }
  if (n->num_inputs() == 5 && n->input(4) != nullptr) {
    const auto steps = IntsConstant(n->input(4));
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
  }
  return std::make_pair((*starts)[0], (*ends)[0]);
}

// Rotary embedding as Llama's rotate_half exports it: x·cos + Concat(-x[.., h:],
// x[.., :h])·sin over the last axis of size 2h → tpc::RotaryHalf(x, cos, sin).
std::optional<Match> MatchRotaryHalf(ir::Node* concat) {
  if (!IsCall(concat, "Concat") || concat->num_inputs() != 2) return std::nullopt;
  ir::Value* neg_out = concat->input(0);
  ir::Node* neg = neg_out->producer();
  ir::Node* low = concat->input(1)->producer();
  if (!IsCall(neg, "Neg") || OnlyUser(neg_out) != concat || OnlyUser(concat->input(1)) != concat) {
    return std::nullopt;
  }
  ir::Node* high = neg->input(0)->producer();
  if (OnlyUser(neg->input(0)) != neg || !IsCall(high, "Slice") || !IsCall(low, "Slice")) {
    return std::nullopt;
  }
  ir::Value* x = low->input(0);
  const int64_t rank = RankOf(x);
  const ir::DType t = x->type().dtype;
  if (high->input(0) != x || !IsFloatType(t) || rank < 1 || !x->type().shape->back().is_static()) {
    return std::nullopt;
  }
  const int64_t d = x->type().shape->back().value();
  const int64_t axis = concat->attr_int("axis", 0);
  const auto lo = LastAxisSlice(low, rank), hi = LastAxisSlice(high, rank);
  if (d % 2 != 0 || (axis != -1 && axis != rank - 1) || !lo || !hi || lo->first != 0 ||
      lo->second != d / 2 || hi->first != d / 2 || hi->second < d) {
    return std::nullopt;
  }
  ir::Node* mul_sin = OnlyUser(concat->output());
  if (!IsCall(mul_sin, "Mul")) return std::nullopt;
  ir::Value* sin = OtherOperand(mul_sin, concat->output());
  ir::Node* add = OnlyUser(mul_sin->output());
  if (sin == nullptr || !Is(sin, t) || !IsCall(add, "Add")) return std::nullopt;
  ir::Value* cos_term = OtherOperand(add, mul_sin->output());
  ir::Node* mul_cos = cos_term != nullptr ? cos_term->producer() : nullptr;
  if (!IsCall(mul_cos, "Mul") || OnlyUser(cos_term) != add) return std::nullopt;
  ir::Value* cos = OtherOperand(mul_cos, x);
  if (cos == nullptr || !Is(cos, t)) return std::nullopt;
  // cos and sin hold a row of 2h per position (broadcast over the leading dims only).
  for (const ir::Value* t : {cos, sin}) {
    const int64_t r = RankOf(t);
    if (r < 1 || r > rank || !t->type().shape->back().is_static() ||
        t->type().shape->back().value() != d) {
      return std::nullopt;
    }
  }
  Match m;
  m.op_type = "RotaryHalf";
  m.nodes = {low, high, neg, concat, mul_cos, mul_sin, add};
  m.inputs = {x, cos, sin};
  m.result = add->output();
  return m;
}

constexpr Pattern kPatterns[] = {
    {"rotary half", 0, MatchRotaryHalf},
    {"gelu tanh", 0, MatchGeluTanh},
    {"gelu erf", 0, MatchGeluErf},
    {"rms norm", 0, MatchRmsNorm},
    {"attention core", 1, MatchAttentionCore},
    {"matmul epilogue", 1, MatchMatMulEpilogue},
};

}  // namespace

std::span<const Pattern> Patterns() { return kPatterns; }

}  // namespace tpc::runtime::fusion
