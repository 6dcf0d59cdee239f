// Fused projections cut into parts of unequal sizes: a grouped-query fused QKV
// (`qkv_proj` sliced into H query heads and fewer K and V heads, Phi-3's
// `qkv[..., :q_pos]`), multi-query attention's `split((hidden, 2 * kv), dim=2)`.
//
// Parts of equal sizes keep their one GEMM: its output is a blocked split S(d/k) and
// each Slice or Split output takes its part (shape_ops.cc). Unequal parts cannot share
// one placement, so the projection becomes one projection per part, each reading its
// columns of the weight (and of the bias): exactly what the model would be with
// separate q/k/v weights. The solver then splits each part its own way (query heads
// split, K/V heads split or replicated).
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules.h"
#include "tpc/shard/canonicalize.h"
#include "tpc/util/status_macros.h"

namespace tpc::shard {
namespace {

// One part: the value that holds it (a Slice's or Split's output; null for the parts of
// a packed QKV that GroupQueryAttention reads whole) and its columns.
struct Part {
  ir::Value* value;
  int64_t begin;
  int64_t end;
};

// The columns [begin, end) a Slice takes of the last axis of its input, when that is
// all it does (constant bounds, step 1, every other axis whole).
std::optional<Part> SlicePart(const ir::Node& slice, int64_t width) {
  const ir::Value* in = slice.input(0);
  const int64_t rank = in->type().rank();
  if (slice.num_inputs() < 3 || rank < 1) return std::nullopt;
  auto starts = KnownInts(slice.input(1));
  auto ends = KnownInts(slice.input(2));
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  if (const ir::Value* axes = slice.optional_input(3)) {
    auto a = KnownInts(axes);
    if (!a || a->size() != 1 || rules::NormalizeAxis((*a)[0], rank) != rank - 1) {
      return std::nullopt;
    }
  } else if (rank != 1) {
    return std::nullopt;
  }
  if (const ir::Value* steps = slice.optional_input(4)) {
    auto s = KnownInts(steps);
    if (!s || s->size() != 1 || (*s)[0] != 1) return std::nullopt;
  }
  auto clamp = [width](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + width : v, 0, width); };
  const int64_t begin = clamp((*starts)[0]);
  const int64_t end = clamp((*ends)[0]);
  if (end <= begin) return std::nullopt;
  return Part{slice.output(0), begin, end};
}

// The parts a Split of the last axis makes, when its sizes are known.
std::optional<std::vector<Part>> SplitParts(const ir::Node& split, int64_t width) {
  const int64_t rank = split.input(0)->type().rank();
  if (rules::NormalizeAxis(split.attr_int("axis", 0), rank) != rank - 1) return std::nullopt;
  std::vector<int64_t> sizes;
  if (split.has_attr("split")) {
    sizes = split.attr_ints("split");
  } else if (const ir::Value* s = split.optional_input(1)) {
    auto known = KnownInts(s);
    if (!known) return std::nullopt;
    sizes = *known;
  } else {
    return std::nullopt;  // equal parts: the blocked split handles them
  }
  if (static_cast<int>(sizes.size()) != split.num_outputs()) return std::nullopt;
  std::vector<Part> parts;
  int64_t at = 0;
  for (int o = 0; o < split.num_outputs(); ++o) {
    parts.push_back({split.output(o), at, at + sizes[static_cast<size_t>(o)]});
    at += sizes[static_cast<size_t>(o)];
  }
  if (at != width) return std::nullopt;
  return parts;
}

// Columns [begin, end) of a 2-D tensor (`columns`), or rows [begin, end) (`!columns`).
ir::Tensor SliceMatrix(const ir::Tensor& t, int64_t begin, int64_t end, bool columns) {
  const int64_t rows = t.shape()[0];
  const int64_t cols = t.shape()[1];
  const size_t elem = static_cast<size_t>(ir::DTypeSize(t.dtype()));
  std::string bytes;
  if (columns) {
    bytes.resize(static_cast<size_t>(rows * (end - begin)) * elem);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(bytes.data() + static_cast<size_t>(r * (end - begin)) * elem,
                  t.data() + static_cast<size_t>(r * cols + begin) * elem,
                  static_cast<size_t>(end - begin) * elem);
    }
    return ir::Tensor::FromBytes(t.dtype(), {rows, end - begin}, std::move(bytes));
  }
  bytes.assign(reinterpret_cast<const char*>(t.data()) + static_cast<size_t>(begin * cols) * elem,
               static_cast<size_t>((end - begin) * cols) * elem);
  return ir::Tensor::FromBytes(t.dtype(), {end - begin, cols}, std::move(bytes));
}

