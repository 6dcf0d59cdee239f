// Indexing and data-movement ops beyond Gather: GatherElements, GatherND, ScatterND,
// ScatterElements, Tile, Pad, Trilu, and the generators Range and ConstantOfShape.
// A dim that an index addresses needs whole (an index is a position in the whole dim);
// the dims an op only carries along pass. The gathers and Tile are linear in their data,
// Pad with a zero fill and the scatters that replace or add are linear in data and
// updates together.
#include <variant>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::shard::rules {
namespace {

using Kind = FactorSpec::Kind;

// ScatterND / ScatterElements with reduction none or add: out = data with updates put
// (or added) in place, linear in (data, updates) together.
bool ScatterIsLinear(const RuleContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "none");
  return r == "none" || r == "add";
}

// GatherElements / ScatterElements: every operand in `operands` (data first, then the
// operands shaped like the indices) and the output carry dim d, needed whole on the
// axis and where the indices' size differs from the data's. False when the op's form
// does not fit (ranks differ, unknown axis).
bool AddElementsSpec(const RuleContext& ctx, int operands, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& data = ctx.input_dims(0);
  const std::vector<ir::Dim>& idx = ctx.input_dims(1);
  if (data.size() != idx.size() || !OutputsTyped(ctx)) return false;
  const int64_t rank = static_cast<int64_t>(data.size());
  const int64_t axis = NormalizeAxis(ctx.node().attr_int("axis", 0), rank);
  if (axis < 0) return false;
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d < rank; ++d) {
    const bool same = data[static_cast<size_t>(d)] == idx[static_cast<size_t>(d)];
    const Kind kind = d == axis || !same ? Kind::kNeedWhole : Kind::kPass;
    b.Add(kind, std::vector<int64_t>(static_cast<size_t>(operands), d), {d}, absl::StrCat("d", d));
  }
  AddFactorStrategies(ctx, b.Build(), out);
  return true;
}

}  // namespace

// GatherElements(data, indices, axis): out[.., i, ..] = data[.., indices[.., i, ..], ..],
// out has the indices' shape. The axis needs whole on both; another dim passes where
// data and indices agree on its size (indices may be shorter there).
void GatherElements(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (AddElementsSpec(ctx, 2, out)) AddPartialStrategy(ctx, {0}, out);
}

// GatherND(data, indices, batch_dims = b): data [B.., X.., T..], indices [B.., I.., q],
// out [B.., I.., T..] with q = |X|: B and I and the slice dims T pass, the indexed dims
// X and the index tuple q need whole.
void GatherND(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& data = ctx.input_dims(0);
  const std::vector<ir::Dim>& idx = ctx.input_dims(1);
  if (idx.empty() || !idx.back().is_static() || !OutputsTyped(ctx)) return;
  const int64_t batch = ctx.node().attr_int("batch_dims", 0);
  const int64_t q = idx.back().value();
  const int64_t r = static_cast<int64_t>(data.size());
  const int64_t ir = static_cast<int64_t>(idx.size());
  const int64_t y_rank = static_cast<int64_t>(ctx.output_dims(0).size());
  if (batch < 0 || batch + q > r || batch > ir - 1 || y_rank != ir - 1 + r - batch - q) return;
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d < batch; ++d) b.Add(Kind::kPass, {d, d}, {d}, absl::StrCat("batch ", d));
  for (int64_t d = batch; d < ir - 1; ++d) {
    b.Add(Kind::kPass, {kNone, d}, {d}, absl::StrCat("indices d", d));
  }
  b.Add(Kind::kNeedWhole, {kNone, ir - 1}, {}, "index tuple");
  for (int64_t d = batch; d < batch + q; ++d) {
    b.Add(Kind::kNeedWhole, {d}, {}, absl::StrCat("indexed d", d));
  }
  for (int64_t d = batch + q; d < r; ++d) {
    b.Add(Kind::kPass, {d}, {ir - 1 + d - batch - q}, absl::StrCat("slice d", d));
  }
  AddFactorStrategies(ctx, b.Build(), out);
  AddPartialStrategy(ctx, {0}, out);
}

