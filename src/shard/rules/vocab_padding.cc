// A vocabulary N does not divide (GPT-2's 50257) is padded to a multiple of N, as
// Megatron pads it: the embedding table gets zero rows, the LM head zero columns. The
// solver can then split both by vocab (a vocab-parallel lookup, and logits split by
// vocab and gathered once) instead of splitting the hidden dim and all-reducing the
// whole [batch, seq, vocab] logits, the largest collective of such a plan.
//
// The padding never shows: the head's padded logits are sliced back to the vocabulary
// right after the product, and the lookup's ids are checked against the true
// vocabulary first (an id in the padding is the same error the unpadded model gives).
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"
#include "tpc/shard/canonicalize.h"

namespace tpc::shard {
namespace {

// A dim is padded only when it is large next to N (the padding is at most 1/64 of it).
constexpr int64_t kMinDimPerRank = 64;

// How one consumer reads the weight: the dim it treats as the vocabulary.
struct VocabUse {
  ir::Node* node;
  int64_t dim;  // 0: table rows (Gather) or Gemm transB rows; 1: MatMul / Gemm columns
};

// The vocab dim of every use of `w`, when all uses are lookups or products that agree.
std::optional<std::vector<VocabUse>> VocabUses(const ir::Value* w) {
  std::vector<VocabUse> uses;
  for (const ir::Use& use : w->uses()) {
    ir::Node* n = use.user;
    if (!n->is_call() || !n->domain().empty()) return std::nullopt;
    const std::string& op = n->op_type();
    if (op == "Gather" && use.index == 0 && rules::NormalizeAxis(n->attr_int("axis", 0), 2) == 0) {
      uses.push_back({n, 0});
    } else if (op == "MatMul" && use.index == 1) {
      uses.push_back({n, 1});
    } else if (op == "Gemm" && use.index == 1 && n->optional_input(2) == nullptr &&
               n->attr_int("transA", 0) == 0) {
      uses.push_back({n, n->attr_int("transB", 0) != 0 ? 0 : 1});
    } else {
      return std::nullopt;
    }
  }
  if (uses.empty()) return std::nullopt;
  for (const VocabUse& u : uses) {
    // A table's rows and a head's output columns: one dim for every use (a tied weight
    // read both ways is stored twice by the exporters, each copy padded on its own).
    if (u.dim != uses[0].dim) return std::nullopt;
  }
  return uses;
}

// `t` with zeros appended to `dim` up to `size`.
ir::Tensor PadMatrix(const ir::Tensor& t, int64_t dim, int64_t size) {
  const int64_t rows = t.shape()[0];
  const int64_t cols = t.shape()[1];
  const size_t elem = static_cast<size_t>(ir::DTypeSize(t.dtype()));
  const int64_t new_rows = dim == 0 ? size : rows;
  const int64_t new_cols = dim == 1 ? size : cols;
  std::string bytes(static_cast<size_t>(new_rows * new_cols) * elem, '\0');
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(bytes.data() + static_cast<size_t>(r * new_cols) * elem,
                t.data() + static_cast<size_t>(r * cols) * elem, static_cast<size_t>(cols) * elem);
  }
  return ir::Tensor::FromBytes(t.dtype(), {new_rows, new_cols}, std::move(bytes));
}

void Pad(ir::Graph& graph, ir::Node* w, const std::vector<VocabUse>& uses, int64_t vocab,
         int64_t padded) {
  const ir::Tensor& t = w->tensor();
  const int64_t dim = uses[0].dim;
  ir::Value* wp =
      graph.InsertConstantBefore(w, graph.UniqueName(absl::StrCat(w->output(0)->name(), "/padded")),
                                 PadMatrix(t, dim, padded));
  for (const VocabUse& u : uses) {
    ir::Node* n = u.node;
    if (n->op_type() == "Gather") {
      // Ids checked (and normalised: -1 is the last real row) against the vocabulary.
      ir::Value* ids = n->input(1);
      ir::Node* check =
          graph.InsertCallBefore(n, LocalGraph::kTpcDomain, "CheckIndices", {ids},
                                 {graph.UniqueName(ids->name() + "/checked")},
                                 {{"dim", vocab}, {"wrap", int64_t{1}}, {"source", n->Describe()}},
                                 graph.UniqueName(n->name() + "/check_ids"));
      check->output(0)->set_type(ids->type());
      graph.opsets()[LocalGraph::kTpcDomain] = LocalGraph::kTpcOpsetVersion;
      n->SetInput(1, check->output(0));
      n->SetInput(0, wp);
      continue;
    }
    // A product: padded logits, sliced back to the vocabulary at once.
    ir::Value* y = n->output(0);
    ir::TensorType padded_type = y->type();
    padded_type.shape->back() = ir::Dim(padded);
    const std::string base = y->name();
    ir::Node* product =
        graph.InsertCallBefore(n, "", n->op_type(), {n->input(0), wp},
                               {graph.UniqueName(base + "/padded")}, n->attrs(), n->name());
    product->output(0)->set_type(padded_type);
    auto ints = [&](const std::string& suffix, int64_t v) {
      return graph.InsertConstantBefore(n, graph.UniqueName(base + suffix),
                                        ir::Tensor::FromInt64({1}, {v}));
    };
    ir::Node* slice = graph.InsertCallBefore(n, "", "Slice",
                                             {product->output(0), ints("/vocab_start", 0),
                                              ints("/vocab_end", vocab), ints("/vocab_axis", -1)},
                                             {graph.UniqueName(base + "/unpadded")}, {},
                                             graph.UniqueName(n->name() + "/unpad"));
    slice->output(0)->set_type(y->type());
    y->ReplaceAllUsesWith(slice->output(0));
    graph.Erase(n);
    graph.RenameValue(slice->output(0), base);
  }
  graph.Erase(w);
}

}  // namespace

