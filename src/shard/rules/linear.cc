// MatMul and Gemm: `[b.., m, k] × [b.., k, n] → [b.., m, n]`. Splitting n is the
// column-parallel layout (weight split on its output dim), splitting k the row-parallel
// one (a partial sum), splitting m or a batch dim splits the activations. Both operands
// may be activations (attention scores: batch and head dims pass through).
#include "rules.h"

namespace tpc::shard::rules {

void MatMul(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& a = ctx.input_dims(0);
  const std::vector<ir::Dim>& b = ctx.input_dims(1);
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  if (a.empty() || b.empty()) return;
  FactorSpec spec;
  using Kind = FactorSpec::Kind;
  const bool a_vec = a.size() == 1;
  const bool b_vec = b.size() == 1;
  const int k = spec.AddFactor(Kind::kReduceSum, a.back(), "k (row)");
  const int m = a_vec ? -1 : spec.AddFactor(Kind::kPass, a[a.size() - 2], "m");
  const int n = b_vec ? -1 : spec.AddFactor(Kind::kPass, b.back(), "n (column)");
  // Batch dims of the output, broadcast from both operands.
  const size_t y_batch = y.size() - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  std::vector<int> batch(y_batch);
  for (size_t d = 0; d < y_batch; ++d) {
    batch[d] = spec.AddFactor(Kind::kPass, y[d], "b" + std::to_string(d));
  }
  auto operand = [&](const std::vector<ir::Dim>& dims, bool vec, std::vector<int> tail) {
    std::vector<int> f;
    const size_t nb = vec ? 0 : dims.size() - 2;
    for (size_t d = 0; d < nb; ++d) {
      const size_t yd = y_batch - nb + d;
      const BroadcastFit fit = FitOf(dims[d], y[yd]);
      f.push_back(fit == BroadcastFit::kBroadcast ? -1 : batch[yd]);
      if (fit == BroadcastFit::kUnsure) {
        spec.factors[static_cast<size_t>(batch[yd])].kind = Kind::kNeedWhole;
      }
    }
    f.insert(f.end(), tail.begin(), tail.end());
    return f;
  };
  spec.inputs.push_back(operand(a, a_vec, a_vec ? std::vector<int>{k} : std::vector<int>{m, k}));
  spec.inputs.push_back(operand(b, b_vec, b_vec ? std::vector<int>{k} : std::vector<int>{k, n}));
  std::vector<int> yf(batch.begin(), batch.end());
  if (!a_vec) yf.push_back(m);
  if (!b_vec) yf.push_back(n);
  spec.outputs.push_back(yf);
  AddFactorStrategies(ctx, spec, out);
  AddPartialStrategy(ctx, {0}, out);
  AddPartialStrategy(ctx, {1}, out);
}

// Gemm: Y = alpha·A'·B' + beta·C with A' = transA ? Aᵀ : A. C broadcasts onto [M, N];
// when K is split C must be partial too (added on one rank only).
void Gemm(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& a = ctx.input_dims(0);
  const std::vector<ir::Dim>& b = ctx.input_dims(1);
  if (a.size() != 2 || b.size() != 2) return;
  const bool ta = ctx.node().attr_int("transA", 0) != 0;
  const bool tb = ctx.node().attr_int("transB", 0) != 0;
  using Kind = FactorSpec::Kind;
  FactorSpec spec;
  const int m = spec.AddFactor(Kind::kPass, ta ? a[1] : a[0], "m");
  const int k = spec.AddFactor(Kind::kReduceSum, ta ? a[0] : a[1], "k (row)");
  const int n = spec.AddFactor(Kind::kPass, tb ? b[0] : b[1], "n (column)");
  spec.inputs.push_back(ta ? std::vector<int>{k, m} : std::vector<int>{m, k});
  spec.inputs.push_back(tb ? std::vector<int>{n, k} : std::vector<int>{k, n});
  if (ctx.has_input(2)) {
    const std::vector<ir::Dim>& c = ctx.input_dims(2);
    const std::vector<ir::Dim>& y = ctx.output_dims(0);
    std::vector<int> cf;
    const std::vector<int> yf = {m, n};
    for (size_t d = 0; d < c.size(); ++d) {
      const size_t yd = d + 2 - c.size();
      const BroadcastFit fit = FitOf(c[d], y[yd]);
      cf.push_back(fit == BroadcastFit::kBroadcast ? -1 : yf[yd]);
      if (fit == BroadcastFit::kUnsure)
        spec.factors[static_cast<size_t>(yf[yd])].kind = Kind::kNeedWhole;
    }
    spec.inputs.push_back(cf);
  }
  spec.outputs.push_back({m, n});
  std::vector<Strategy> local;
  AddFactorStrategies(ctx, spec, &local);
  for (Strategy& s : local) {
    // Splitting K: the bias must be added once, so it arrives partial.
    if (ctx.has_input(2) && s.outputs[0].kind == ir::Placement::Kind::kPartial) {
      s.inputs[2] = ir::Placement::Partial(ir::ReduceOp::kSum);
    }
    out->push_back(std::move(s));
  }
  const bool bias = ctx.has_input(2);
  AddPartialStrategy(ctx, bias ? std::vector<int>{0, 2} : std::vector<int>{0}, out);
  AddPartialStrategy(ctx, bias ? std::vector<int>{1, 2} : std::vector<int>{1}, out);
}

// onnxruntime's MatMulNBits: Y[.., N] = A[.., K] · dequant(B)ᵀ (+ bias), B [N, k_blocks,
// blob] with scales and zero points per (column, block). Column-parallel: N splits B,
// scales, zero points, bias and Y alike. Row-parallel: K splits A and, on whole blocks,
// B, scales and zero points (2-D ones: [N, k_blocks], packed [N, bytes]), giving partial
// sums (the bias then arrives partial: added once). A K split that would cut a block, or
// a byte of packed zero points, is no candidate.
void MatMulNBits(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& a = ctx.input_dims(0);
  if (a.empty() || ctx.has_input(4)) return;  // g_idx permutes K
  const ir::Node& node = ctx.node();
  const int64_t k = node.attr_int("K", 0), bits = node.attr_int("bits", 4),
                block = node.attr_int("block_size", 0);
  if (k <= 0 || block <= 0) return;
  const int64_t blocks = (k + block - 1) / block;
  const int64_t rank = static_cast<int64_t>(a.size());
  using Kind = FactorSpec::Kind;
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d + 1 < rank; ++d) b.Add(Kind::kPass, {d}, {d}, "m" + std::to_string(d));
  auto has = [&](int i) { return ctx.has_input(i); };
  // Columns: dim 0 of B, scales, zero points (flattened ones are column-major blocks of
  // k_blocks, so a split of dim 0 is a split of columns too) and bias.
  b.Add(Kind::kPass, {kNone, 0, 0, has(3) ? 0 : kNone, kNone, has(5) ? 0 : kNone}, {rank - 1},
        "n (column)");
  const bool two_d = ctx.input_rank(2) == 2 && (!has(3) || ctx.input_rank(3) == 2);
  const int64_t n = ctx.n();
  const bool whole_blocks =
      k % block == 0 && blocks % n == 0 &&
      (!has(3) || ctx.input_type(3).dtype != ir::DType::kU8 || (blocks / n * bits) % 8 == 0);
  if (two_d && whole_blocks) {
    b.Add(Kind::kReduceSum, {rank - 1, 1, 1, has(3) ? 1 : kNone}, {}, "k (row)");
  }
  std::vector<Strategy> local;
  AddFactorStrategies(ctx, b.Build(), &local);
  for (Strategy& s : local) {
    if (has(5) && s.outputs[0].kind == ir::Placement::Kind::kPartial) {
      s.inputs[5] = ir::Placement::Partial(ir::ReduceOp::kSum);
    }
    out->push_back(std::move(s));
  }
  // Linear in A: partial sums in, partial sums out (the bias then partial too).
  AddPartialStrategy(ctx, has(5) ? std::vector<int>{0, 5} : std::vector<int>{0}, out);
}

