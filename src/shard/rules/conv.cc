// Convolutions and pools: `X[n, c, spatial..]`. The batch dim passes; a convolution's
// output channels split with its weight's (the patch embedding of a vision transformer,
// a 1-D convolution: column-parallel) and its input channels reduce (row-parallel, a
// partial sum); pools keep batch and channels. Spatial dims need whole: a split would
// need the halo of the neighbouring rank.
#include <string>

#include "rules.h"

namespace tpc::shard::rules {
namespace {

using Kind = FactorSpec::Kind;

// A grouped Conv / ConvTranspose split by groups: the same op with group/N groups.
absl::StatusOr<LocalGraph::Replacements> LowerGroupedConv(LocalGraph& g, ir::Node* node) {
  ir::Attributes attrs = node->attrs();
  attrs["group"] = node->attr_int("group", 1) / g.n();
  ir::Value* y = g.Op(node, node->op_type(), node->inputs(), node->output(0)->type(),
                      ir::Placement::Shard(1), std::move(attrs));
  return g.Replace(node, {y});
}

// Factors of Conv (transposed = false: W is [M, C/group, k..]) and ConvTranspose
// (transposed: W is [C, M/group, k..]); Y is [n, M, spatial..], the bias [M].
void ConvFamily(const RuleContext& ctx, bool transposed, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  const std::vector<ir::Dim>& w = ctx.input_dims(1);
  if (x.size() < 3 || w.size() != x.size() || !OutputsTyped(ctx)) return;
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  if (y.size() != x.size()) return;
  const bool bias = ctx.has_input(2);
  const int64_t w_out = transposed ? 1 : 0;  // W's dim of the output channels
  const int64_t w_in = transposed ? 0 : 1;
  FactorSpecBuilder b(ctx);
  b.Add(Kind::kPass, {0}, {0}, "batch");
  // With groups, a rank's share of the channels is a share of the groups: the local op
  // would need group/N, which its own attribute does not say; keep channels whole.
  const bool grouped = ctx.node().attr_int("group", 1) != 1;
  b.Add(grouped ? Kind::kNeedWhole : Kind::kPass, {kNone, w_out, 0}, {1}, "out channels");
  b.Add(grouped ? Kind::kNeedWhole : Kind::kReduceSum, {1, w_in}, {}, "in channels");
  for (size_t d = 2; d < x.size(); ++d) {
    b.Add(Kind::kNeedWhole, {static_cast<int64_t>(d)}, {static_cast<int64_t>(d)},
          "spatial " + std::to_string(d - 2));
  }
  // The kernel's window dims carry no factor: the weight is never split there.
  std::vector<Strategy> local;
  AddFactorStrategies(ctx, b.Build(), &local);
  for (Strategy& s : local) {
    // Reducing the input channels: the bias must be added once, so it arrives partial.
    if (bias && s.outputs[0].kind == ir::Placement::Kind::kPartial) {
      s.inputs[2] = ir::Placement::Partial(ir::ReduceOp::kSum);
    }
    out->push_back(std::move(s));
  }
  // Linear in X and in W (the bias partial with either).
  AddPartialStrategy(ctx, bias ? std::vector<int>{0, 2} : std::vector<int>{0}, out);
  AddPartialStrategy(ctx, bias ? std::vector<int>{1, 2} : std::vector<int>{1}, out);
  // With groups (a depthwise convolution), rank r takes groups [r·g/N, (r+1)·g/N): its
  // blocks of the input channels, of the weight's first dim (output channels for Conv,
  // input channels for ConvTranspose) and of the output channels, as a convolution of
  // g/N groups.
  const int64_t group = ctx.node().attr_int("group", 1);
  if (grouped && group > 0 && group % ctx.n() == 0) {
    Strategy s;
    s.name = "split groups";
    s.lowering = LowerGroupedConv;
    s.inputs = {ir::Placement::Shard(1), ir::Placement::Shard(0)};
    if (ctx.num_inputs() > 2) {
      s.inputs.push_back(bias ? std::optional<ir::Placement>(ir::Placement::Shard(0))
                              : std::nullopt);
    }
    s.outputs = {ir::Placement::Shard(1)};
    s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
    AddNamedStrategy(ctx, std::move(s), out);
  }
}

}  // namespace

void Conv(const RuleContext& ctx, std::vector<Strategy>* out) { ConvFamily(ctx, false, out); }

void ConvTranspose(const RuleContext& ctx, std::vector<Strategy>* out) {
  ConvFamily(ctx, true, out);
}

// 2 FLOPs per output element and weight element feeding it: 2·|Y|·C/group·prod(kernel)
// (W's dims after the first, for Conv; ConvTranspose reads C/group·prod(kernel) too,
// |X|·|W| overall).
double ConvFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& w = ctx.input_dims(1);
  if (w.size() < 2 || !OutputsTyped(ctx)) return OutputElements(ctx);
  double per_output = 1;
  for (size_t d = 1; d < w.size(); ++d) per_output *= ctx.Size(w[d]);
  return 2 * OutputElements(ctx) * per_output;
}