// ScatterND(data, indices, updates): indices [I.., q], updates [I.., T..], data and out
// [X.., T..] with q = |X|. The slice dims T pass (data, updates, out); the indexed dims,
// the index tuple and I need whole (splitting I would put different updates on each
// rank's copy of the whole output).
void ScatterND(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& data = ctx.input_dims(0);
  const std::vector<ir::Dim>& idx = ctx.input_dims(1);
  const std::vector<ir::Dim>& upd = ctx.input_dims(2);
  if (idx.empty() || !idx.back().is_static() || !OutputsTyped(ctx)) return;
  const int64_t q = idx.back().value();
  const int64_t r = static_cast<int64_t>(data.size());
  const int64_t ni = static_cast<int64_t>(idx.size()) - 1;
  if (q > r || static_cast<int64_t>(upd.size()) != ni + r - q) return;
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d < ni; ++d) {
    b.Add(Kind::kNeedWhole, {kNone, d, d}, {}, absl::StrCat("update d", d));
  }
  b.Add(Kind::kNeedWhole, {kNone, ni}, {}, "index tuple");
  for (int64_t d = 0; d < q; ++d) b.Add(Kind::kNeedWhole, {d}, {d}, absl::StrCat("indexed d", d));
  for (int64_t d = q; d < r; ++d) {
    b.Add(Kind::kPass, {d, kNone, ni + d - q}, {d}, absl::StrCat("slice d", d));
  }
  AddFactorStrategies(ctx, b.Build(), out);
  if (ScatterIsLinear(ctx)) AddPartialStrategy(ctx, {0, 2}, out);
}

// ScatterElements(data, indices, updates, axis): indices and updates share a shape; the
// axis needs whole, another dim passes where all three agree on its size.
void ScatterElements(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (ctx.input_dims(1) != ctx.input_dims(2)) return;
  if (AddElementsSpec(ctx, 3, out) && ScatterIsLinear(ctx)) AddPartialStrategy(ctx, {0, 2}, out);
}

// OneHot(indices, depth, values, axis): out is the indices' shape with the depth dim
// inserted at the axis. The indices' dims pass; the depth dim needs whole (each rank
// would need its classes' offset).
void OneHot(const RuleContext& ctx, std::vector<Strategy>* out) {
  const int64_t rank = static_cast<int64_t>(ctx.input_dims(0).size());
  if (!OutputsTyped(ctx) || static_cast<int64_t>(ctx.output_dims(0).size()) != rank + 1) return;
  const int64_t axis = NormalizeAxis(ctx.node().attr_int("axis", -1), rank + 1);
  if (axis < 0) return;
  FactorSpecBuilder b(ctx);
  for (int64_t d = 0; d < rank; ++d) {
    b.Add(Kind::kPass, {d}, {d < axis ? d : d + 1}, absl::StrCat("d", d));
  }
  b.Add(Kind::kNeedWhole, {}, {axis}, "depth");
  AddFactorStrategies(ctx, b.Build(), out);
}

// Tile: a dim repeated once (the output's size equals the input's) passes; a repeated
// dim needs whole (the copies of rank r's block would not be the output's block r).
void Tile(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  if (!OutputsTyped(ctx) || ctx.output_dims(0).size() != in.size()) return;
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  auto repeats = ctx.input_ints(1);
  std::vector<Kind> kinds;
  for (size_t d = 0; d < in.size(); ++d) {
    // Known repeats say it; otherwise equal sizes do (a non-zero dim kept its size).
    const bool once = repeats && repeats->size() == in.size()
                          ? (*repeats)[d] == 1
                          : in[d] == y[d] && !(in[d] == ir::Dim(0));
    kinds.push_back(once ? Kind::kPass : Kind::kNeedWhole);
  }
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  AddPartialStrategy(ctx, {0}, out);
  // A dim repeated a symbolic number of times r (ALiBi's per-head bias repeated over the
  // batch): rank r's block, repeated, is its part of each of the r copies, S(d/r).
  const std::optional<std::vector<ir::Dim>>& known = ctx.node().input(1)->known_value();
  if (!known || known->size() != in.size()) return;
  for (size_t d = 0; d < in.size(); ++d) {
    const ir::Dim& r = (*known)[d];
    if (r.is_static() || r.is_unknown() || !ctx.Divisible(in[d])) continue;
    if (!ctx.DivisibleInBlocks(y[d], r)) continue;
    Strategy s;
    s.name = absl::StrCat("split d", d, " repeated in ", r.ToString(), " blocks");
    s.inputs = {ir::Placement::Shard(static_cast<int64_t>(d)), ir::Placement::Replicate()};
    s.outputs = {ir::Placement::ShardInSymbolicBlocks(static_cast<int64_t>(d), r.ToString())};
    s.compute_fraction = 1.0 / static_cast<double>(ctx.n());
    AddNamedStrategy(ctx, std::move(s), out);
  }
}

