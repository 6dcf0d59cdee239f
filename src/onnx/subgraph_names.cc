#include "subgraph_names.h"

#include "absl/container/flat_hash_map.h"
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

// The parts of a graph Walk reads, through const or mutable protos alike.
auto& Nodes(::onnx::GraphProto& g) { return *g.mutable_node(); }
const auto& Nodes(const ::onnx::GraphProto& g) { return g.node(); }
auto& Inputs(::onnx::NodeProto& n) { return *n.mutable_input(); }
const auto& Inputs(const ::onnx::NodeProto& n) { return n.input(); }
auto& Attributes(::onnx::NodeProto& n) { return *n.mutable_attribute(); }
const auto& Attributes(const ::onnx::NodeProto& n) { return n.attribute(); }
auto& Graph(::onnx::AttributeProto& a) { return *a.mutable_g(); }
const auto& Graph(const ::onnx::AttributeProto& a) { return a.g(); }
auto& Graphs(::onnx::AttributeProto& a) { return *a.mutable_graphs(); }
const auto& Graphs(const ::onnx::AttributeProto& a) { return a.graphs(); }
auto& Outputs(::onnx::GraphProto& g) { return *g.mutable_output(); }
const auto& Outputs(const ::onnx::GraphProto& g) { return g.output(); }
std::string& Name(::onnx::ValueInfoProto& v) { return *v.mutable_name(); }
const std::string& Name(const ::onnx::ValueInfoProto& v) { return v.name(); }

// Calls f on every reference in `g` (a GraphProto, const or not) to a name defined neither
// in `g` nor in `inner` (the subgraphs between `g` and the scope asked about).
template <typename GraphProto, typename F>
void Walk(GraphProto& g, const absl::flat_hash_set<std::string>& inner, const F& f) {
  absl::flat_hash_set<std::string> defined = Defined(g);
  defined.insert(inner.begin(), inner.end());
  auto visit = [&](auto& name) {
    if (!name.empty() && !defined.contains(name)) f(name);
  };
  for (auto& n : Nodes(g)) {
    for (auto& in : Inputs(n)) visit(in);
    for (auto& a : Attributes(n)) {
      if (a.has_g()) Walk(Graph(a), defined, f);
      for (auto& sub : Graphs(a)) Walk(sub, defined, f);
    }
  }
  for (auto& o : Outputs(g)) visit(Name(o));
}

}  // namespace

std::vector<std::string> OuterNames(const ::onnx::GraphProto& g) {
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  Walk(g, {}, [&](const std::string& name) {
    if (seen.insert(name).second) names.push_back(name);
  });
  return names;
}

std::vector<std::string> SubgraphReads(const ::onnx::NodeProto& node) {
  std::vector<std::string> reads;
  for (const auto& a : node.attribute()) {
    std::vector<const ::onnx::GraphProto*> graphs;
    if (a.has_g()) graphs.push_back(&a.g());
    for (const auto& g : a.graphs()) graphs.push_back(&g);
    for (const ::onnx::GraphProto* g : graphs) {
      std::vector<std::string> outer = OuterNames(*g);
      reads.insert(reads.end(), outer.begin(), outer.end());
    }
  }
  return reads;
}

void RenameOuterNames(::onnx::GraphProto* g,
                      const std::function<std::string(const std::string&)>& rename) {
  Walk(*g, {}, [&](std::string& name) { name = rename(name); });
}

void RenameDefinedNames(::onnx::GraphProto* g,
                        const std::function<std::string(const std::string&)>& fresh) {
  absl::flat_hash_map<std::string, std::string> renamed;
  auto define = [&](std::string* name) {
    if (name->empty()) return;
    auto [it, added] = renamed.emplace(*name, "");
    if (added) it->second = fresh(*name);
    *name = it->second;
  };
  for (auto& t : *g->mutable_initializer()) define(t.mutable_name());
  for (auto& n : *g->mutable_node()) {
    for (auto& o : *n.mutable_output()) define(&o);
  }
  auto read = [&](std::string& name) {
    auto it = renamed.find(name);
    if (it != renamed.end()) name = it->second;
  };
  for (auto& n : *g->mutable_node()) {
    for (auto& in : *n.mutable_input()) read(in);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) Walk(*a.mutable_g(), {}, read);
      for (auto& sub : *a.mutable_graphs()) Walk(sub, {}, read);
    }
  }
  for (auto& o : *g->mutable_output()) read(*o.mutable_name());
}

}  // namespace tpc::onnx::internal