ir::Tensor SliceVector(const ir::Tensor& t, int64_t begin, int64_t end) {
  const size_t elem = static_cast<size_t>(ir::DTypeSize(t.dtype()));
  std::string bytes(reinterpret_cast<const char*>(t.data()) + static_cast<size_t>(begin) * elem,
                    static_cast<size_t>(end - begin) * elem);
  return ir::Tensor::FromBytes(t.dtype(), {end - begin}, std::move(bytes));
}

const ir::Tensor* ConstantData(const ir::Value* v) {
  if (v == nullptr || v->producer()->kind() != ir::NodeKind::kConstant) return nullptr;
  const ir::Tensor& t = v->producer()->tensor();
  return t.has_data() ? &t : nullptr;
}

std::optional<ir::Tensor> SliceRows(const ir::Tensor& t, int64_t begin, int64_t end, int64_t n);

// A MatMulNBits of `n` output features whose weight, scales, zero points and bias are
// constants of n rows each (no g_idx): it can be cut into projections of fewer features.
bool NBitsByRows(const ir::Node& proj, int64_t n) {
  if (proj.domain() != "com.microsoft" || proj.op_type() != "MatMulNBits" ||
      proj.attr_int("N", 0) != n) {
    return false;
  }
  for (int i = 1; i < proj.num_inputs(); ++i) {
    if (proj.optional_input(i) == nullptr) continue;
    const ir::Tensor* t = ConstantData(proj.input(i));
    if (i == 4 || t == nullptr || !SliceRows(*t, 0, 1, n)) return false;  // g_idx
  }
  return true;
}

// The projection `proj` (MatMul or Gemm with a constant weight, or a MatMulNBits whose
// constants split by rows), its optional bias Add, and the parts its output is cut into;
// empty when it is not such a projection or its parts are equal (left to the blocked
// split).
struct Fused {
  ir::Node* proj = nullptr;
  // com.microsoft::GroupQueryAttention reading the projection as a packed QKV: the parts
  // become its separate query, key and value inputs.
  ir::Node* gqa = nullptr;
  ir::Node* bias_add = nullptr;  // Add(y, b) with b constant [width]
  const ir::Tensor* bias = nullptr;
  std::vector<Part> parts;
  std::vector<ir::Node*> cutters;  // the Slices / Split
};

