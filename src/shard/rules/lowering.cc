// Ops whose strategy needs more than their local form: the vocab-parallel embedding
// lookup, softmax, cross-entropy and NLL (Megatron's vocab-parallel layers).
#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::shard::rules {
namespace {

using ir::Placement;

const Placement kR = Placement::Replicate();
const Placement kPartialSum = Placement::Partial(ir::ReduceOp::kSum);

// The per-rank offset of a split class/vocab dim: rank r starts at r·part.
ir::Value* RankStart(LocalGraph& rw, ir::DType dtype, int64_t part) {
  std::vector<double> starts;
  for (int64_t r = 0; r < rw.n(); ++r) starts.push_back(static_cast<double>(r * part));
  return rw.PerRank("tp/rank_start", ir::Tensor::FromDoubles(dtype, {rw.n()}, starts));
}

// Indices into this rank's part of a split dim: (local, in_range) where local =
// ids − start is replaced by 0 outside [0, part).
struct LocalIndices {
  ir::Value* safe;
  ir::Value* in_range;  // bool, the shape of ids
};

// How `node` reads its indices into the whole dim: as Gather does (negative ones count
// from the end) or as class labels (ignore_index allowed).
enum class IndexKind { kGather, kLabel };

// `ids` index the whole dim (part·N) for `node`: first checked and normalized as the
// unsplit op would (an out-of-range id is the same error, naming `node`), then localized.
LocalIndices Localize(LocalGraph& rw, ir::Node* node, ir::Value* ids, int64_t part,
                      IndexKind kind) {
  const ir::TensorType& t = ids->type();
  const ir::TensorType b = WithDType(t, ir::DType::kBool);
  ir::Attributes check = {{"dim", part * rw.n()},
                          {"wrap", int64_t{kind == IndexKind::kGather ? 1 : 0}},
                          {"source", node->Describe()}};
  if (kind == IndexKind::kLabel && node->has_attr("ignore_index"))
    check["ignore_index"] = node->attr_int("ignore_index", 0);
  ids = rw.Op(node, "CheckIndices", {ids}, t, kR, std::move(check), LocalGraph::kTpcDomain);
  ir::Value* local = rw.Op(node, "Sub", {ids, RankStart(rw, t.dtype, part)}, t, kR);
  ir::Value* zero = rw.Scalar("tp/zero", t.dtype, 0);
  ir::Value* ge = rw.Op(node, "GreaterOrEqual", {local, zero}, b, kR);
  ir::Value* lt =
      rw.Op(node, "Less", {local, rw.Scalar("tp/part", t.dtype, static_cast<double>(part))}, b, kR);
  ir::Value* in_range = rw.Op(node, "And", {ge, lt}, b, kR);
  ir::Value* safe = rw.Op(node, "Where", {in_range, local, zero}, t, kR);
  return {safe, in_range};
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

ir::TensorType ScalarOf(ir::DType t) { return ir::TensorType(t, {}); }

// Applies ignore_index and class weights to per-element losses `nll` (shape of
// `labels`), then the reduction. Returns the loss.
ir::Value* ApplyReduction(LocalGraph& rw, ir::Node* node, ir::Value* nll, ir::Value* labels,
                          ir::Value* weights, const Placement& placement) {
  const ir::TensorType& lt = labels->type();
  const ir::TensorType ft = nll->type();
  ir::Value* valid = nullptr;
  if (node->has_attr("ignore_index")) {
    ir::Value* ignore = rw.Scalar("tp/ignore_index", lt.dtype,
                                  static_cast<double>(node->attr_int("ignore_index", 0)));
    ir::Value* eq = rw.Op(node, "Equal", {labels, ignore}, WithDType(lt, ir::DType::kBool), kR);
    valid = rw.Op(node, "Not", {eq}, WithDType(lt, ir::DType::kBool), kR);
  }
  ir::Value* fzero = rw.Scalar("tp/zero", ft.dtype, 0);
  ir::Value* w = nullptr;
  if (weights != nullptr) {
    ir::Value* idx = labels;
    if (valid != nullptr)
      idx = rw.Op(node, "Where", {valid, labels, rw.Scalar("tp/zero", lt.dtype, 0)}, lt, kR);
    w = rw.Op(node, "Gather", {weights, idx}, ft, kR, {{"axis", int64_t{0}}});
    if (valid != nullptr) w = rw.Op(node, "Where", {valid, w, fzero}, ft, kR);
    nll = rw.Op(node, "Mul", {nll, w}, ft, placement);
  } else if (valid != nullptr) {
    nll = rw.Op(node, "Where", {valid, nll, fzero}, ft, placement);
  }
  const std::string reduction = node->attr_string("reduction", "mean");
  if (reduction == "none") return nll;
  ir::Value* sum = rw.Reduce(node, "ReduceSum", nll, {}, false, ScalarOf(ft.dtype), placement);
  if (reduction == "sum") return sum;
  // mean: divided by the total weight of the targets that count.
  ir::Value* den = nullptr;
  if (w != nullptr) {
    den = rw.Reduce(node, "ReduceSum", w, {}, false, ScalarOf(ft.dtype), kR);
  } else if (valid != nullptr) {
    ir::Value* f = rw.Op(node, "Cast", {valid}, WithDType(lt, ft.dtype), kR,
                         {{"to", static_cast<int64_t>(ft.dtype)}});
    den = rw.Reduce(node, "ReduceSum", f, {}, false, ScalarOf(ft.dtype), kR);
  } else {
    ir::Value* ones = rw.Op(node, "Cast", {labels}, WithDType(lt, ft.dtype), kR,
                            {{"to", static_cast<int64_t>(ft.dtype)}});
    ones = rw.Op(node, "Mul", {ones, fzero}, WithDType(lt, ft.dtype), kR);
    ones =
        rw.Op(node, "Add", {ones, rw.Scalar("tp/one", ft.dtype, 1)}, WithDType(lt, ft.dtype), kR);
    den = rw.Reduce(node, "ReduceSum", ones, {}, false, ScalarOf(ft.dtype), kR);
  }
  return rw.Op(node, "Div", {sum, den}, ScalarOf(ft.dtype), placement);
}

}  // namespace

absl::StatusOr<LocalGraph::Replacements> LowerMaskedGather(LocalGraph& rw, ir::Node* node) {
  ir::Value* data = node->input(0);
  ir::Value* ids = node->input(1);
  const ir::Dim& part = (*data->type().shape)[0];
  if (!part.is_static())
    return absl::UnimplementedError("vocab-parallel embedding needs a static vocab size");
  LocalIndices li = Localize(rw, node, ids, part.value(), IndexKind::kGather);
  const ir::TensorType out_type = node->output(0)->type();
  // Gather, or GatherBlockQuantized (its scales and zero points split by rows with the
  // table): the op itself on each rank's rows, at the localized indices.
  std::vector<ir::Value*> inputs = node->inputs();
  inputs[1] = li.safe;
  ir::Attributes attrs = node->attrs();
  if (node->op_type() == "Gather") attrs = {{"axis", int64_t{0}}};
  ir::Value* gathered =
      rw.Op(node, node->op_type(), inputs, out_type, kPartialSum, std::move(attrs), node->domain());
  // Rows of other ranks become zeros: the sum over ranks is the lookup.
  const int64_t ids_rank = ids->type().rank();
  ir::TensorType mask_type = WithDType(out_type, ir::DType::kBool);
  for (int64_t d = ids_rank; d < mask_type.rank(); ++d)
    (*mask_type.shape)[static_cast<size_t>(d)] = ir::Dim(1);
  ir::Value* mask = li.in_range;
  if (mask_type.rank() > ids_rank) {
    mask = rw.Unsqueeze(node, mask, Range(ids_rank, mask_type.rank()), mask_type, kR);
  }
  ir::Value* zero = rw.Scalar("tp/zero", out_type.dtype, 0);
  ir::Value* out = rw.Op(node, "Where", {mask, gathered, zero}, out_type, kPartialSum);
  return rw.Replace(node, {out});
}

absl::StatusOr<LocalGraph::Replacements> LowerVocabParallelSoftmax(LocalGraph& rw, ir::Node* node) {
  ir::Value* x = node->input(0);
  const ir::TensorType t = x->type();
  const int64_t axis = node->attr_int("axis", -1) < 0 ? node->attr_int("axis", -1) + t.rank()
                                                      : node->attr_int("axis", -1);
  const Placement split = Placement::Shard(axis);
  const ir::TensorType row = WithDim(t, axis, ir::Dim(1));
  ir::Value* m =
      rw.Reduce(node, "ReduceMax", x, {axis}, true, row, Placement::Partial(ir::ReduceOp::kMax));
  m = rw.AllReduce(node, m, ir::ReduceOp::kMax);
  ir::Value* shifted = rw.Op(node, "Sub", {x, m}, t, split);
  ir::Value* e = rw.Op(node, "Exp", {shifted}, t, split);
  ir::Value* s = rw.Reduce(node, "ReduceSum", e, {axis}, true, row, kPartialSum);
  s = rw.AllReduce(node, s, ir::ReduceOp::kSum);
  ir::Value* out = node->op_type() == "LogSoftmax"
                       ? rw.Op(node, "Sub", {shifted, rw.Op(node, "Log", {s}, row, kR)}, t, split)
                       : rw.Op(node, "Div", {e, s}, t, split);
  return rw.Replace(node, {out});
}

absl::StatusOr<LocalGraph::Replacements> LowerVocabParallelLoss(LocalGraph& rw, ir::Node* node) {
  ir::Value* scores = node->input(0);
  ir::Value* labels = node->input(1);
  ir::Value* weights = node->optional_input(2);
  const ir::TensorType st = scores->type();
  const ir::Dim part = scores->type().shape->at(1);
  if (!part.is_static())
    return absl::UnimplementedError("vocab-parallel loss needs a static class count");
  const ir::TensorType row = WithDim(st, 1, ir::Dim(1));
  const Placement split = Placement::Shard(1);
  // log-sum-exp over the whole class dim: max, then sum of exponentials.
  ir::Value* m =
      rw.Reduce(node, "ReduceMax", scores, {1}, true, row, Placement::Partial(ir::ReduceOp::kMax));
  m = rw.AllReduce(node, m, ir::ReduceOp::kMax);
  ir::Value* shifted = rw.Op(node, "Sub", {scores, m}, st, split);
  ir::Value* e = rw.Op(node, "Exp", {shifted}, st, split);
  ir::Value* s = rw.Reduce(node, "ReduceSum", e, {1}, true, row, kPartialSum);
  s = rw.AllReduce(node, s, ir::ReduceOp::kSum);
  ir::Value* lse = rw.Op(node, "Log", {s}, row, kR);
  // The target's shifted logit, from the rank that holds it.
  LocalIndices li = Localize(rw, node, labels, part.value(), IndexKind::kLabel);
  const ir::TensorType lt = labels->type();
  ir::TensorType idx_type = lt;
  idx_type.shape->insert(idx_type.shape->begin() + 1, ir::Dim(1));
  ir::Value* idx = rw.Unsqueeze(node, li.safe, {1}, idx_type, kR);
  ir::Value* picked =
      rw.Op(node, "GatherElements", {shifted, idx}, row, kPartialSum, {{"axis", int64_t{1}}});
  ir::Value* in_range =
      rw.Unsqueeze(node, li.in_range, {1}, WithDType(idx_type, ir::DType::kBool), kR);
  picked =
      rw.Op(node, "Where", {in_range, picked, rw.Scalar("tp/zero", st.dtype, 0)}, row, kPartialSum);
  picked = rw.AllReduce(node, picked, ir::ReduceOp::kSum);
  ir::Value* nll = rw.Op(node, "Sub", {lse, picked}, row, kR);
  nll = rw.Squeeze(node, nll, {1}, WithDType(lt, st.dtype), kR);
  std::vector<ir::Value*> outs = {ApplyReduction(rw, node, nll, labels, weights, kR)};
  if (node->num_outputs() > 1) outs.push_back(rw.Op(node, "Sub", {shifted, lse}, st, split));
  return rw.Replace(node, outs);
}

absl::StatusOr<LocalGraph::Replacements> LowerVocabParallelNll(LocalGraph& rw, ir::Node* node) {
  ir::Value* input = node->input(0);
  ir::Value* target = node->input(1);
  ir::Value* weights = node->optional_input(2);
  const ir::TensorType it = input->type();
  const ir::Dim part = input->type().shape->at(1);
  if (!part.is_static())
    return absl::UnimplementedError("vocab-parallel NLL needs a static class count");
  LocalIndices li = Localize(rw, node, target, part.value(), IndexKind::kLabel);
  const ir::TensorType tt = target->type();
  ir::TensorType idx_type = tt;
  idx_type.shape->insert(idx_type.shape->begin() + 1, ir::Dim(1));
  const ir::TensorType row = WithDim(it, 1, ir::Dim(1));
  ir::Value* idx = rw.Unsqueeze(node, li.safe, {1}, idx_type, kR);
  ir::Value* picked =
      rw.Op(node, "GatherElements", {input, idx}, row, kPartialSum, {{"axis", int64_t{1}}});
  picked = rw.Squeeze(node, picked, {1}, WithDType(tt, it.dtype), kPartialSum);
  picked = rw.Op(node, "Where", {li.in_range, picked, rw.Scalar("tp/zero", it.dtype, 0)},
                 WithDType(tt, it.dtype), kPartialSum);
  ir::Value* nll = rw.Op(node, "Neg", {picked}, WithDType(tt, it.dtype), kPartialSum);
  return rw.Replace(node, {ApplyReduction(rw, node, nll, target, weights, kPartialSum)});
}

}  // namespace tpc::shard::rules
