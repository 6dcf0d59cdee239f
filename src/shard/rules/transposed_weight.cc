// A product with the transpose of a weight: GPT-2's LM head reads the embedding table
// transposed, either through a Transpose node (the dynamo exporter) or as a transposed
// copy the legacy exporter's constant folding stored beside the table. Per rank that is
// a transpose every forward, or the table stored twice.
//
// The product becomes a Gemm with transB on the weight itself (through a Reshape to 2-D
// and back when the activation has batch dims): the table is stored once per rank, and
// the GEMM reads it transposed for free.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"
#include "tpc/shard/canonicalize.h"
#include "tpc/shard/tied_weights.h"

namespace tpc::shard {
namespace {

bool IsConstant2D(const ir::Value* v) {
  return v != nullptr && v->producer()->kind() == ir::NodeKind::kConstant &&
         v->producer()->tensor().has_data() && v->type().rank() == 2;
}

// The weight `b` is the transpose of: Transpose(W) of a 2-D constant, or the other half
// of a transposed tied pair. Null when neither.
const ir::Value* TransposedFrom(const ir::Value* b, const std::vector<TiedPair>& tied) {
  const ir::Node* p = b->producer();
  if (p->is_call() && p->domain().empty() && p->op_type() == "Transpose" &&
      IsConstant2D(p->input(0))) {
    const std::vector<int64_t> perm = p->attr_ints("perm");
    if (perm.empty() || perm == std::vector<int64_t>{1, 0}) return p->input(0);
  }
  if (!IsConstant2D(b)) return nullptr;
  for (const TiedPair& t : tied) {
    if (!t.transposed) continue;
    if (t.b == b) return t.a;
    if (t.a == b) return t.b;
  }
  return nullptr;
}

ir::Value* Int64s(ir::Graph& graph, ir::Node* before, const std::string& name,
                  const std::vector<int64_t>& values) {
  ir::Value* v = graph.InsertConstantBefore(
      before, graph.UniqueName(name),
      ir::Tensor::FromInt64({static_cast<int64_t>(values.size())}, values));
  v->set_known_value(std::vector<ir::Dim>(values.begin(), values.end()));
  return v;
}

// y = MatMul(x, Wᵀ) → Gemm(x, W, transB=1), through [-1, K] and back for x of rank > 2.
void Rewrite(ir::Graph& graph, ir::Node* mm, ir::Value* w) {
  ir::Value* x = mm->input(0);
  ir::Value* y = mm->output(0);
  const std::string base = y->name();
  const std::vector<ir::Dim>& xd = *x->type().shape;
  const int64_t rank = static_cast<int64_t>(xd.size());
  ir::Value* a = x;
  if (rank > 2) {
    ir::Dim rows(1);
    for (int64_t d = 0; d + 1 < rank; ++d) rows = rows * xd[static_cast<size_t>(d)];
    ir::Node* flat = graph.InsertCallBefore(
        mm, "", "Reshape", {x, Int64s(graph, mm, base + "/rows_shape", {-1, xd.back().value()})},
        {graph.UniqueName(base + "/rows")}, {}, graph.UniqueName(mm->name() + "/rows"));
    flat->output(0)->set_type(ir::TensorType(x->type().dtype, {rows, xd.back()}));
    a = flat->output(0);
  }
  ir::Node* gemm =
      graph.InsertCallBefore(mm, "", "Gemm", {a, w}, {graph.UniqueName(base + "/gemm")},
                             {{"transB", int64_t{1}}}, mm->name());
  const ir::Dim& cols = y->type().shape->back();
  gemm->output(0)->set_type(ir::TensorType(y->type().dtype, {a->type().shape->at(0), cols}));
  ir::Value* out = gemm->output(0);
  if (rank > 2) {
    // Back to x's leading dims: Concat(Shape(x)[:-1], [cols]).
    ir::Node* shape =
        graph.InsertCallBefore(mm, "", "Shape", {x}, {graph.UniqueName(base + "/x_shape")}, {},
                               graph.UniqueName(mm->name() + "/x_shape"));
    shape->output(0)->set_type(ir::TensorType(ir::DType::kI64, {ir::Dim(rank)}));
    shape->output(0)->set_known_value(xd);
    std::vector<ir::Dim> lead(xd.begin(), xd.end() - 1);
    ir::Node* slice = graph.InsertCallBefore(
        mm, "", "Slice",
        {shape->output(0), Int64s(graph, mm, base + "/lead_start", {0}),
         Int64s(graph, mm, base + "/lead_end", {rank - 1})},
        {graph.UniqueName(base + "/lead")}, {}, graph.UniqueName(mm->name() + "/lead"));
    slice->output(0)->set_type(ir::TensorType(ir::DType::kI64, {ir::Dim(rank - 1)}));
    slice->output(0)->set_known_value(lead);
    ir::Node* target = graph.InsertCallBefore(
        mm, "", "Concat", {slice->output(0), Int64s(graph, mm, base + "/cols", {cols.value()})},
        {graph.UniqueName(base + "/shape")}, {{"axis", int64_t{0}}},
        graph.UniqueName(mm->name() + "/shape"));
    target->output(0)->set_type(ir::TensorType(ir::DType::kI64, {ir::Dim(rank)}));
    target->output(0)->set_known_value(*y->type().shape);
    ir::Node* back = graph.InsertCallBefore(mm, "", "Reshape", {out, target->output(0)},
                                            {graph.UniqueName(base + "/back")}, {},
                                            graph.UniqueName(mm->name() + "/back"));
    back->output(0)->set_type(y->type());
    out = back->output(0);
  }
  y->ReplaceAllUsesWith(out);
  graph.Erase(mm);
  graph.RenameValue(out, base);
}

}  // namespace

int UseTransposedWeights(ir::Graph& graph, const Constraints& constraints,
                         std::vector<std::string>* notes) {
  const std::vector<TiedPair> tied = FindTiedWeights(graph);
  // Found first, rewritten after: the rewrite makes and erases values.
  std::vector<std::pair<ir::Node*, ir::Value*>> found;
  for (ir::Node* mm : graph.NodeVector()) {
    if (!mm->is_call() || !mm->domain().empty() || mm->op_type() != "MatMul") continue;
    ir::Value* x = mm->input(0);
    ir::Value* b = mm->input(1);
    if (!x->type().shape || x->type().rank() < 2 || !x->type().shape->back().is_static() ||
        !mm->output(0)->type().shape || !mm->output(0)->type().shape->back().is_static() ||
        b->type().rank() != 2) {
      continue;
    }
    const ir::Value* w = TransposedFrom(b, tied);
    if (w == nullptr) continue;
    if (rules::Constrains(constraints, {mm, b->producer(), w->producer()})) continue;
    found.emplace_back(mm, const_cast<ir::Value*>(w));
  }
  std::vector<ir::Node*> transposes;
  for (const auto& [mm, w] : found) {
    transposes.push_back(mm->input(1)->producer());
    if (notes != nullptr) {
      notes->push_back(absl::StrCat("'", mm->name(), "' reads '", w->name(),
                                    "' transposed through a Gemm (transB): stored once"));
    }
    Rewrite(graph, mm, w);
  }
  // The transposes (nodes or stored copies) no product reads any more.
  std::sort(transposes.begin(), transposes.end());
  transposes.erase(std::unique(transposes.begin(), transposes.end()), transposes.end());
  for (ir::Node* t : transposes) {
    if (!t->output(0)->has_uses()) graph.Erase(t);
  }
  return static_cast<int>(found.size());
}

}  // namespace tpc::shard
