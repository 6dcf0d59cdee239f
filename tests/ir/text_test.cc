#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "tpc/ir/parser.h"
#include "tpc/ir/printer.h"
#include "tpc/ir/verifier.h"
#include "tpc/util/half.h"

namespace tpc::ir {
namespace {

TensorType T(DType dt, std::vector<Dim> dims) { return TensorType(dt, std::move(dims)); }
Dim S(const char* name) { return Dim::Symbol(name); }

std::unique_ptr<Graph> Parse(const std::string& text) {
  auto g = ParseGraph(text);
  INFO(text);
  REQUIRE(g.ok());
  return std::move(g).value();
}

// Print → parse → print must be identical; returns the parsed graph.
std::unique_ptr<Graph> RoundTrip(const Graph& g, const PrintOptions& options = {}) {
  std::string text = PrintGraph(g, options);
  auto parsed = ParseGraph(text);
  INFO(text);
  if (!parsed.ok()) FAIL(parsed.status().ToString());
  CHECK(PrintGraph(**parsed, options) == text);
  return std::move(parsed).value();
}

std::string ParseError(const std::string& text) {
  auto g = ParseGraph(text);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

constexpr const char* kGolden = R"(graph "main_graph" opsets("": 17, "com.microsoft": 1) {
  %input_ids: i64[batch, seq] = placeholder
  %x: f32[batch, seq, 64] sharding(R) = placeholder
  %transformer.wte.weight: f32[512, 64] = constant elided
  %c: i64[3] = constant [-1, 4, 16]
  %s: f32[] = constant [0.125]
  %m: bool[2] = constant [true, false]
  %"weird name::x": f32[2] = constant [1.0, -0.5]
  %/Shape_output_0: i64[2] value=[batch, seq] = Shape(%input_ids) name="/Shape"
  %split: i64[2] = constant [32, 32]
  %a: f32[batch, seq, 32] sharding(S(2)), %b: f32[batch, seq, 32] = Split(%x, %split) {axis=-1, num_outputs=2} name="/Split"
  %y: f32[batch, seq, 64] = com.microsoft::Gelu(%x, _)
  output(%y, %a)
}
)";

std::unique_ptr<Graph> GoldenGraph() {
  auto g = std::make_unique<Graph>();
  g->set_name("main_graph");
  g->opsets()["com.microsoft"] = 1;
  g->opsets()[""] = 17;
  Value* ids = g->AddPlaceholder("input_ids", T(DType::kI64, {S("batch"), S("seq")}));
  Value* x = g->AddPlaceholder("x", T(DType::kF32, {S("batch"), S("seq"), 64}));
  x->set_sharding(Sharding{{Placement::Replicate()}});
  g->AddConstant("transformer.wte.weight", Tensor::Elided(DType::kF32, {512, 64}));
  g->AddConstant("c", Tensor::FromInt64({3}, {-1, 4, 16}));
  g->AddConstant("s", Tensor::FromFloat({}, {0.125f}));
  g->AddConstant("m", Tensor::FromDoubles(DType::kBool, {2}, {1, 0}));
  g->AddConstant("weird name::x", Tensor::FromFloat({2}, {1.0f, -0.5f}));
  Node* shape = g->AddCall("", "Shape", {ids}, {"/Shape_output_0"}, {}, "/Shape");
  shape->output()->set_type(T(DType::kI64, {2}));
  shape->output()->set_known_value(std::vector<Dim>{S("batch"), S("seq")});
  Value* split_sizes = g->AddConstant("split", Tensor::FromInt64({2}, {32, 32}));
  Node* split = g->AddCall("", "Split", {x, split_sizes}, {"a", "b"},
                           {{"num_outputs", int64_t{2}}, {"axis", int64_t{-1}}}, "/Split");
  for (Value* v : split->outputs()) v->set_type(T(DType::kF32, {S("batch"), S("seq"), 32}));
  split->output(0)->set_sharding(Sharding{{Placement::Shard(2)}});
  Node* gelu = g->AddCall("com.microsoft", "Gelu", {x, nullptr}, {"y"});
  gelu->output()->set_type(T(DType::kF32, {S("batch"), S("seq"), 64}));
  g->SetOutputs({gelu->output(), split->output(0)});
  return g;
}

TEST_CASE("Text: golden form", "[ir]") {
  auto g = GoldenGraph();
  REQUIRE(VerifyGraph(*g).ok());
  CHECK(PrintGraph(*g) == kGolden);
  auto parsed = RoundTrip(*g);
  CHECK(PrintGraph(*Parse(kGolden)) == kGolden);
  CHECK(VerifyGraph(*parsed).ok());

  // The parsed graph has the structure, not just the text.
  Value* a = parsed->FindValue("a");
  REQUIRE(a != nullptr);
  CHECK(a->index() == 0);
  CHECK(a->producer()->name() == "/Split");
  CHECK(a->producer()->attr_int("axis", 0) == -1);
  CHECK(a->producer()->output(1)->name() == "b");
  CHECK(a->sharding() == Sharding{{Placement::Shard(2)}});
  Node* gelu = parsed->FindValue("y")->producer();
  CHECK(gelu->domain() == "com.microsoft");
  CHECK(gelu->num_inputs() == 2);
  CHECK(gelu->input(1) == nullptr);
  CHECK(parsed->FindValue("x")->uses().size() == 2);
  CHECK(parsed->outputs() == std::vector<Value*>{parsed->FindValue("y"), a});
  const Tensor& w = parsed->FindValue("transformer.wte.weight")->producer()->tensor();
  CHECK_FALSE(w.has_data());
  CHECK(w.shape() == std::vector<int64_t>{512, 64});
  CHECK(parsed->FindValue("c")->producer()->tensor().ToInt64() == std::vector<int64_t>{-1, 4, 16});
  CHECK(parsed->FindValue("weird name::x") != nullptr);
  CHECK(parsed->opsets() == g->opsets());
}

TEST_CASE("Text: every attribute kind round-trips", "[ir]") {
  Graph g;
  Value* x = g.AddPlaceholder("x", T(DType::kF32, {2}));
  const float inf = std::numeric_limits<float>::infinity();
  Attributes attrs = {
      {"i", int64_t{3}},
      {"neg", int64_t{-9223372036854775807LL}},
      {"f1", 1.0f},
      {"f2", 0.1f},
      {"f3", 1e-05f},
      {"f4", inf},
      {"f5", -inf},
      {"f6", std::numeric_limits<float>::quiet_NaN()},
      {"f7", -0.0f},
      {"f8", 3e38f},
      {"f9", 100.0f},
      {"s", std::string("he said \"hi\"\n\\")},
      {"empty_s", std::string()},
      {"ints", std::vector<int64_t>{1, -2, 3}},
      {"floats", std::vector<float>{1.0f, 2.5f, -0.0f, inf}},
      {"strings", std::vector<std::string>{"a", "b c", ""}},
      {"no_ints", std::vector<int64_t>{}},
      {"no_floats", std::vector<float>{}},
      {"no_strings", std::vector<std::string>{}},
      {"t_small", Tensor::FromFloat({2}, {1.0f, 2.0f})},
      {"t_scalar", Tensor::FromInt64({}, {42})},
      {"t_big", Tensor::FromFloat({1000}, std::vector<float>(1000, 0.5f))},
      {"t_elided", Tensor::Elided(DType::kF16, {4, 4})},
      {"quoted key", int64_t{1}},
  };
  Node* n = g.AddCall("", "Everything", {x}, {"y"}, attrs, "all \"the\" attrs");
  n->output()->set_type(T(DType::kF32, {2}));
  g.SetOutputs({n->output()});
  std::string text = PrintGraph(g);
  CHECK_THAT(text, Catch::Contains("f1=1.0, f2=0.1, f3=1e-05, f4=inf, f5=-inf"));
  CHECK_THAT(text, Catch::Contains("f7=-0.0, f8=3e+38, f9=100.0"));
  CHECK_THAT(text, Catch::Contains("floats=[1.0, 2.5, -0.0, inf]"));
  CHECK_THAT(text, Catch::Contains("no_floats=floats[], no_ints=ints[], no_strings=strings[]"));
  CHECK_THAT(text, Catch::Contains(R"("quoted key"=1)"));
  CHECK_THAT(text, Catch::Contains(R"(s="he said \"hi\"\n\\")"));
  CHECK_THAT(text, Catch::Contains(R"(strings=["a", "b c", ""])"));
  CHECK_THAT(text, Catch::Contains("t_big=tensor<f32[1000]> elided"));
  CHECK_THAT(text, Catch::Contains("t_elided=tensor<f16[4, 4]> elided"));
  CHECK_THAT(text, Catch::Contains("t_scalar=tensor<i64[]>[42]"));
  CHECK_THAT(text, Catch::Contains("t_small=tensor<f32[2]>[1.0, 2.0]"));
  CHECK_THAT(text, Catch::Contains(R"(name="all \"the\" attrs")"));

  auto parsed = RoundTrip(g);
  const Attributes& back = parsed->FindValue("y")->producer()->attrs();
  REQUIRE(back.size() == attrs.size());
  CHECK(std::get<int64_t>(back.at("neg")) == -9223372036854775807LL);
  CHECK(std::get<float>(back.at("f2")) == 0.1f);
  CHECK(std::get<float>(back.at("f3")) == 1e-05f);
  CHECK(std::isinf(std::get<float>(back.at("f5"))));
  CHECK(std::isnan(std::get<float>(back.at("f6"))));
  CHECK(std::signbit(std::get<float>(back.at("f7"))));
  CHECK(std::get<std::string>(back.at("s")) == "he said \"hi\"\n\\");
  CHECK(std::get<std::vector<std::string>>(back.at("strings")) ==
        std::vector<std::string>{"a", "b c", ""});
  CHECK(std::get<std::vector<int64_t>>(back.at("no_ints")).empty());
  const Tensor& t = std::get<Tensor>(back.at("t_small"));
  CHECK(t.dtype() == DType::kF32);
  CHECK(t.ElementAsDouble(1) == 2.0);
  CHECK_FALSE(std::get<Tensor>(back.at("t_big")).has_data());
  CHECK(parsed->FindValue("y")->producer()->name() == "all \"the\" attrs");
}

TEST_CASE("Text: constants of every dtype, inline and elided", "[ir]") {
  Graph g;
  g.opsets()[""] = 18;
  g.AddConstant("f16", Tensor::FromDoubles(DType::kF16, {3}, {0.1, -2.0, 65504.0}));
  g.AddConstant("bf16", Tensor::FromDoubles(DType::kBF16, {2}, {0.1, 1e30}));
  g.AddConstant("f64", Tensor::FromDoubles(DType::kF64, {2}, {0.1, -1e-300}));
  g.AddConstant("f32", Tensor::FromFloat({2, 2}, {0.1f, 1e-05f, -0.0f, 1e20f}));
  g.AddConstant("b", Tensor::FromDoubles(DType::kBool, {1, 3}, {1, 0, 1}));
  const int64_t big = (int64_t{1} << 62) + 1;  // not representable as a double
  g.AddConstant("i64", Tensor::FromInt64({3}, {big, std::numeric_limits<int64_t>::min(), 0}));
  std::string u64_bytes(8, '\0');
  const uint64_t umax = std::numeric_limits<uint64_t>::max();
  std::memcpy(u64_bytes.data(), &umax, 8);
  g.AddConstant("u64", Tensor::FromBytes(DType::kU64, {1}, u64_bytes));
  g.AddConstant("i8", Tensor::FromDoubles(DType::kI8, {2}, {-128, 127}));
  g.AddConstant("u8", Tensor::FromDoubles(DType::kU8, {1}, {255}));
  g.AddConstant("i16", Tensor::FromDoubles(DType::kI16, {1}, {-300}));
  g.AddConstant("u16", Tensor::FromDoubles(DType::kU16, {1}, {60000}));
  g.AddConstant("i32", Tensor::FromDoubles(DType::kI32, {1}, {-70000}));
  g.AddConstant("u32", Tensor::FromDoubles(DType::kU32, {1}, {4000000000.0}));
  g.AddConstant("empty", Tensor::FromFloat({0}, {}));
  g.AddConstant("big_f16", Tensor::FromDoubles(DType::kF16, {17}, std::vector<double>(17, 1)));
  g.AddConstant("elided_i64", Tensor::Elided(DType::kI64, {2}));
  std::string text = PrintGraph(g);
  CHECK_THAT(text, Catch::Contains("%f16: f16[3] = constant [0.099975586, -2.0, 65504.0]"));
  CHECK_THAT(text, Catch::Contains("%f64: f64[2] = constant [0.1, -1e-300]"));
  CHECK_THAT(text, Catch::Contains("%f32: f32[2, 2] = constant [0.1, 1e-05, -0.0, 1e+20]"));
  CHECK_THAT(text, Catch::Contains("%b: bool[1, 3] = constant [true, false, true]"));
  CHECK_THAT(text, Catch::Contains(
                       "%i64: i64[3] = constant [4611686018427387905, -9223372036854775808, 0]"));
  CHECK_THAT(text, Catch::Contains("%u64: u64[1] = constant [18446744073709551615]"));
  CHECK_THAT(text, Catch::Contains("%empty: f32[0] = constant []"));
  CHECK_THAT(text, Catch::Contains("%big_f16: f16[17] = constant elided"));
  CHECK_THAT(text, Catch::Contains("%elided_i64: i64[2] = constant elided"));

  auto parsed = RoundTrip(g);
  CHECK(parsed->output_node() == nullptr);
  CHECK(parsed->FindValue("i64")->producer()->tensor().ElementAsInt64(0) == big);
  const Tensor& f16 = parsed->FindValue("f16")->producer()->tensor();
  const Tensor& f16_orig = g.FindValue("f16")->producer()->tensor();
  CHECK(std::memcmp(f16.data(), f16_orig.data(), f16.nbytes()) == 0);
  const Tensor& bf16 = parsed->FindValue("bf16")->producer()->tensor();
  const Tensor& bf16_orig = g.FindValue("bf16")->producer()->tensor();
  CHECK(std::memcmp(bf16.data(), bf16_orig.data(), bf16.nbytes()) == 0);
  const Tensor& u64 = parsed->FindValue("u64")->producer()->tensor();
  CHECK(std::memcmp(u64.data(), &umax, 8) == 0);
  CHECK(parsed->FindValue("f64")->producer()->tensor().ElementAsDouble(1) == -1e-300);

  // A larger inline threshold prints the 17 halves.
  PrintOptions wide;
  wide.max_inline_elements = 100;
  auto wide_parsed = RoundTrip(g, wide);
  CHECK(wide_parsed->FindValue("big_f16")->producer()->tensor().has_data());
}

TEST_CASE("Text: names, dims, types, shardings, domains", "[ir]") {
  Graph g;
  g.set_name("a \"quoted\" graph\t");
  Value* x = g.AddPlaceholder("x:0 with space", T(DType::kF32, {S("batch*seq?"), Dim(), 3}));
  TensorType unranked;
  unranked.dtype = DType::kI64;
  Value* u = g.AddPlaceholder("u", unranked);
  u->set_sharding(Sharding{{Placement::Partial(ReduceOp::kMax), Placement::Shard(0)}});
  Value* scalar = g.AddPlaceholder("-1", T(DType::kBool, {}));
  Dim batch = S("batch"), seq = S("seq"), past = S("past seq");
  Node* n = g.AddCall("my domain", "Op.With-Dots", {x, nullptr, u, nullptr, scalar},
                      {"o1", "o/2", "o.3", "_"});
  n->output(0)->set_type(T(DType::kF16, {batch * seq, Dim(2) * seq + 1, seq - 1}));
  n->output(1)->set_type(T(DType::kBF16, {Dim(-1) * seq, past + seq, batch * batch * 4}));
  n->output(1)->set_known_value(std::vector<Dim>{Dim(-1), past * 2, Dim(), 0});
  n->output(2)->set_type(unranked);
  n->output(2)->set_sharding(Sharding{{Placement::Partial(ReduceOp::kAvg)}});
  n->output(3)->set_type(T(DType::kU8, {Dim()}));
  n->output(3)->set_sharding(Sharding{});
  Node* m = g.AddCall("tpc", "AllReduce", {n->output(0)}, {"ar"},
                      {{"reduce", std::string("sum")}, {"group_size", int64_t{4}}});
  m->output()->set_type(T(DType::kF16, {batch * seq, Dim(2) * seq + 1, seq - 1}));
  m->output()->set_sharding(Sharding{{Placement::Partial(ReduceOp::kMin)}});
  Node* z = g.AddCall("", "NoOutputs", {}, {});
  (void)z;
  g.SetOutputs({m->output(), n->output(3)});

  std::string text = PrintGraph(g);
  CHECK_THAT(text, Catch::StartsWith(R"(graph "a \"quoted\" graph\t" opsets() {)"));
  CHECK_THAT(text, Catch::Contains(R"(%"x:0 with space": f32["batch*seq?", ?, 3] = placeholder)"));
  CHECK_THAT(text, Catch::Contains("%u: i64[*] sharding(P(max), S(0)) = placeholder"));
  CHECK_THAT(text, Catch::Contains("%-1: bool[] = placeholder"));
  CHECK_THAT(
      text, Catch::Contains("%o1: f16[batch*seq, 2*seq+1, seq-1], "
                            "%o/2: bf16[-seq, \"past seq\"+seq, 4*batch*batch] "
                            "value=[-1, 2*\"past seq\", ?, 0], "
                            "%o.3: i64[*] sharding(P(avg)), %_: u8[?] sharding() = "
                            "\"my domain\"::\"Op.With-Dots\"(%\"x:0 with space\", _, %u, _, %-1)"));
  CHECK_THAT(text, Catch::Contains("%ar: f16[batch*seq, 2*seq+1, seq-1] sharding(P(min)) = "
                                   "tpc::AllReduce(%o1) {group_size=4, reduce=\"sum\"}"));
  CHECK_THAT(text, Catch::Contains("  _ = NoOutputs()\n"));
  CHECK_THAT(text, Catch::EndsWith("  output(%ar, %_)\n}\n"));

  auto parsed = RoundTrip(g);
  CHECK(parsed->name() == g.name());
  Node* pn = parsed->FindValue("o1")->producer();
  CHECK(pn->domain() == "my domain");
  CHECK(pn->op_type() == "Op.With-Dots");
  CHECK(pn->num_inputs() == 5);
  CHECK(pn->input(3) == nullptr);
  CHECK(parsed->FindValue("o/2")->type() == n->output(1)->type());
  CHECK(parsed->FindValue("o/2")->known_value() == n->output(1)->known_value());
  CHECK(parsed->FindValue("_")->sharding() == Sharding{});
  CHECK(parsed->FindValue("x:0 with space")->type() == x->type());
}

TEST_CASE("Text: parser accepts non-canonical dims and spacing", "[ir]") {
  auto g = Parse(R"(
graph "g" opsets("":17) {
  %x : f32[ seq*batch , -1*x + 2*seq, seq - 1 , 1 + 2*seq, 2*3, "a b"*2 ] = placeholder
  %y: f32[*] = Relu(%x)
  %z: f32[*] = Relu(%y) {alpha = 1, f = [1, 2.0]}
  output( %z )
})");
  Value* x = g->FindValue("x");
  REQUIRE(x != nullptr);
  CHECK(x->type().ToString() == "f32[batch*seq, 2*seq-x, seq-1, 2*seq+1, 6, 2*\"a b\"]");
  CHECK(std::get<std::vector<float>>(g->FindValue("z")->producer()->attrs().at("f")) ==
        std::vector<float>{1.0f, 2.0f});
  RoundTrip(*g);
}

TEST_CASE("Text: forward references parse, placeholders keep order", "[ir]") {
  auto g = Parse(R"(graph "g" opsets() {
  %y: f32[2] = Relu(%x)
  %x: f32[2] = placeholder
  output(%y)
})");
  CHECK(g->FindValue("y")->producer()->input(0) == g->FindValue("x"));
  CHECK(g->inputs() == std::vector<Value*>{g->FindValue("x")});
  RoundTrip(*g);
}

TEST_CASE("Text: parse errors name line and column", "[ir]") {
  CHECK(ParseError("") == "line 1:1: expected 'graph'");
  CHECK(ParseError("graph main opsets() {}") == "line 1:7: expected a quoted string, found 'm'");
  CHECK(ParseError("graph \"g\" opsets(\"\": x) {}") ==
        "line 1:22: expected an integer, found 'x'");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f32[2] = placeholder\n") ==
        "line 3:1: expected '}' at end of graph");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f99[2] = placeholder\n}") ==
        "line 2:7: unknown dtype 'f99'");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f32[2 = placeholder\n}") ==
        "line 2:13: expected ']', found '='");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f32[2] = placeholder\n"
                   "  %y: f32[2] = Relu(%z)\n}") == "line 3:21: undefined value %z");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f32[2] = placeholder\n"
                   "  %x: f32[2] = placeholder\n}") == "line 3:3: value %x is defined twice");
  CHECK(ParseError("graph \"g\" opsets() {\n  %c: i64[3] = constant [1, 2]\n}") ==
        "line 2:25: expected 3 values for the type, found 2");
  CHECK(ParseError("graph \"g\" opsets() {\n  %c: i8[1] = constant [300]\n}") ==
        "line 2:25: invalid i8 value '300'");
  CHECK(ParseError("graph \"g\" opsets() {\n  %c: bool[1] = constant [1]\n}") ==
        "line 2:27: invalid bool value '1'");
  CHECK(ParseError("graph \"g\" opsets() {\n  %c: f32[n] = constant elided\n}") ==
        "line 2:7: a constant needs a static shape");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f32[2] sharding(S(a)) = placeholder\n}") ==
        "line 2:23: invalid placement 'S(a)'");
  CHECK(ParseError("graph \"g\" opsets() {\n  %y: f32[2] = Relu(%x) {a=[]}\n}") ==
        "line 2:28: an empty list is written ints[], floats[] or strings[]");
  CHECK(ParseError("graph \"g\" opsets() {\n  %y: f32[2] = Relu() {a=1, a=2}\n}") ==
        "line 2:29: attribute 'a' given twice");
  CHECK(ParseError("graph \"g\" opsets() {\n  %y: f32[2] = Relu() {a=1.5x}\n}") ==
        "line 2:26: invalid float '1.5x'");
  CHECK(ParseError("graph \"g\" opsets() {\n  %a: f32[2], %b: f32[2] = placeholder\n}") ==
        "line 2:3: a placeholder has exactly one output");
  CHECK(ParseError("graph \"g\" opsets() {\n  output()\n  %a: f32[2] = placeholder\n}") ==
        "line 3:3: expected '}' after the output line");
  CHECK(ParseError("graph \"g\" opsets() {\n  output(%nope)\n}") ==
        "line 2:10: undefined value %nope");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x: f32[2] = placeholder\n}\nextra") ==
        "line 4:1: unexpected text after the graph");
  CHECK(ParseError("graph \"g\" opsets() {\n  %\"x: f32[2] = placeholder\n}") ==
        "line 2:4: unterminated string");
  CHECK(ParseError("graph \"g\" opsets() {\n  %x f32[2] = placeholder\n}") ==
        "line 2:6: expected ':', found 'f'");
}

TEST_CASE("Text: truncated or damaged input is an error, never a crash", "[ir]") {
  const std::string golden = kGolden;
  for (size_t n = 0; n + 2 < golden.size(); ++n) {
    auto g = ParseGraph(golden.substr(0, n));
    CHECK_FALSE(g.ok());
  }
  // Replacing any one character either still parses or fails with a line:col message.
  for (size_t i = 0; i < golden.size(); ++i) {
    for (char c : {'%', '"', '[', ']', '(', ')', '{', '}', ',', '=', ':', '_', '-', 'x', '9'}) {
      std::string text = golden;
      text[i] = c;
      auto g = ParseGraph(text);
      if (!g.ok()) CHECK_THAT(std::string(g.status().message()), Catch::StartsWith("line "));
    }
  }
}

}  // namespace
}  // namespace tpc::ir
