// onnxruntime's GatedAdd in its plain mode (Qwen 3.5 MoE's shared expert joining the
// routed experts): output = X + Y · gate, the gate one value per row.
#include "absl/strings/str_cat.h"
#include "kernels.h"

namespace tpc::runtime::cpu {

// GatedAdd(X [..., C], Y X's shape, gate [..., 1]) -> X's shape: the row count (the
// gate's elements). The projected mode (gate_weight) is refused at import.
absl::StatusOr<int64_t> GatedAddRows(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  const Tensor& gate = ctx.input(2);
  Shape rows = x.shape();
  if (!rows.empty()) rows.back() = 1;
  if (x.rank() < 1 || y.shape() != x.shape() || gate.shape() != rows || y.dtype() != x.dtype() ||
      gate.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), ", Y ", y.TypeString(), " and gate ",
                                  gate.TypeString(),
                                  ": Y must be X's shape, the gate X's with a last dim of 1, "
                                  "all of one type"));
  }
  return gate.num_elements();
}

absl::Status GatedAdd(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const int64_t rows, GatedAddRows(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return ctx.Error("the CPU kernel takes float32 only");
  const int64_t c = rows > 0 ? x.num_elements() / rows : 0;
  const float* px = x.data<float>();
  const float* py = ctx.input(1).data<float>();
  const float* pg = ctx.input(2).data<float>();
  TPC_ASSIGN_OR_RETURN(Tensor * out, ctx.Output(0, x.shape(), x.dtype()));
  float* po = out->data<float>();
  ctx.pool().ParallelFor(rows, 16, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      for (int64_t i = r * c; i < (r + 1) * c; ++i) po[i] = px[i] + py[i] * pg[r];
    }
  });
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
