#include <catch2/catch.hpp>

#include "tpc/ir/parser.h"
#include "tpc/ir/verifier.h"

namespace tpc::ir {
namespace {

TensorType VecF32(std::vector<Dim> dims) { return TensorType(DType::kF32, std::move(dims)); }

std::string VerifyError(const Graph& g) {
  absl::Status s = VerifyGraph(g);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  return std::string(s.message());
}

// x -> Relu (r) ; output(r)
struct Small {
  Graph g;
  Value* x;
  Node* relu;
  Small() {
    x = g.AddPlaceholder("x", VecF32({2}));
    relu = g.AddCall("", "Relu", {x}, {"r"}, {}, "/relu");
    relu->output()->set_type(VecF32({2}));
    g.SetOutputs({relu->output()});
  }
};

TEST_CASE("Verifier: a well-formed graph passes", "[ir]") {
  Small s;
  CHECK(VerifyGraph(s.g).ok());
  auto parsed = ParseGraph(R"(graph "g" opsets("": 17) {
  %x: f32[batch, 2] sharding(S(1)) = placeholder
  %c: i64[2] = constant [1, 2]
  %shape: i64[2] value=[batch, 2] = Shape(%x)
  %y: f32[*] = Reshape(%x, %c)
  output(%y, %shape)
})");
  REQUIRE(parsed.ok());
  CHECK(VerifyGraph(**parsed).ok());
}

TEST_CASE("Verifier: duplicate names are a parse error", "[ir]") {
  // The graph API cannot create two values with one name; the text form can try.
  auto g = ParseGraph(
      "graph \"g\" opsets() {\n  %x: f32[2] = placeholder\n"
      "  %x: f32[2] = Relu(%x)\n}");
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() == "line 3:3: value %x is defined twice");
}

TEST_CASE("Verifier: use before definition (from text)", "[ir]") {
  auto g = ParseGraph(R"(graph "g" opsets() {
  %y: f32[2] = Relu(%x) name="/relu"
  %x: f32[2] = placeholder
  output(%y)
})");
  REQUIRE(g.ok());
  CHECK(VerifyError(**g) == "node '/relu' (Relu): input 0 %x is used before its definition");
}

TEST_CASE("Verifier: use before definition (after MoveBefore)", "[ir]") {
  Small s;
  Node* neg = s.g.AddCall("", "Neg", {s.relu->output()}, {"n"});
  neg->output()->set_type(VecF32({2}));
  s.g.MoveBefore(neg, s.relu);
  CHECK(VerifyError(s.g) == "node producing 'n' (Neg): input 0 %r is used before its definition");
}

TEST_CASE("Verifier: input from another graph is dangling", "[ir]") {
  Graph other;
  Value* foreign = other.AddPlaceholder("x", VecF32({2}));
  Graph g;
  Value* x = g.AddPlaceholder("x", VecF32({2}));
  Node* add = g.AddCall("", "Add", {x, foreign}, {"y"});
  add->output()->set_type(VecF32({2}));
  g.SetOutputs({add->output()});
  CHECK(VerifyError(g) ==
        "node producing 'y' (Add): input 1 %x is not a value of this graph (dangling)");
  add->SetInput(1, x);  // detach from `other` before it goes away
}

TEST_CASE("Verifier: constant dtype does not match its type", "[ir]") {
  Small s;
  Value* c = s.g.AddConstant("c", Tensor::FromInt64({2}, {1, 2}));
  c->set_type(VecF32({2}));
  CHECK(VerifyError(s.g) ==
        "constant 'c': constant data of dtype i64 does not match the type f32[2]");
}

TEST_CASE("Verifier: constant shape does not match its type", "[ir]") {
  Small s;
  Value* c = s.g.AddConstant("c", Tensor::FromFloat({2}, {1, 2}));
  c->set_type(VecF32({3}));
  CHECK(VerifyError(s.g) ==
        "constant 'c': constant data of shape [2] does not match the type f32[3]");
  c->set_type(VecF32({Dim::Symbol("n")}));
  CHECK(VerifyError(s.g) ==
        "constant 'c': constant data of shape [2] does not match the type f32[n]");
}

TEST_CASE("Verifier: undefined dtype", "[ir]") {
  Small s;
  s.relu->output()->set_type(TensorType());
  CHECK(VerifyError(s.g) == "node '/relu' (Relu): value %r has an undefined dtype");
}

TEST_CASE("Verifier: missing output node", "[ir]") {
  Graph g;
  g.AddPlaceholder("x", VecF32({2}));
  CHECK(VerifyError(g) == "graph has no output node");
}

TEST_CASE("Verifier: output node not last", "[ir]") {
  Small s;
  s.g.MoveBefore(s.g.output_node(), s.relu);
  // The output node now precedes the definition of its input; the position is reported.
  CHECK(VerifyError(s.g) == "graph output: output node is not the last node");
}

TEST_CASE("Verifier: empty graph output", "[ir]") {
  Small s;
  s.g.SetOutputs({s.relu->output(), nullptr});
  CHECK(VerifyError(s.g) == "graph output: output 1 is empty");
}

TEST_CASE("Verifier: sharding dim out of range", "[ir]") {
  Small s;
  s.relu->output()->set_sharding(Sharding{{Placement::Shard(1)}});
  CHECK(VerifyError(s.g) ==
        "node '/relu' (Relu): value %r of type f32[2] is sharded on dim 1, out of range");
  s.relu->output()->set_sharding(Sharding{{Placement::Shard(-1)}});
  CHECK(VerifyError(s.g) ==
        "node '/relu' (Relu): value %r of type f32[2] is sharded on dim -1, out of range");
  s.relu->output()->set_sharding(Sharding{{Placement::Shard(0)}});
  CHECK(VerifyGraph(s.g).ok());
}

TEST_CASE("Verifier: empty op_type", "[ir]") {
  Small s;
  Node* n = s.g.AddCall("", "", {s.x}, {"e"}, {}, "/empty");
  n->output()->set_type(VecF32({2}));
  CHECK(VerifyError(s.g) == "node '/empty' (): call has an empty op_type");
}

TEST_CASE("Verifier: known value does not fit the type", "[ir]") {
  Small s;
  Node* shape = s.g.AddCall("", "Shape", {s.x}, {"shape"});
  shape->output()->set_type(TensorType(DType::kI64, {1}));
  shape->output()->set_known_value(std::vector<Dim>{2, 3});
  CHECK(VerifyError(s.g) ==
        "node producing 'shape' (Shape): value %shape of type i64[1] has 2 known elements");
}

}  // namespace
}  // namespace tpc::ir