std::vector<ir::Dim> TileFoldedBlocks(const ir::Node& node) {
  std::vector<ir::Dim> out;
  const std::optional<std::vector<ir::Dim>>& known = node.input(1)->known_value();
  if (!known) return out;
  for (const ir::Dim& r : *known) {
    if (!r.is_static() && !r.is_unknown()) out.push_back(r);
  }
  return out;
}

// Pad: a dim with no padding on either side passes, a padded one needs whole; the pads
// (and axes) must be known. Padding with zeros (mode constant, no or a zero value) is
// linear.
void Pad(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  if (!OutputsTyped(ctx)) return;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> pads = ctx.node().attr_ints("pads");  // opset < 11
  if (!ctx.node().has_attr("pads")) {
    auto known = ctx.input_ints(1);
    if (!known) return;
    pads = *known;
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    auto known = ctx.input_ints(3);
    if (!known) return;
    axes = *known;
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) return;
  std::vector<Kind> kinds(in.size(), Kind::kPass);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = NormalizeAxis(axes[i], rank);
    if (a < 0) return;
    if (pads[i] != 0 || pads[i + axes.size()] != 0)
      kinds[static_cast<size_t>(a)] = Kind::kNeedWhole;
  }
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  const std::string mode = ctx.node().attr_string("mode", "constant");
  bool zero_fill = mode == "constant" && ctx.node().attr_float("value", 0.0f) == 0.0f;
  if (zero_fill && ctx.has_input(2)) {
    const ir::Node* fill = ctx.node().input(2)->producer();
    zero_fill = fill->kind() == ir::NodeKind::kConstant && fill->tensor().has_data() &&
                fill->tensor().num_elements() == 1 && fill->tensor().ElementAsDouble(0) == 0.0;
  }
  if (zero_fill) AddPartialStrategy(ctx, {0}, out);
}

// Trilu: the last two dims (the triangle's rows and columns) need whole, the batch dims
// pass; masking is linear.
void Trilu(const RuleContext& ctx, std::vector<Strategy>* out) {
  const std::vector<ir::Dim>& in = ctx.input_dims(0);
  if (in.size() < 2 || !OutputsTyped(ctx)) return;
  std::vector<Kind> kinds(in.size(), Kind::kPass);
  kinds[in.size() - 1] = kinds[in.size() - 2] = Kind::kNeedWhole;
  AddFactorStrategies(ctx, FactorSpecBuilder(ctx).Along({0}, kinds).Build(), out);
  AddPartialStrategy(ctx, {0}, out);
}

namespace {

// ConstantOfShape filled with zeros (no value, or a zero one): zeros on every rank are
// also a partial sum of zeros, the start of an accumulation of partial sums (torch's
// `zeros(...).index_add_(...)`, a mixture of experts' output summed over its experts).
bool FillsZeros(const ir::Node& node) {
  if (node.op_type() != "ConstantOfShape") return false;
  auto it = node.attrs().find("value");
  if (it == node.attrs().end()) return true;
  const auto* t = std::get_if<ir::Tensor>(&it->second);
  return t != nullptr && t->has_data() && t->num_elements() == 1 && t->ElementAsDouble(0) == 0.0;
}

}  // namespace

// Range and ConstantOfShape make a value from scalars or a shape: every rank makes the
// whole value (a split would need the per-rank bounds).
void Generator(const RuleContext& ctx, std::vector<Strategy>* out) {
  if (!OutputsTyped(ctx)) return;
  FactorSpecBuilder b(ctx);
  const int64_t rank = static_cast<int64_t>(ctx.output_dims(0).size());
  for (int64_t d = 0; d < rank; ++d) b.Add(Kind::kNeedWhole, {}, {d}, absl::StrCat("d", d));
  FactorSpec spec = b.Build();
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) {
      spec.inputs[static_cast<size_t>(i)].resize(ctx.input_dims(i).size(), -1);
    }
  }
  AddFactorStrategies(ctx, spec, out);
  if (FillsZeros(ctx.node())) AddPartialStrategy(ctx, {}, out);
}

}  // namespace tpc::shard::rules