double ConvTransposeFlops(const RuleContext& ctx) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  const std::vector<ir::Dim>& w = ctx.input_dims(1);
  if (x.size() < 3 || w.size() < 2) return OutputElements(ctx);
  double elems = 1;
  for (const ir::Dim& d : x) elems *= ctx.Size(d);
  double per_input = 1;
  for (size_t d = 1; d < w.size(); ++d) per_input *= ctx.Size(w[d]);
  return 2 * elems * per_input;
}

// Conv's weight [M, C/group, k..]: output features on dim 0, input features on dim 1;
// its bias [M] is the column-parallel bias. ConvTranspose's weight is [C, M/group, k..].
std::optional<int64_t> ConvFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&) {
  const bool transposed = node.op_type() == "ConvTranspose";
  if (input == 1 && node.input(1)->type().rank() >= 3) return colwise != transposed ? 0 : 1;
  if (input == 2 && colwise) return 0;
  return std::nullopt;
}

// MaxPool, AveragePool, LpPool: batch and channels pass, the window's dims need whole.
// MaxPool's indices count positions in the whole input (batch and channel included), so
// with them nothing splits.
void Pool(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  if (x.size() < 3 || !OutputsTyped(ctx)) return;
  const bool indices = ctx.node().num_outputs() > 1 && ctx.node().output(1) != nullptr;
  std::vector<Kind> kinds(x.size(), Kind::kNeedWhole);
  if (!indices) kinds[0] = kinds[1] = Kind::kPass;
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
}

// GlobalAveragePool / GlobalMaxPool reduce the spatial dims (a split gives P(avg) /
// P(max)); GlobalLpPool needs them whole.
void GlobalPool(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  if (x.size() < 3 || !OutputsTyped(ctx)) return;
  const std::string& op = ctx.node().op_type();
  const Kind spatial = op == "GlobalAveragePool" ? Kind::kReduceAvg
                       : op == "GlobalMaxPool"   ? Kind::kReduceMax
                                                 : Kind::kNeedWhole;
  std::vector<Kind> kinds(x.size(), spatial);
  kinds[0] = kinds[1] = Kind::kPass;
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  if (op == "GlobalAveragePool") AddPartialStrategy(ctx, {0}, out);
}

// onnxruntime's CausalConvWithState (input [B, C, L], weight [C, 1, k], bias [C],
// past_state [B, C, S]; output [B, C, L], present_state [B, C, S]): depthwise, so the
// channels pass (the weight's, the bias's and both states' with them), as does the batch.
// The present is the past joined with the input on axis 2 (its last S positions).
void CausalConvWithState(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (ctx.input_rank(0) != 3 || ctx.input_rank(1) != 3 || !OutputsTyped(ctx)) return;
  const std::vector<ir::Dim>& x = ctx.input_dims(0);
  auto strategy = [&](std::string name, const ir::Placement& split) {
    Strategy s = ReplicatedInputs(ctx, std::move(name));
    s.inputs[0] = split;
    if (split.dim == 1) {  // the weight's and bias's channels alike
      ir::Placement channels = split;
      channels.dim = 0;
      s.inputs[1] = channels;
      if (ctx.has_input(2)) s.inputs[2] = channels;
    }
    if (ctx.has_input(3)) s.inputs[3] = split;
    s.outputs.assign(static_cast<size_t>(ctx.node().num_outputs()), split);
    s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
    AddNamedStrategy(ctx, std::move(s), out);
  };
  if (ctx.Divisible(x[0])) strategy("split batch", ir::Placement::Shard(0));
  if (ctx.Divisible(x[1])) strategy("split channels", ir::Placement::Shard(1));
  // Channels that are a fused projection's parts ([q | k | v] before their Split): each
  // rank its part of each, the state alike.
  for (const ir::Placement& p : ctx.BlockedSplits(1, x[1])) {
    strategy(absl::StrCat("split channels in blocks ", p.ToString()), p);
  }
}

std::optional<int64_t> CausalConvJoinAxis(const ir::Node&) { return 2; }

}  // namespace tpc::shard::rules