std::optional<Fused> Match(ir::Node* proj) {
  if (!proj->is_call()) return std::nullopt;
  ir::Value* y = proj->output(0);
  if (!y->type().shape || y->type().rank() < 1) return std::nullopt;
  const ir::Dim& last = y->type().shape->back();
  if (!last.is_static()) return std::nullopt;
  const int64_t width = last.value();
  const bool nbits = NBitsByRows(*proj, width);
  const bool gemm = proj->domain().empty() && proj->op_type() == "Gemm";
  if (!nbits && !(proj->domain().empty() && proj->op_type() == "MatMul") && !gemm) {
    return std::nullopt;
  }
  if (!nbits) {
    const ir::Tensor* w = ConstantData(proj->input(1));
    if (w == nullptr || w->shape().size() != 2) return std::nullopt;
  }
  if (gemm && proj->optional_input(2) != nullptr) {
    const ir::Tensor* c = ConstantData(proj->input(2));
    if (c == nullptr || !(c->num_elements() == 1 || c->shape().size() == 1)) return std::nullopt;
  }
  Fused f;
  f.proj = proj;
  ir::Value* cut = y;
  // A bias added on its own (the legacy exporter's Linear with bias): cut after it.
  if (!nbits && y->uses().size() == 1) {
    ir::Node* add = y->uses()[0].user;
    if (add->is_call() && add->domain().empty() && add->op_type() == "Add") {
      const ir::Value* other = add->input(1 - y->uses()[0].index);
      const ir::Tensor* b = ConstantData(other);
      if (b != nullptr && b->shape() == std::vector<int64_t>{width}) {
        f.bias_add = add;
        f.bias = b;
        cut = add->output(0);
      }
    }
  }
  for (const ir::Use& use : cut->uses()) {
    ir::Node* c = use.user;
    if (!c->is_call() || !c->domain().empty() || use.index != 0) return std::nullopt;
    if (c->op_type() == "Slice") {
      auto p = SlicePart(*c, width);
      if (!p) return std::nullopt;
      f.parts.push_back(*p);
    } else if (c->op_type() == "Split") {
      auto ps = SplitParts(*c, width);
      if (!ps) return std::nullopt;
      f.parts.insert(f.parts.end(), ps->begin(), ps->end());
    } else {
      return std::nullopt;
    }
    f.cutters.push_back(c);
  }
  if (f.parts.size() < 2) return std::nullopt;
  bool equal = true;
  for (const Part& p : f.parts)
    equal = equal && p.end - p.begin == f.parts[0].end - f.parts[0].begin;
  if (equal) return std::nullopt;
  return f;
}

// Rows [begin, end) of a constant holding `n` equal rows (dim 0 of size n, or a 1-D
// tensor of n · k elements): MatMulNBits' B, scales, zero points and bias by output feature.
std::optional<ir::Tensor> SliceRows(const ir::Tensor& t, int64_t begin, int64_t end, int64_t n) {
  if (n <= 0 || t.num_elements() % n != 0) return std::nullopt;
  std::vector<int64_t> shape = t.shape();
  if (shape.empty() || (shape.size() > 1 && shape[0] != n)) return std::nullopt;
  const int64_t row_bytes = static_cast<int64_t>(t.nbytes()) / n;
  shape[0] = shape.size() > 1 ? end - begin : (end - begin) * (t.num_elements() / n);
  std::string bytes(reinterpret_cast<const char*>(t.data()) + begin * row_bytes,
                    static_cast<size_t>((end - begin) * row_bytes));
  return ir::Tensor::FromBytes(t.dtype(), shape, std::move(bytes));
}

// onnxruntime-genai's attention: a GroupQueryAttention whose query input is the packed
// [q | k | v] of one projection (MatMul with a constant weight, or MatMulNBits) and whose
// key and value inputs are absent.
std::optional<Fused> MatchPackedGqa(ir::Node* gqa) {
  if (!gqa->is_call() || gqa->domain() != "com.microsoft" ||
      gqa->op_type() != "GroupQueryAttention" || gqa->optional_input(1) != nullptr ||
      gqa->optional_input(2) != nullptr) {
    return std::nullopt;
  }
  ir::Value* qkv = gqa->input(0);
  if (qkv->uses().size() != 1 || !qkv->type().shape || qkv->type().rank() != 3) return std::nullopt;
  ir::Node* proj = qkv->producer();
  if (!proj->is_call()) return std::nullopt;
  const bool nbits = proj->domain() == "com.microsoft" && proj->op_type() == "MatMulNBits";
  const bool matmul = proj->domain().empty() && proj->op_type() == "MatMul";
  if (!nbits && !matmul) return std::nullopt;
  const int64_t heads = gqa->attr_int("num_heads", 0), kv = gqa->attr_int("kv_num_heads", 0);
  const ir::Dim& last = qkv->type().shape->back();
  if (heads <= 0 || kv <= 0 || !last.is_static() || last.value() % (heads + 2 * kv) != 0) {
    return std::nullopt;
  }
  if (matmul) {
    const ir::Tensor* w = ConstantData(proj->input(1));
    if (w == nullptr || w->shape().size() != 2) return std::nullopt;
  } else if (!NBitsByRows(*proj, last.value())) {
    return std::nullopt;
  }
  const int64_t d = last.value() / (heads + 2 * kv);
  Fused f;
  f.proj = proj;
  f.gqa = gqa;
  f.parts = {{nullptr, 0, heads * d},
             {nullptr, heads * d, (heads + kv) * d},
             {nullptr, (heads + kv) * d, (heads + 2 * kv) * d}};
  return f;
}

