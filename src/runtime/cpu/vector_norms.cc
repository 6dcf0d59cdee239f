// GatedRMSNorm (onnxruntime's) and LpNormalization (ONNX's) on the CPU: a group or a line
// at a time, from math/vector_norms.h.
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels.h"
#include "tpc/runtime/math/vector_norms.h"

namespace tpc::runtime::cpu {

// GatedRMSNorm(X [..., G · C], scale [C], gate X's shape) -> Y: groups of C.
absl::StatusOr<GatedRmsNormShape> ReadGatedRmsNorm(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor& gate = ctx.input(2);
  const std::string act = ctx.node().attr_string("activation", "silu");
  if (act != "silu" && act != "swish" && act != "sigmoid") {
    return ctx.Error(absl::StrCat("activation '", act, "' is not one of silu, swish, sigmoid"));
  }
  const int64_t c = scale.rank() == 1 ? scale.dim(0) : 0;
  if (x.rank() < 1 || c <= 0 || x.dim(x.rank() - 1) % c != 0 || gate.shape() != x.shape() ||
      gate.dtype() != x.dtype() || scale.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), ", scale ", scale.TypeString(),
                                  " and gate ", gate.TypeString(),
                                  ": scale's length must divide X's last dim, gate be X's "
                                  "shape, all of one type"));
  }
  return GatedRmsNormShape{x.num_elements() / c, c, ctx.node().attr_float("epsilon", 1e-5f),
                           act != "sigmoid"};
}

absl::Status GatedRMSNorm(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const GatedRmsNormShape s, ReadGatedRmsNorm(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return ctx.Error("the CPU kernel takes float32 only");
  auto load = [](const Tensor& t) {
    const float* p = t.data<float>();
    return [p](int64_t i) { return p[i]; };
  };
  const auto lx = load(x), ls = load(ctx.input(1)), lg = load(ctx.input(2));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  float* py = y->data<float>();
  auto store = [py](int64_t i, float f) { py[i] = f; };
  ctx.pool().ParallelFor(s.groups, 64, [&](int64_t first, int64_t last) {
    for (int64_t g = first; g < last; ++g) {
      math::GatedRmsNormGroup(lx, ls, lg, s.size, s.epsilon, s.silu, store, g);
    }
  });
  return absl::OkStatus();
}

absl::StatusOr<LpNormShape> ReadLpNorm(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t p = ctx.node().attr_int("p", 2);
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (axis < 0) axis += x.rank();
  if (p != 1 && p != 2) return ctx.Error(absl::StrCat("p is ", p, "; it must be 1 or 2"));
  if (axis < 0 || axis >= x.rank()) {
    return ctx.Error(
        absl::StrCat("axis ", ctx.node().attr_int("axis", -1), " is outside ", x.TypeString()));
  }
  LpNormShape s;
  s.p = static_cast<int>(p);
  s.count = x.dim(axis);
  s.inner = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d) s.inner *= x.dim(d);
  s.lines = s.count > 0 ? x.num_elements() / s.count : 0;
  return s;
}

// LpNormalization(x) along `axis`: one line (outer index o, inner index i) starts at
// o · count · inner + i, its elements inner apart.
absl::Status LpNormalization(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const LpNormShape s, ReadLpNorm(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return ctx.Error("the CPU kernel takes float32 only");
  const float* px = x.data<float>();
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  float* py = y->data<float>();
  auto load = [px](int64_t i) { return px[i]; };
  auto store = [py](int64_t i, float f) { py[i] = f; };
  ctx.pool().ParallelFor(s.lines, 64, [&](int64_t first, int64_t last) {
    for (int64_t line = first; line < last; ++line) {
      const int64_t start = (line / s.inner) * s.count * s.inner + line % s.inner;
      math::LpNormalizeLine(load, start, s.count, s.inner, s.p, store);
    }
  });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
