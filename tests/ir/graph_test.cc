#include <catch2/catch.hpp>

#include "tpc/ir/graph.h"
#include "tpc/ir/printer.h"
#include "tpc/ir/verifier.h"

namespace tpc::ir {
namespace {

TensorType F32(std::vector<Dim> dims) { return TensorType(DType::kF32, std::move(dims)); }

std::vector<std::string> Order(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes()) {
    out.push_back(n->kind() == NodeKind::kOutput ? "<output>" : n->output(0)->name());
  }
  return out;
}

// x -> Relu -> r -> Neg -> y ; output(y)
struct Chain {
  Graph g;
  Value* x;
  Node* relu;
  Node* neg;
  Chain() {
    x = g.AddPlaceholder("x", F32({4}));
    relu = g.AddCall("", "Relu", {x}, {"r"});
    relu->output()->set_type(F32({4}));
    neg = g.AddCall("", "Neg", {relu->output()}, {"y"});
    neg->output()->set_type(F32({4}));
    g.SetOutputs({neg->output()});
  }
};

TEST_CASE("Graph: building keeps order and use lists", "[ir]") {
  Chain c;
  CHECK(Order(c.g) == std::vector<std::string>{"x", "r", "y", "<output>"});
  CHECK(c.g.inputs() == std::vector<Value*>{c.x});
  CHECK(c.g.outputs() == std::vector<Value*>{c.neg->output()});
  CHECK(c.x->uses() == std::vector<Use>{{c.relu, 0}});
  CHECK(c.neg->output()->uses() == std::vector<Use>{{c.g.output_node(), 0}});
  CHECK(c.g.FindValue("r") == c.relu->output());
  CHECK(c.g.FindValue("nope") == nullptr);
  CHECK(c.x->producer()->kind() == NodeKind::kPlaceholder);
  // Adding after the output node exists still places nodes before it.
  Value* w = c.g.AddConstant("w", Tensor::FromFloat({4}, {1, 2, 3, 4}));
  CHECK(Order(c.g) == std::vector<std::string>{"x", "r", "y", "w", "<output>"});
  CHECK(w->type().ToString() == "f32[4]");
  CHECK(VerifyGraph(c.g).ok());
}

TEST_CASE("Graph: insert before and after", "[ir]") {
  Chain c;
  Node* before = c.g.InsertCallBefore(c.neg, "", "Abs", {c.relu->output()}, {"a"});
  Node* after = c.g.InsertCallAfter(c.relu, "tpc", "AllReduce", {c.relu->output()}, {"ar"},
                                    {{"reduce", std::string("sum")}}, "ar_node");
  CHECK(Order(c.g) == std::vector<std::string>{"x", "r", "ar", "a", "y", "<output>"});
  CHECK(after->domain() == "tpc");
  CHECK(after->name() == "ar_node");
  CHECK(after->attr_string("reduce", "") == "sum");
  CHECK(before->input(0) == c.relu->output());
  CHECK(c.relu->output()->uses().size() == 3);
  Value* k = c.g.InsertConstantBefore(c.relu, "k", Tensor::FromInt64({1}, {7}));
  CHECK(Order(c.g) == std::vector<std::string>{"x", "k", "r", "ar", "a", "y", "<output>"});
  CHECK(k->type().ToString() == "i64[1]");
}

TEST_CASE("Graph: ReplaceAllUsesWith and Erase", "[ir]") {
  Chain c;
  Node* ar = c.g.InsertCallAfter(c.relu, "tpc", "AllReduce", {c.relu->output()}, {"ar"});
  ar->output()->set_type(F32({4}));
  // Redirect every use of r except the new node's own input.
  c.neg->SetInput(0, ar->output());
  CHECK(c.relu->output()->uses() == std::vector<Use>{{ar, 0}});
  CHECK(ar->output()->uses() == std::vector<Use>{{c.neg, 0}});
  CHECK(VerifyGraph(c.g).ok());

  // Bypass the all-reduce again and remove it.
  ar->output()->ReplaceAllUsesWith(c.relu->output());
  CHECK_FALSE(ar->output()->has_uses());
  CHECK(c.neg->input(0) == c.relu->output());
  c.g.Erase(ar);
  CHECK(Order(c.g) == std::vector<std::string>{"x", "r", "y", "<output>"});
  CHECK(c.relu->output()->uses() == std::vector<Use>{{c.neg, 0}});
  CHECK(c.g.FindValue("ar") == nullptr);
  CHECK(VerifyGraph(c.g).ok());

  // Replacing the graph output updates the output node.
  c.neg->output()->ReplaceAllUsesWith(c.relu->output());
  CHECK(c.g.outputs() == std::vector<Value*>{c.relu->output()});
  c.g.Erase(c.neg);
  CHECK(Order(c.g) == std::vector<std::string>{"x", "r", "<output>"});
  // The name is free again.
  CHECK(c.g.UniqueName("y") == "y");
  CHECK(VerifyGraph(c.g).ok());
}

TEST_CASE("Graph: inputs can be omitted, added and truncated", "[ir]") {
  Chain c;
  Node* n = c.g.AddCall("", "Clip", {c.x, nullptr, nullptr}, {"clip"});
  CHECK(n->num_inputs() == 3);
  CHECK(n->optional_input(1) == nullptr);
  CHECK(n->optional_input(7) == nullptr);
  n->SetInput(2, c.relu->output());
  CHECK(c.relu->output()->uses().size() == 2);
  n->TruncateInputs(1);
  CHECK(n->num_inputs() == 1);
  CHECK(c.relu->output()->uses().size() == 1);
  n->AddInput(c.x);
  CHECK(c.x->uses().size() == 3);  // Relu, Clip input 0, Clip input 1
  CHECK(n->input(1) == c.x);
}

TEST_CASE("Graph: CloneConstant shares the data", "[ir]") {
  Graph g;
  Value* w = g.AddConstant("w", Tensor::FromFloat({2}, {1.5f, 2.5f}));
  w->set_sharding(Sharding{{Placement::Shard(0)}});
  Value* x = g.AddPlaceholder("x", F32({2}));
  Node* add = g.AddCall("", "Add", {x, w}, {"y"});
  add->output()->set_type(F32({2}));
  g.SetOutputs({add->output()});
  Value* clone = g.CloneConstant(w->producer());
  CHECK(clone->name() == "w.1");
  CHECK(clone->producer()->tensor().data() == w->producer()->tensor().data());
  CHECK(clone->type() == w->type());
  CHECK(clone->sharding() == w->sharding());
  CHECK(Order(g) == std::vector<std::string>{"w", "w.1", "x", "y", "<output>"});
  CHECK(g.CloneConstant(w->producer())->name() == "w.2");
  CHECK_FALSE(clone->has_uses());
  add->SetInput(1, clone);
  CHECK_FALSE(w->has_uses());
  absl::Status status = VerifyGraph(g);
  INFO(status.ToString());
  CHECK(status.ok());
}

TEST_CASE("Graph: UniqueName", "[ir]") {
  Graph g;
  g.AddPlaceholder("x", F32({1}));
  g.AddPlaceholder("x.1", F32({1}));
  CHECK(g.UniqueName("y") == "y");
  CHECK(g.UniqueName("x") == "x.2");
}

TEST_CASE("Graph: MoveBefore", "[ir]") {
  Chain c;
  Value* k = c.g.AddConstant("k", Tensor::FromFloat({4}, {0, 0, 0, 0}));
  c.g.MoveBefore(k->producer(), c.relu);
  CHECK(Order(c.g) == std::vector<std::string>{"x", "k", "r", "y", "<output>"});
  c.g.MoveBefore(c.x->producer(), c.g.output_node());
  CHECK(Order(c.g) == std::vector<std::string>{"k", "r", "y", "x", "<output>"});
  CHECK(c.g.inputs() == std::vector<Value*>{c.x});
  c.g.MoveBefore(c.x->producer(), k->producer());
  CHECK(Order(c.g) == std::vector<std::string>{"x", "k", "r", "y", "<output>"});
  CHECK(VerifyGraph(c.g).ok());
}

TEST_CASE("Graph: attribute lookups and Describe", "[ir]") {
  Graph g;
  Value* x = g.AddPlaceholder("x", F32({1}));
  Node* n = g.AddCall("", "Foo", {x}, {"y"},
                      {{"i", int64_t{3}},
                       {"f", 0.5f},
                       {"s", std::string("hi")},
                       {"is", std::vector<int64_t>{1, 2}}},
                      "/foo");
  CHECK(n->attr_int("i", 0) == 3);
  CHECK(n->attr_int("f", -1) == -1);  // wrong kind gives the default
  CHECK(n->attr_float("f", 0) == 0.5f);
  CHECK(n->attr_string("s", "") == "hi");
  CHECK(n->attr_ints("is") == std::vector<int64_t>{1, 2});
  CHECK(n->attr_ints("missing").empty());
  CHECK(n->has_attr("i"));
  CHECK_FALSE(n->has_attr("j"));
  CHECK(n->Describe() == "node '/foo' (Foo)");
  n->set_name("");
  CHECK(n->Describe() == "node producing 'y' (Foo)");
  CHECK(x->producer()->Describe() == "placeholder 'x'");
  CHECK(std::string(NodeKindName(NodeKind::kConstant)) == "constant");
}

}  // namespace
}  // namespace tpc::ir