// Per-rank K and N attributes of a split MatMulNBits.
absl::Status MatMulNBitsAttributes(LocalGraph& rw, ir::Node* node,
                                   const std::vector<ir::Placement>& outputs,
                                   const std::vector<std::optional<ir::Placement>>& inputs) {
  const int64_t rank = node->input(0)->type().rank();
  auto split_at = [&](const std::optional<ir::Placement>& p, int64_t dim) {
    return p && p->kind == ir::Placement::Kind::kShard && p->dim == dim;
  };
  if (!outputs.empty() && split_at(outputs[0], rank - 1)) {
    node->attrs()["N"] = node->attr_int("N", 0) / outputs[0].Parts(rw.n());
  }
  if (!inputs.empty() && split_at(inputs[0], rank - 1)) {
    node->attrs()["K"] = node->attr_int("K", 0) / inputs[0]->Parts(rw.n());
  }
  return absl::OkStatus();
}

// B, scales and zero points hold output features on dim 0 and K's blocks on dim 1.
std::optional<int64_t> MatMulNBitsFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&) {
  if (input == 5) return colwise ? std::optional<int64_t>(0) : std::nullopt;
  if (input < 1 || input > 3) return std::nullopt;
  if (!colwise && node.input(input)->type().rank() < 2) return std::nullopt;
  return colwise ? 0 : 1;
}

// 2·M·N·K: two FLOPs per output element and step of the reduced dim.
double MatMulFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& a = ctx.input_dims(0);
  return a.empty() ? OutputElements(ctx) : 2 * OutputElements(ctx) * ctx.Size(a.back());
}

double GemmFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& a = ctx.input_dims(0);
  if (a.size() != 2) return OutputElements(ctx);
  const bool ta = ctx.node().attr_int("transA", 0) != 0;
  return 2 * OutputElements(ctx) * ctx.Size(ta ? a.front() : a.back());
}

// A weight read as B holds output features on its last dim, input features on the one
// before; read as A, the other way round.
std::optional<int64_t> MatMulFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&) {
  const int64_t rank = node.input(input)->type().rank();
  if (rank < 2) return std::nullopt;
  if (input == 1) return colwise ? rank - 1 : rank - 2;
  if (input == 0) return colwise ? rank - 2 : rank - 1;
  return std::nullopt;
}

std::optional<int64_t> GemmFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&) {
  const int64_t rank = node.input(input)->type().rank();
  if (input == 1 && rank == 2) {
    const bool tb = node.attr_int("transB", 0) != 0;
    return colwise == tb ? 0 : 1;
  }
  if (input == 2 && rank == 1 && colwise) return 0;  // the bias of a column-parallel Gemm
  return std::nullopt;
}

}  // namespace tpc::shard::rules
