// onnxruntime's CausalConvWithState on the CPU: math/causal_conv.h's sums, a row (batch
// entry and channel) at a time.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "isa_loops.h"
#include "kernels.h"
#include "tpc/runtime/math/causal_conv.h"
#include "vector_math.h"

namespace tpc::runtime::cpu {
namespace {

// Rows [first, last) (batch entry and channel) of the output, and of the present state
// when `state` is not null. A row's sequence (CausalConvPadded's: the past state, or
// zeros, then the input) is laid out in `padded` (state + length floats), then the same
// sums in the same order as math::CausalConvAt, positions innermost (they vectorize); SiLU
// through vector_math.h's exp (CausalConvAt's expf differs from it by an ulp or two) over
// the rows' outputs at once (contiguous: a decode step's one position per row vectorizes
// too). Compiled per ISA: the bench's Qwen 3.5 32-token prefill spent 2.0 ms in this op
// element by element (an expf call each), against onnxruntime's 1.7.
TPC_ISA_CLONES void CausalConvRows(const math::CausalConvLayout& l, const float* x,
                                   const float* past, const float* w, const float* bias, float* out,
                                   float* state, int64_t first, int64_t last, float* padded) {
  const int64_t s = l.state(), n = l.length;
  for (int64_t r = first; r < last; ++r) {
    if (past != nullptr) {
      std::copy_n(past + r * s, s, padded);
    } else {
      std::fill(padded, padded + s, 0.0f);
    }
    std::copy_n(x + r * n, n, padded + s);
    const int64_t c = r % l.channels;
    float* y = out + r * n;
    std::fill(y, y + n, bias != nullptr ? bias[c] : 0.0f);
    for (int64_t j = 0; j < l.k; ++j) {
      const float wj = w[c * l.k + j];
      const float* from = padded + j * l.dilation;
      for (int64_t t = 0; t < n; ++t) y[t] += wj * from[t];
    }
    if (state != nullptr) std::copy_n(padded + n, s, state + r * s);  // the last s positions
  }
  if (l.silu) {
    for (int64_t i = first * n; i < last * n; ++i) out[i] = out[i] * Sigmoid(out[i]);
  }
}

// The longest row sequence (state + length floats) CausalConvRows lays out per task.
constexpr int64_t kMaxPaddedRow = int64_t{1} << 20;

}  // namespace

// CausalConvWithState(input [B, C, L], weight [C, 1, k], bias [C], past_state [B, C, S])
// -> (output [B, C, L], present_state [B, C, S]), S = (k - 1) · dilation: channels-first,
// one spatial dim, no state window (the import refuses the other layouts).
absl::StatusOr<math::CausalConvLayout> ReadCausalConvLayout(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* past = ctx.optional_input(3);
  math::CausalConvLayout l;
  const std::string act = node.attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") {
    return ctx.Error(absl::StrCat("activation '", act, "' is not one of none, silu, swish"));
  }
  l.silu = act != "none";
  l.dilation = node.attr_int("dilation", 1);
  if (x.rank() != 3 || w.rank() != 3) {
    return ctx.Error(absl::StrCat("input ", x.TypeString(), " and weight ", w.TypeString(),
                                  " must be [batch, channels, length] and [channels, 1, k]"));
  }
  l.batch = x.dim(0);
  l.channels = x.dim(1);
  l.length = x.dim(2);
  l.k = w.dim(2);
  const ir::DType t = x.dtype();
  if (l.dilation < 1 || l.dilation > (int64_t{1} << 32) || l.k < 1 || l.k > (int64_t{1} << 20) ||
      w.shape() != Shape{l.channels, 1, l.k} || w.dtype() != t ||
      (bias != nullptr && (bias->shape() != Shape{l.channels} || bias->dtype() != t)) ||
      (past != nullptr &&
       (past->shape() != Shape{l.batch, l.channels, l.state()} || past->dtype() != t))) {
    return ctx.Error(absl::StrCat(
        "weight ", w.TypeString(), bias ? absl::StrCat(", bias ", bias->TypeString()) : "",
        past ? absl::StrCat(", past_state ", past->TypeString()) : "", " and dilation ", l.dilation,
        " do not fit input ", x.TypeString(),
        " (weight [channels, 1, k], bias [channels], past_state [batch, channels, (k - 1) · "
        "dilation])"));
  }
  return l;
}

absl::Status CausalConvWithState(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::CausalConvLayout l, ReadCausalConvLayout(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return ctx.Error("the CPU kernel takes float32 only");
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* past = ctx.optional_input(3);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  float* out = y->data<float>();
  float* state = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(1, {l.batch, l.channels, l.state()}, x.dtype()));
    state = p->data<float>();
  }
  const float* w = ctx.input(1).data<float>();
  const float* b = bias != nullptr ? bias->data<float>() : nullptr;
  const float* pp = past != nullptr ? past->data<float>() : nullptr;
  if (l.state() + l.length > kMaxPaddedRow) {
    // A sequence too long to lay out per task (a dilation of millions): element by
    // element, as the GPU computes them.
    auto load = [](const float* p) { return [p](int64_t i) { return p[i]; }; };
    const auto lx = load(x.data<float>()), lp = load(pp), lw = load(w), lb = load(b);
    ctx.pool().ParallelFor(l.batch * l.channels, 16, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        for (int64_t t = 0; t < l.length; ++t) {
          out[r * l.length + t] =
              math::CausalConvAt(l, lx, lp, pp != nullptr, lw, lb, b != nullptr, r, t);
        }
        for (int64_t i = r * l.state(); state != nullptr && i < (r + 1) * l.state(); ++i) {
          state[i] = math::CausalConvStateElement(l, lx, lp, pp != nullptr, i);
        }
      }
    });
    return absl::OkStatus();
  }
  ctx.pool().ParallelFor(l.batch * l.channels, 16, [&](int64_t first, int64_t last) {
    std::vector<float> padded(static_cast<size_t>(l.state() + l.length));
    CausalConvRows(l, x.data<float>(), pp, w, b, out, state, first, last, padded.data());
  });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
