// An If whose condition is known when compiling becomes the branch it takes (torch's
// TorchScript exporter writes squeeze(dim) as If(Shape(x)[dim] == 1, Squeeze, Identity));
// one decided by the data is refused.
#include <catch2/catch.hpp>

#include <string>

#include "onnx/defs/parser.h"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"

namespace {

using tpc::testing::TempDir;
using tpc::testing::WriteFile;

// The model written in ONNX's text form, imported from a file.
absl::StatusOr<std::unique_ptr<tpc::ir::Graph>> ImportText(const std::string& name,
                                                           const char* text) {
  ::onnx::ModelProto m;
  const auto parsed = ::onnx::OnnxParser::Parse(m, text);
  INFO(parsed.ErrorMessage());
  REQUIRE(parsed.IsOK());
  const std::string path = TempDir("if_import") + "/" + name + ".onnx";
  WriteFile(path, m.SerializeAsString());
  return tpc::onnx::ImportModel(path);
}

// The op types of the graph's calls, in order.
std::string Ops(const tpc::ir::Graph& g) {
  std::string ops;
  for (const tpc::ir::Node* n : g.nodes()) {
    if (n->is_call()) ops += (ops.empty() ? "" : " ") + n->op_type();
  }
  return ops;
}

// squeeze(-1) of x as TorchScript exports it, for x of the given last dim (the output
// declared `out`).
std::string SqueezeModel(const std::string& last, const std::string& out) {
  return R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, 4, )" +
         last + "] x) => (float" + out + R"( z) {
  idx = Constant<value = int64 {-1}>()
  one = Constant<value = int64 {1}>()
  axes = Constant<value = int64[1] {-1}>()
  d = Gather<axis = 0>(s, idx)
  s = Shape(x)
  c = Equal(d, one)
  y = If(c) <then_branch = then_g () => (float t) { t = Squeeze(x, axes) },
             else_branch = else_g () => (float e) { e = Identity(x) }>
  z = Neg(y)
})";
}

TEST_CASE("an If on a dim known when compiling becomes the branch it takes", "[onnx][if]") {
  auto squeezed = ImportText("then", SqueezeModel("1", "[batch, 4]").c_str());
  INFO(squeezed.status().message());
  REQUIRE(squeezed.ok());
  CHECK(Ops(**squeezed) == "Shape Gather Equal Squeeze Neg");
  CHECK((*squeezed)->outputs()[0]->type().ToString() == "f32[batch, 4]");

  auto kept = ImportText("else", SqueezeModel("3", "[batch, 4, 3]").c_str());
  REQUIRE(kept.ok());
  CHECK(Ops(**kept) == "Shape Gather Equal Neg");
  CHECK((*kept)->outputs()[0]->type().ToString() == "f32[batch, 4, 3]");
}

TEST_CASE("an If decided by the data or an unknown dim is refused, naming it", "[onnx][if]") {
  auto symbolic = ImportText("symbolic", SqueezeModel("n", "[batch, 4, n]").c_str());
  REQUIRE_FALSE(symbolic.ok());
  CHECK_THAT(std::string(symbolic.status().message()),
             Catch::Contains("node producing 'y' (If): its condition 'c' (bool[]) is not known "
                             "when compiling"));

  auto data = ImportText("data", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] z) {
  zero = Constant<value = float {0}>()
  sum = ReduceSum<keepdims = 0>(x)
  c = Greater(sum, zero)
  z = If(c) <then_branch = then_g () => (float t) { t = Neg(x) },
             else_branch = else_g () => (float e) { e = Abs(x) }>
})");
  REQUIRE_FALSE(data.ok());
  CHECK_THAT(std::string(data.status().message()), Catch::Contains("is not known when compiling"));
}

TEST_CASE("a taken branch reads later values, nests Ifs and keeps the If's output name",
          "[onnx][if]") {
  // The If stands before the node making `late` in the file; its output is the graph's
  // output; the then branch holds another If and a constant of its own.
  auto g = ImportText("nested", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
  yes = Constant<value = bool {1}>()
  no = Constant<value = bool {0}>()
  y = If(yes) <then_branch = then_g () => (float[2, 3] t) {
                  inner = If(no) <then_branch = a () => (float u) { u = Neg(late) },
                                  else_branch = b () => (float v) { v = Abs(late) }>
                  two = Constant<value = float {2}>()
                  t = Add(inner, two)
                },
               else_branch = else_g () => (float[2, 3] e) { e = Identity(x) }>
  late = Sigmoid(x)
})");
  REQUIRE(g.ok());
  CHECK(Ops(**g) == "Sigmoid Abs Add Identity");
  REQUIRE((*g)->outputs().size() == 1);
  CHECK((*g)->outputs()[0]->name() == "y");
}

TEST_CASE("an If in a local function reads the function's values under their new names",
          "[onnx][if]") {
  auto g = ImportText("function", R"(<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2, 3] x) => (float[2, 3] z) {
  z = local.F(x)
}
<domain: "local", opset_import: ["" : 17]>
F (a) => (b) {
  yes = Constant<value = bool {1}>()
  h = Sigmoid(a)
  b = If(yes) <then_branch = t () => (float u) { u = Neg(h) },
               else_branch = e () => (float v) { v = Abs(h) }>
})");
  REQUIRE(g.ok());
  CHECK(Ops(**g) == "Sigmoid Neg Identity");
  CHECK((*g)->outputs()[0]->name() == "z");
}

TEST_CASE("a taken branch's own names are renamed apart from every other scope's", "[onnx][if]") {
  // Both Ifs' branches define `u`, and so does the graph after them; a local function
  // holding an If is called twice; the unnamed Ifs' branches call a local function each.
  auto g = ImportText("names", R"(<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2, 3] x) => (float[2, 3] z) {
  yes = Constant<value = bool {1}>()
  a = If(yes) <then_branch = t1 () => (float[2, 3] u) { u = Neg(x) },
               else_branch = e1 () => (float[2, 3] v) { v = Abs(x) }>
  b = If(yes) <then_branch = t2 () => (float[2, 3] u) { u = local.G(a) },
               else_branch = e2 () => (float[2, 3] v) { v = local.G(a) }>
  c = local.F(b)
  d = local.F(c)
  u = Sigmoid(d)
  z = Add(u, a)
}
<domain: "local", opset_import: ["" : 17]>
F (p) => (q) {
  on = Constant<value = bool {1}>()
  h = Tanh(p)
  q = If(on) <then_branch = t () => (float u) { u = Neg(h) },
              else_branch = e () => (float u) { u = Abs(h) }>
}
<domain: "local", opset_import: ["" : 17]>
G (p) => (q) {
  q = Relu(p)
}
)");
  INFO(g.status().message());
  REQUIRE(g.ok());
  CHECK(Ops(**g) == "Neg Relu Tanh Neg Tanh Neg Sigmoid Add");
  CHECK((*g)->outputs()[0]->name() == "z");
}

}  // namespace