int PadVocabularies(ir::Graph& graph, int64_t n, const Constraints& constraints,
                    std::vector<std::string>* notes) {
  if (n <= 1) return 0;
  // Found first, padded after: padding replaces the products that read a weight.
  struct Found {
    ir::Node* w;
    std::vector<VocabUse> uses;
    int64_t vocab;
  };
  std::vector<Found> found;
  for (ir::Node* w : graph.NodeVector()) {
    if (w->kind() != ir::NodeKind::kConstant) continue;
    const ir::Tensor& t = w->tensor();
    if (!t.has_data() || t.shape().size() != 2 || !ir::IsFloating(t.dtype())) continue;
    auto uses = VocabUses(w->output(0));
    if (!uses) continue;
    const int64_t vocab = t.shape()[static_cast<size_t>((*uses)[0].dim)];
    if (vocab % n == 0 || vocab < kMinDimPerRank * n) continue;
    // A vocabulary (or an MLP width) is at least as wide as the hidden size; a narrower
    // projection (K/V of fewer heads than ranks) is left to its head groups, S(d@g).
    if (vocab < t.shape()[static_cast<size_t>(1 - (*uses)[0].dim)]) continue;
    std::vector<const ir::Node*> nodes = {w};
    for (const VocabUse& u : *uses) nodes.push_back(u.node);
    if (rules::Constrains(constraints, nodes)) continue;
    found.push_back({w, std::move(*uses), vocab});
  }
  for (const Found& f : found) {
    const int64_t padded = (f.vocab + n - 1) / n * n;
    if (notes != nullptr) {
      notes->push_back(absl::StrCat("'", f.w->output(0)->name(), "' is padded from ", f.vocab,
                                    " to ", padded, f.uses[0].dim == 0 ? " rows" : " columns",
                                    " (a multiple of ", n, "; the padding never shows)"));
    }
    Pad(graph, f.w, f.uses, f.vocab, padded);
  }
  return static_cast<int>(found.size());
}

}  // namespace tpc::shard
