// onnxruntime's CausalConvWithState on the CPU: each output and state element from
// math/causal_conv.h, a row (batch entry and channel) at a time.
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels.h"
#include "tpc/runtime/math/causal_conv.h"

namespace tpc::runtime::cpu {

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
  auto load = [](const Tensor* t) {
    const float* p = t != nullptr ? t->data<float>() : nullptr;
    return [p](int64_t i) { return p[i]; };
  };
  const auto lx = load(&x), lw = load(&ctx.input(1)), lb = load(bias), lp = load(past);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  float* out = y->data<float>();
  float* state = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * p, ctx.Output(1, {l.batch, l.channels, l.state()}, x.dtype()));
    state = p->data<float>();
  }
  ctx.pool().ParallelFor(l.batch * l.channels, 16, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      for (int64_t t = 0; t < l.length; ++t) {  // (no division per element)
        out[r * l.length + t] =
            math::CausalConvAt(l, lx, lp, past != nullptr, lw, lb, bias != nullptr, r, t);
      }
      for (int64_t i = r * l.state(); state != nullptr && i < (r + 1) * l.state(); ++i) {
        state[i] = math::CausalConvStateElement(l, lx, lp, past != nullptr, i);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