// Erases `dead` (the cutters, a bias Add, the fused projection) and the constants only
// they read, then gives each part value the name of the cutter's output it replaced.
void EraseReplaced(ir::Graph& graph, const std::vector<ir::Node*>& dead,
                   const std::vector<std::pair<ir::Value*, std::string>>& renames) {
  std::vector<ir::Node*> constants;
  for (ir::Node* d : dead) {
    for (ir::Value* in : d->inputs()) {
      if (in != nullptr && in->producer()->kind() == ir::NodeKind::kConstant) {
        constants.push_back(in->producer());
      }
    }
  }
  for (ir::Node* d : dead) graph.Erase(d);
  for (const auto& [value, name] : renames) graph.RenameValue(value, name);
  std::sort(constants.begin(), constants.end());
  constants.erase(std::unique(constants.begin(), constants.end()), constants.end());
  for (ir::Node* c : constants) {
    if (!c->output(0)->has_uses()) graph.Erase(c);
  }
}

// The projection of `f` (MatMulNBits) as one projection per part, each with its rows of
// the packed weight, scales, zero points and bias: GroupQueryAttention's inputs (a packed
// QKV), or the values of the Slices / Split that cut it, which take their names.
void UnfuseNBits(ir::Graph& graph, const Fused& f) {
  ir::Node* proj = f.proj;
  const int64_t n = proj->attr_int("N", 0);
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (size_t i = 0; i < f.parts.size(); ++i) {
    const Part& p = f.parts[i];
    const std::string suffix = absl::StrCat("/rows_", p.begin, "_", p.end);
    std::vector<ir::Value*> inputs = {proj->input(0)};
    for (int k = 1; k < proj->num_inputs(); ++k) {
      ir::Value* in = proj->optional_input(k);
      if (in == nullptr) {
        inputs.push_back(nullptr);
        continue;
      }
      auto rows = SliceRows(in->producer()->tensor(), p.begin, p.end, n);
      TPC_CHECK(rows.has_value());
      inputs.push_back(
          graph.InsertConstantBefore(proj, graph.UniqueName(in->name() + suffix), *rows));
    }
    ir::Attributes attrs = proj->attrs();
    attrs["N"] = p.end - p.begin;
    ir::Node* np = graph.InsertCallBefore(proj, proj->domain(), proj->op_type(), inputs,
                                          {graph.UniqueName(proj->output(0)->name() + suffix)},
                                          attrs, absl::StrCat(proj->name(), "/part", i));
    ir::TensorType t = proj->output(0)->type();
    t.shape->back() = ir::Dim(p.end - p.begin);
    np->output(0)->set_type(p.value != nullptr ? p.value->type() : t);
    if (p.value == nullptr) {
      f.gqa->SetInput(static_cast<int>(i), np->output(0));
    } else {
      p.value->ReplaceAllUsesWith(np->output(0));
      renames.emplace_back(np->output(0), p.value->name());
    }
  }
  std::vector<ir::Node*> dead = f.cutters;
  dead.push_back(proj);
  EraseReplaced(graph, dead, renames);
}

