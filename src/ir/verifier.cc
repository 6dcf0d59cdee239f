#include "tpc/ir/verifier.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tpc::ir {
namespace {

absl::Status Fail(const Node* n, std::string_view reason) {
  return absl::FailedPreconditionError(absl::StrCat(n->Describe(), ": ", std::string(reason)));
}

std::string Name(const Value* v) { return absl::StrCat("%", v->name()); }

absl::Status VerifyType(const Node* n, const Value* v) {
  const TensorType& t = v->type();
  if (t.dtype == DType::kUndefined) {
    return Fail(n, absl::StrCat("value ", Name(v), " has an undefined dtype"));
  }
  if (v->sharding()) {
    for (const Placement& p : v->sharding()->placements) {
      if (p.kind != Placement::Kind::kShard) continue;
      if (p.dim < 0 || (t.has_rank() && p.dim >= t.rank())) {
        return Fail(n, absl::StrCat("value ", Name(v), " of type ", t.ToString(),
                                    " is sharded on dim ", p.dim, ", out of range"));
      }
    }
  }
  if (v->known_value() && t.has_rank()) {
    const auto& known = *v->known_value();
    bool ok = t.rank() == 1 || (t.rank() == 0 && known.size() == 1);
    if (ok && t.rank() == 1 && (*t.shape)[0].is_static()) {
      ok = (*t.shape)[0].value() == static_cast<int64_t>(known.size());
    }
    if (!ok) {
      return Fail(n, absl::StrCat("value ", Name(v), " of type ", t.ToString(), " has ",
                                  known.size(), " known elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status VerifyConstant(const Node* n) {
  const Value* v = n->output(0);
  const Tensor& t = n->tensor();
  const TensorType& type = v->type();
  // f32 data typed f16/bf16: a half-precision plan's weight, converted as it is written.
  const bool to_half =
      t.dtype() == DType::kF32 && (type.dtype == DType::kF16 || type.dtype == DType::kBF16);
  if (t.dtype() != type.dtype && !to_half) {
    return Fail(n, absl::StrCat("constant data of dtype ", std::string(DTypeName(t.dtype())),
                                " does not match the type ", type.ToString()));
  }
  // A per-rank constant (sharded S(d) after partitioning) holds the whole data and is
  // typed as one rank's part: dim d of the data is a multiple of dim d of the type.
  int64_t split_dim = -1;
  if (v->sharding() && !v->sharding()->placements.empty() &&
      v->sharding()->placements[0].kind == Placement::Kind::kShard) {
    split_dim = v->sharding()->placements[0].dim;
  }
  bool shape_ok = type.has_rank() && type.rank() == static_cast<int64_t>(t.shape().size());
  for (size_t i = 0; shape_ok && i < t.shape().size(); ++i) {
    const Dim& d = (*type.shape)[i];
    if (static_cast<int64_t>(i) == split_dim && d.is_static() && d.value() > 0) {
      shape_ok = t.shape()[i] % d.value() == 0;
    } else {
      shape_ok = d.is_static() && d.value() == t.shape()[i];
    }
  }
  if (!shape_ok) {
    std::vector<Dim> dims(t.shape().begin(), t.shape().end());
    return Fail(n, absl::StrCat("constant data of shape ", DimsToString(dims),
                                " does not match the type ", type.ToString()));
  }
  for (int64_t d : t.shape()) {
    if (d < 0) return Fail(n, "constant has a negative dim");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyGraph(const Graph& graph) {
  absl::flat_hash_set<const Node*> in_graph;
  for (const Node* n : graph.nodes()) in_graph.insert(n);

  absl::flat_hash_map<std::string, const Value*> names;
  absl::flat_hash_set<const Value*> defined;
  const Node* output_node = nullptr;
  size_t index = 0;
  for (const Node* n : graph.nodes()) {
    ++index;
    if (n->graph() != &graph) return Fail(n, "node belongs to another graph");

    // Kind-specific shape of the node.
    switch (n->kind()) {
      case NodeKind::kPlaceholder:
      case NodeKind::kConstant:
        if (n->num_inputs() != 0 || n->num_outputs() != 1) {
          return Fail(n, absl::StrCat("a ", std::string(NodeKindName(n->kind())),
                                      " must have no inputs and one output"));
        }
        if (n->kind() == NodeKind::kConstant) {
          if (absl::Status s = VerifyConstant(n); !s.ok()) return s;
        }
        break;
      case NodeKind::kCall:
        if (n->op_type().empty()) return Fail(n, "call has an empty op_type");
        break;
      case NodeKind::kOutput:
        if (output_node != nullptr) return Fail(n, "graph has two output nodes");
        output_node = n;
        if (n != graph.output_node()) return Fail(n, "output node is not the graph's");
        if (index != graph.nodes().size()) return Fail(n, "output node is not the last node");
        if (n->num_outputs() != 0) return Fail(n, "output node has outputs");
        break;
    }

    // Inputs: defined earlier in this graph, with matching use entries.
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (v == nullptr) {
        if (n->kind() == NodeKind::kOutput) return Fail(n, absl::StrCat("output ", i, " is empty"));
        continue;
      }
      if (!defined.contains(v)) {
        if (graph.FindValue(v->name()) != v || !in_graph.contains(v->producer())) {
          return Fail(n, absl::StrCat("input ", i, " ", Name(v),
                                      " is not a value of this graph (dangling)"));
        }
        return Fail(n, absl::StrCat("input ", i, " ", Name(v), " is used before its definition"));
      }
      const auto& uses = v->uses();
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(n), i}) == uses.end()) {
        return Fail(n, absl::StrCat("input ", i, " ", Name(v), " is missing from its use list"));
      }
    }

    // Outputs: SSA, unique names, types, use lists.
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Value* v = n->output(i);
      if (v->producer() != n || v->index() != i) {
        return Fail(n, absl::StrCat("output ", i, " ", Name(v), " has a wrong producer"));
      }
      if (v->name().empty()) return Fail(n, absl::StrCat("output ", i, " has an empty name"));
      if (!names.emplace(v->name(), v).second) {
        return Fail(n, absl::StrCat("value ", Name(v), " is defined twice"));
      }
      if (graph.FindValue(v->name()) != v) {
        return Fail(n, absl::StrCat("value ", Name(v), " is not registered in the graph"));
      }
      if (absl::Status s = VerifyType(n, v); !s.ok()) return s;
      for (const Use& u : v->uses()) {
        if (!in_graph.contains(u.user)) {
          return Fail(n, absl::StrCat("value ", Name(v), " has a use outside the graph"));
        }
        if (u.index < 0 || u.index >= u.user->num_inputs() || u.user->input(u.index) != v) {
          return Fail(n, absl::StrCat("value ", Name(v), " has a stale use by ", u.user->Describe(),
                                      " input ", u.index));
        }
      }
      defined.insert(v);
    }
  }
  if (output_node == nullptr) {
    return absl::FailedPreconditionError("graph has no output node");
  }
  return absl::OkStatus();
}

}  // namespace tpc::ir
