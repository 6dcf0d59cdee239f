#include "subgraph_names.h"

#include "absl/container/flat_hash_set.h"

namespace tpc::onnx::internal {
namespace {

// The names defined in `g` itself: its inputs, initializers and node outputs.
absl::flat_hash_set<std::string> Defined(const ::onnx::GraphProto& g) {
  absl::flat_hash_set<std::string> defined;
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) defined.insert(o);
  }
  return defined;
}

// Calls f on every reference to a name not defined in `g` (or in an enclosing subgraph
// between `g` and the scope asked about, `inner`), mutable in place.
void Walk(::onnx::GraphProto* g, const absl::flat_hash_set<std::string>& inner,
          const std::function<void(std::string*)>& f) {
  absl::flat_hash_set<std::string> defined = Defined(*g);
  defined.insert(inner.begin(), inner.end());
  auto visit = [&](std::string* name) {
    if (!name->empty() && !defined.contains(*name)) f(name);
  };
  for (auto& n : *g->mutable_node()) {
    for (auto& in : *n.mutable_input()) visit(&in);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) Walk(a.mutable_g(), defined, f);
      for (auto& sub : *a.mutable_graphs()) Walk(&sub, defined, f);
    }
  }
  for (auto& o : *g->mutable_output()) visit(o.mutable_name());
}

}  // namespace

std::vector<std::string> OuterNames(const ::onnx::GraphProto& g) {
  ::onnx::GraphProto copy = g;
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  Walk(&copy, {}, [&](std::string* name) {
    if (seen.insert(*name).second) names.push_back(*name);
  });
  return names;
}

void RenameOuterNames(::onnx::GraphProto* g,
                      const std::function<std::string(const std::string&)>& rename) {
  Walk(g, {}, [&](std::string* name) { *name = rename(*name); });
}

}  // namespace tpc::onnx::internal