void Unfuse(ir::Graph& graph, const Fused& f) {
  if (f.proj->op_type() == "MatMulNBits") {
    UnfuseNBits(graph, f);
    return;
  }
  ir::Node* proj = f.proj;
  const bool gemm = proj->op_type() == "Gemm";
  const bool trans_b = gemm && proj->attr_int("transB", 0) != 0;
  const ir::Tensor& w = proj->input(1)->producer()->tensor();
  const std::string w_name = proj->input(1)->name();
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (size_t i = 0; i < f.parts.size(); ++i) {
    const Part& p = f.parts[i];
    const std::string suffix = absl::StrCat("/cols_", p.begin, "_", p.end);
    ir::Value* wp = graph.InsertConstantBefore(proj, graph.UniqueName(w_name + suffix),
                                               SliceMatrix(w, p.begin, p.end, !trans_b));
    std::vector<ir::Value*> inputs = {proj->input(0), wp};
    if (gemm && proj->optional_input(2) != nullptr) {
      const ir::Tensor& c = proj->input(2)->producer()->tensor();
      // A bias broadcast to every column stays whole; a per-column one is sliced.
      inputs.push_back(
          c.num_elements() == 1
              ? proj->input(2)
              : graph.InsertConstantBefore(proj, graph.UniqueName(proj->input(2)->name() + suffix),
                                           SliceVector(c, p.begin, p.end)));
    }
    const std::string node_name = absl::StrCat(proj->name(), "/part", i);
    const std::string base =
        p.value != nullptr ? p.value->name() : proj->output(0)->name() + suffix;
    ir::Node* np =
        graph.InsertCallBefore(proj, "", proj->op_type(), inputs,
                               {graph.UniqueName(base + "/proj")}, proj->attrs(), node_name);
    ir::Value* out = np->output(0);
    ir::TensorType part_type = proj->output(0)->type();
    part_type.shape->back() = ir::Dim(p.end - p.begin);
    out->set_type(p.value != nullptr ? p.value->type() : part_type);
    if (f.bias_add != nullptr) {
      ir::Value* bp =
          graph.InsertConstantBefore(proj, graph.UniqueName(f.bias_add->input(1)->name() + suffix),
                                     SliceVector(*f.bias, p.begin, p.end));
      ir::Node* add = graph.InsertCallBefore(proj, "", "Add", {out, bp},
                                             {graph.UniqueName(p.value->name() + "/bias")}, {},
                                             absl::StrCat(f.bias_add->name(), "/part", i));
      add->output(0)->set_type(out->type());
      out = add->output(0);
    }
    if (p.value == nullptr) {  // a packed QKV's part: GroupQueryAttention's input i
      f.gqa->SetInput(static_cast<int>(i), out);
      continue;
    }
    p.value->ReplaceAllUsesWith(out);
    renames.emplace_back(out, p.value->name());
  }
  // The cutters, the bias Add and the fused projection are dead now (and the constants
  // only they read); the part values take the names the cutters' outputs had.
  std::vector<ir::Node*> dead = f.cutters;
  if (f.bias_add != nullptr) dead.push_back(f.bias_add);
  dead.push_back(proj);
  EraseReplaced(graph, dead, renames);
}

}  // namespace

int SplitFusedProjections(ir::Graph& graph, const Constraints& constraints,
                          std::vector<std::string>* notes) {
  // Found first, rewritten after: a rewrite erases nodes later in the graph (the cutters).
  std::vector<Fused> found;
  for (ir::Node* n : graph.NodeVector()) {
    auto f = Match(n);
    if (!f) f = MatchPackedGqa(n);
    if (!f) continue;
    std::vector<const ir::Node*> nodes = {f->proj};
    if (f->bias_add != nullptr) nodes.push_back(f->bias_add);
    if (f->gqa != nullptr) nodes.push_back(f->gqa);
    nodes.insert(nodes.end(), f->cutters.begin(), f->cutters.end());
    if (rules::Constrains(constraints, nodes)) continue;
    found.push_back(std::move(*f));
  }
  for (const Fused& f : found) {
    if (notes != nullptr) {
      std::vector<std::string> widths;
      for (const Part& p : f.parts) widths.push_back(std::to_string(p.end - p.begin));
      notes->push_back(absl::StrCat(
          "'", f.proj->name(), "' is cut into unequal parts (", absl::StrJoin(widths, ", "),
          f.gqa != nullptr ? " columns, a packed QKV GroupQueryAttention reads)" : " columns)",
          ": one projection per part"));
    }
    Unfuse(graph, f);
  }
  return static_cast<int>(found.size());
}

}  // namespace tpc::shard
