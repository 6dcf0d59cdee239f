// Per-rank shapes: the inputs that carry a size of a split dim get their per-rank value.
// A constant input is replaced by a new constant (the original may have other
// consumers); a computed one is divided per rank. Reshape's 0 (copy the input dim) and
// -1 (infer it) already mean the per-rank size and stay.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rules.h"
#include "tpc/util/status_macros.h"

namespace tpc::shard::rules {
namespace {

using ir::Placement;

// The shape value `t` with element `index` divided by `parts` (N, or g for S(d@g)).
ir::Value* DivideElement(LocalGraph& rw, ir::Node* before, ir::Value* t, int64_t index,
                         int64_t parts) {
  const std::optional<std::vector<ir::Dim>>& known = t->known_value();
  if (known && index < static_cast<int64_t>(known->size())) {
    const ir::Dim& e = (*known)[static_cast<size_t>(index)];
    if (e.is_static() && (e.value() == 0 || e.value() == -1 || e.value() == 1)) return t;
  }
  const ir::Node* producer = t->producer();
  if (producer->kind() == ir::NodeKind::kConstant && producer->tensor().has_data()) {
    std::vector<int64_t> values = producer->tensor().ToInt64();
    values[static_cast<size_t>(index)] /= parts;
    return rw.Int64s(t->name() + "/per_rank", values, t->type().rank() == 0);
  }
  const int64_t len = static_cast<int64_t>(producer->tensor().num_elements());
  std::vector<int64_t> divisor(static_cast<size_t>(t->type().shape && !t->type().shape->empty() &&
                                                           (*t->type().shape)[0].is_static()
                                                       ? (*t->type().shape)[0].value()
                                                       : len),
                               1);
  divisor[static_cast<size_t>(index)] = parts;
  ir::Value* out = rw.Op(before, "Div", {t, rw.Int64s("tp/per_rank_divisor", divisor)}, t->type(),
                         Placement::Replicate());
  return out;
}

}  // namespace

// Shape and Size of a split value report the whole value's shape.
absl::Status WholeShape(LocalGraph& rw, ir::Node* node, const std::vector<Placement>&,
                        const std::vector<std::optional<Placement>>&) {
  const std::string& op = node->op_type();
  if (!node->input(0)->sharding()) return absl::OkStatus();
  const Placement p = node->input(0)->sharding()->placements[0];
  if (p.kind != Placement::Kind::kShard) return absl::OkStatus();
  ir::Value* local = rw.Op(node, op, {node->input(0)}, node->output(0)->type(),
                           Placement::Replicate(), node->attrs());
  std::vector<int64_t> factor;
  const bool size = node->output(0)->type().rank() == 0;  // Size; Shape gives a 1-D value
  if (size) {
    factor = {p.Parts(rw.n())};
  } else {
    const int64_t rank = node->input(0)->type().rank();
    int64_t start = node->attr_int("start", 0);
    int64_t end = node->attr_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    for (int64_t d = start; d < end; ++d) factor.push_back(d == p.dim ? p.Parts(rw.n()) : 1);
  }
  ir::Value* whole = rw.Op(node, "Mul", {local, rw.Int64s("tp/whole_shape", factor, size)},
                           node->output(0)->type(), Placement::Replicate());
  whole->set_known_value(node->output(0)->known_value());
  rw.Replace(node, {whole});
  return absl::OkStatus();
}

// A Split of a blocked split along its split dim: every part is split too, so the sizes
// are per rank. Along another dim the sizes stay.
absl::Status BlockedSplitSizes(LocalGraph& rw, ir::Node* node, const std::vector<Placement>&,
                               const std::vector<std::optional<Placement>>& inputs) {
  if (inputs.empty() || !inputs[0] || inputs[0]->kind != Placement::Kind::kShard ||
      inputs[0]->blocks <= 1 ||
      NormalizeAxis(node->attr_int("axis", 0), node->input(0)->type().rank()) != inputs[0]->dim) {
    return absl::OkStatus();
  }
  // Each part's size per rank: N must divide it, and there is one per output.
  auto per_rank = [&](std::vector<int64_t>& sizes) -> absl::Status {
    if (static_cast<int>(sizes.size()) != node->num_outputs()) {
      return absl::InternalError(absl::StrCat(node->Describe(), ": ", sizes.size(),
                                              " split sizes for ", node->num_outputs(),
                                              " outputs"));
    }
    for (int64_t& s : sizes) {
      if (s % rw.n() != 0) {
        return absl::InternalError(
            absl::StrCat(node->Describe(), ": split size ", s, " does not divide by ", rw.n()));
      }
      s /= rw.n();
    }
    return absl::OkStatus();
  };
  if (node->has_attr("split")) {
    std::vector<int64_t> sizes = node->attr_ints("split");
    TPC_RETURN_IF_ERROR(per_rank(sizes));
    node->attrs()["split"] = sizes;
  } else if (ir::Value* sizes = node->optional_input(1)) {
    std::optional<std::vector<int64_t>> v = KnownInts(sizes);
    if (!v) {
      return absl::UnimplementedError(absl::StrCat(node->Describe(), ": split sizes unknown"));
    }
    TPC_RETURN_IF_ERROR(per_rank(*v));
    node->SetInput(1, rw.Int64s(sizes->name() + "/per_rank", *v));
  }
  return absl::OkStatus();
}

// Reshape's target shape: the split dim's element per rank.
absl::Status ReshapeShapeInput(LocalGraph& rw, ir::Node* node,
                               const std::vector<Placement>& outputs,
                               const std::vector<std::optional<Placement>>&) {
  if (outputs.empty() || outputs[0].kind != Placement::Kind::kShard) return absl::OkStatus();
  node->SetInput(1,
                 DivideElement(rw, node, node->input(1), outputs[0].dim, outputs[0].Parts(rw.n())));
  return absl::OkStatus();
}

// A Slice taking one block of a blocked split: its bounds on that axis are per rank
// (the block's part starts at start/N of this rank's part of the axis).
absl::Status SliceBlockBounds(LocalGraph& rw, ir::Node* node, const std::vector<Placement>&,
                              const std::vector<std::optional<Placement>>& inputs) {
  if (inputs.empty() || !inputs[0] || inputs[0]->kind != Placement::Kind::kShard ||
      inputs[0]->blocks <= 1) {
    return absl::OkStatus();
  }
  // Which entry of the bounds is the split axis (the types are per rank by now).
  const int64_t axis = inputs[0]->dim;
  const int64_t rank = node->input(0)->type().rank();
  const auto starts = KnownInts(node->input(1));
  const auto ends = KnownInts(node->input(2));
  std::optional<size_t> index;
  if (node->optional_input(3) != nullptr) {
    const auto axes = KnownInts(node->input(3));
    if (!axes) {
      return absl::InternalError(absl::StrCat(node->Describe(), ": axes of the slice unknown"));
    }
    for (size_t i = 0; i < axes->size(); ++i) {
      if (NormalizeAxis((*axes)[i], rank) == axis) index = i;
    }
  } else if (starts && static_cast<size_t>(axis) < starts->size()) {
    index = static_cast<size_t>(axis);
  }
  // The slice leaves the split axis whole (falcon's grouped QKV: it slices the group's
  // entries while the head dim is split in blocks).
  if (!index && (starts || node->optional_input(3) != nullptr)) return absl::OkStatus();
  if (!index || !starts || !ends || *index >= starts->size() || *index >= ends->size()) {
    return absl::InternalError(
        absl::StrCat(node->Describe(), ": bounds of the split axis unknown"));
  }
  const int64_t whole = (*node->input(0)->type().shape)[static_cast<size_t>(axis)].value() * rw.n();
  for (int i : {1, 2}) {
    ir::Value* bounds = node->input(i);
    std::vector<int64_t> v = i == 1 ? *starts : *ends;
    int64_t& e = v[*index];
    if (e >= whole) continue;  // an end past the whole axis (INT64_MAX) is still past
    e /= rw.n();
    node->SetInput(i, rw.Int64s(bounds->name() + "/per_rank", v));
  }
  return absl::OkStatus();
}

// Expand's shape (aligned to the output's trailing dims).
absl::Status ExpandShapeInput(LocalGraph& rw, ir::Node* node, const std::vector<Placement>& outputs,
                              const std::vector<std::optional<Placement>>&) {
  if (outputs.empty() || outputs[0].kind != Placement::Kind::kShard) return absl::OkStatus();
  const int64_t d = outputs[0].dim;
  const int64_t out_rank = node->output(0)->type().rank();
  ir::Value* shape = node->input(1);
  const int64_t len =
      shape->type().shape && !shape->type().shape->empty() && (*shape->type().shape)[0].is_static()
          ? (*shape->type().shape)[0].value()
          : out_rank;
  const int64_t index = d - (out_rank - len);
  if (index >= 0) {
    node->SetInput(1, DivideElement(rw, node, shape, index, outputs[0].Parts(rw.n())));
  }
  return absl::OkStatus();
}

}  // namespace tpc::shard::rules
