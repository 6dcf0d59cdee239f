#include "tpc/onnx/shape_inference.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/ir/graph.h"

namespace tpc::onnx {
namespace {

using ir::Dim;
using ir::DType;
using ir::Graph;
using ir::TensorType;
using ir::Value;

constexpr int64_t kMax = INT64_MAX;

Dim Sym(const char* name) { return Dim::Symbol(name); }

std::string ShapeOf(const Value* v) {
  return v->type().shape.has_value() ? ir::DimsToString(*v->type().shape) : "[*]";
}

std::string ValueOf(const Value* v) {
  return v->known_value().has_value() ? ir::DimsToString(*v->known_value()) : "none";
}

class Builder {
 public:
  explicit Builder(int64_t opset) { g.opsets()[""] = opset; }

  Value* Input(const std::string& name, DType t, std::vector<Dim> dims) {
    return g.AddPlaceholder(name, TensorType(t, std::move(dims)));
  }
  Value* Ints(std::vector<int64_t> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return g.AddConstant(g.UniqueName("c"), ir::Tensor::FromInt64({n}, values));
  }
  Value* Scalar(int64_t value) {
    return g.AddConstant(g.UniqueName("s"), ir::Tensor::FromInt64({}, {value}));
  }
  ir::Node* Node(const std::string& op, std::vector<Value*> inputs, ir::Attributes attrs = {},
                 int outputs = 1, const std::string& domain = "") {
    std::vector<std::string> names;
    for (int i = 0; i < outputs; ++i)
      names.push_back(g.UniqueName(op + "_out" + std::to_string(i)));
    return g.AddCall(domain, op, std::move(inputs), std::move(names), std::move(attrs),
                     "/" + op + "_" + std::to_string(++count_));
  }
  Value* Op(const std::string& op, std::vector<Value*> inputs, ir::Attributes attrs = {}) {
    return Node(op, std::move(inputs), std::move(attrs))->output(0);
  }
  absl::Status Infer() { return InferShapes(g); }

  Graph g;

 private:
  int count_ = 0;
};

void RequireOk(const absl::Status& s) {
  INFO(s.ToString());
  REQUIRE(s.ok());
}

TEST_CASE("GPT-2 shape sub-graph evaluates a symbolic reshape target", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), Sym("seq"), 64});
  Value* shape = b.Op("Shape", {x});
  Value* d0 = b.Op("Gather", {shape, b.Scalar(0)}, {{"axis", int64_t{0}}});
  Value* d1 = b.Op("Gather", {shape, b.Scalar(1)});
  Value* u0 = b.Op("Unsqueeze", {d0, b.Ints({0})});
  Value* u1 = b.Op("Unsqueeze", {d1, b.Ints({0})});
  Value* target = b.Op("Concat", {u0, u1, b.Ints({4}), b.Ints({16})}, {{"axis", int64_t{0}}});
  Value* y = b.Op("Reshape", {x, target});
  RequireOk(b.Infer());
  CHECK(ShapeOf(shape) == "[3]");
  CHECK(shape->type().dtype == DType::kI64);
  CHECK(ValueOf(shape) == "[batch, seq, 64]");
  CHECK(ShapeOf(d0) == "[]");
  CHECK(ValueOf(d0) == "[batch]");
  CHECK(ValueOf(u1) == "[seq]");
  CHECK(ValueOf(target) == "[batch, seq, 4, 16]");
  CHECK(ShapeOf(y) == "[batch, seq, 4, 16]");
  CHECK(y->type().dtype == DType::kF32);
}

TEST_CASE("Reshape with -1 and 0", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), Sym("seq"), 64});
  Value* flat = b.Op("Reshape", {x, b.Ints({-1, 64})});
  Value* heads = b.Op("Reshape", {x, b.Ints({0, 0, 4, -1})});
  Value* back = b.Op("Reshape", {flat, b.Ints({-1, 32})});
  RequireOk(b.Infer());
  CHECK(ShapeOf(flat) == "[batch*seq, 64]");
  CHECK(ShapeOf(heads) == "[batch, seq, 4, 16]");
  CHECK(ShapeOf(back) == "[2*batch*seq, 32]");

  Builder bad(17);
  Value* z = bad.Input("z", DType::kF32, {2, 3});
  bad.Op("Reshape", {z, bad.Ints({4, 2})});
  absl::Status s = bad.Infer();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("cannot reshape [2, 3] to [4, 2]") != std::string::npos);
}

TEST_CASE("Broadcasting with symbolic dims", "[shape]") {
  Builder b(17);
  Value* a = b.Input("a", DType::kF32, {Sym("batch"), 1, Sym("seq")});
  Value* c = b.Input("c", DType::kF32, {1, 8, 1});
  Value* d = b.Input("d", DType::kF32, {3});
  Value* e = b.Input("e", DType::kF32, {Sym("seq")});
  Value* f = b.Input("f", DType::kF32, {Sym("past")});
  Value* ac = b.Op("Add", {a, c});
  Value* ad = b.Op("Mul", {a, d});
  Value* ae = b.Op("Sub", {a, e});
  Value* ef = b.Op("Div", {e, f});
  Value* cmp = b.Op("Less", {a, c});
  Value* w = b.Op("Where", {cmp, a, c});
  RequireOk(b.Infer());
  CHECK(ShapeOf(ac) == "[batch, 8, seq]");
  CHECK(ShapeOf(ad) == "[batch, 1, 3]");  // seq must be 1 or 3: 3
  CHECK(ShapeOf(ae) == "[batch, 1, seq]");
  CHECK(ShapeOf(ef) == "[?]");  // two different symbols
  CHECK(cmp->type().dtype == DType::kBool);
  CHECK(ShapeOf(w) == "[batch, 8, seq]");
  CHECK(w->type().dtype == DType::kF32);
}

TEST_CASE("Bitwise operators of opset 18 broadcast", "[shape]") {
  // Newer than libonnx 1.12: tpc's own rules.
  Builder b(18);
  Value* a = b.Input("a", DType::kI32, {Sym("batch"), 1, 4});
  Value* c = b.Input("c", DType::kI32, {3, 1});
  Value* band = b.Op("BitwiseAnd", {a, c});
  Value* bor = b.Op("BitwiseOr", {a, c});
  Value* bxor = b.Op("BitwiseXor", {c, a});
  Value* bnot = b.Op("BitwiseNot", {a});
  RequireOk(b.Infer());
  CHECK(band->type().ToString() == "i32[batch, 3, 4]");
  CHECK(bor->type().ToString() == "i32[batch, 3, 4]");
  CHECK(bxor->type().ToString() == "i32[batch, 3, 4]");
  CHECK(bnot->type().ToString() == "i32[batch, 1, 4]");
}

TEST_CASE("Broadcast mismatch names the node", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), 3});
  Value* y = b.Input("y", DType::kF32, {4});
  b.g.AddCall("", "Add", {x, y}, {"z"}, {}, "/h.0/Add");
  absl::Status s = b.Infer();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()) == "node '/h.0/Add' (Add): cannot broadcast [batch, 3] with [4]");
}

TEST_CASE("Unsupported operator", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {2});
  b.g.AddCall("", "FooBar", {x}, {"y"}, {}, "/foo");
  absl::Status s = b.Infer();
  CHECK(s.code() == absl::StatusCode::kUnimplemented);
  CHECK(std::string(s.message()) ==
        "node '/foo' (FooBar): unsupported operator 'FooBar' (no shape rule)");
}

TEST_CASE("MatMul and Gemm", "[shape]") {
  Builder b(17);
  Value* q = b.Input("q", DType::kF16, {Sym("batch"), 12, Sym("seq"), 64});
  Value* k = b.Input("k", DType::kF16, {Sym("batch"), 12, 64, Sym("seq")});
  Value* h = b.Input("h", DType::kF16, {Sym("batch"), Sym("seq"), 768});
  Value* w = b.Input("w", DType::kF16, {768, 3072});
  Value* v = b.Input("v", DType::kF16, {768});
  Value* a = b.Input("a", DType::kF32, {Sym("batch"), 64});
  Value* bt = b.Input("bt", DType::kF32, {32, 64});
  Value* at = b.Input("at", DType::kF32, {64, Sym("batch")});
  Value* bias = b.Input("bias", DType::kF32, {32});
  Value* qk = b.Op("MatMul", {q, k});
  Value* hw = b.Op("MatMul", {h, w});
  Value* hv = b.Op("MatMul", {h, v});
  Value* vw = b.Op("MatMul", {v, w});
  Value* g1 = b.Op("Gemm", {a, bt, bias}, {{"transB", int64_t{1}}});
  Value* g2 = b.Op("Gemm", {at, bt}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}});
  RequireOk(b.Infer());
  CHECK(ShapeOf(qk) == "[batch, 12, seq, seq]");
  CHECK(qk->type().dtype == DType::kF16);
  CHECK(ShapeOf(hw) == "[batch, seq, 3072]");
  CHECK(ShapeOf(hv) == "[batch, seq]");
  CHECK(ShapeOf(vw) == "[3072]");
  CHECK(ShapeOf(g1) == "[batch, 32]");
  CHECK(ShapeOf(g2) == "[batch, 32]");

  Builder bad(17);
  Value* x = bad.Input("x", DType::kF32, {2, 3});
  bad.Op("MatMul", {x, x});
  CHECK(std::string(bad.Infer().message()).find("cannot multiply [2, 3] by [2, 3]") !=
        std::string::npos);
}

TEST_CASE("ReduceMean axes as attribute or input", "[shape]") {
  Builder old(13);
  Value* x = old.Input("x", DType::kF32, {Sym("batch"), Sym("seq"), 64});
  Value* m = old.Op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{-1}}});
  Value* s = old.Op("ReduceSum", {x, old.Ints({1})}, {{"keepdims", int64_t{0}}});
  Value* all = old.Op("ReduceMax", {x}, {{"keepdims", int64_t{0}}});
  Value* am = old.Op("ArgMax", {x}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
  RequireOk(old.Infer());
  CHECK(ShapeOf(m) == "[batch, seq, 1]");
  CHECK(ShapeOf(s) == "[batch, 64]");
  CHECK(ShapeOf(all) == "[]");
  CHECK(ShapeOf(am) == "[batch, seq]");
  CHECK(am->type().dtype == DType::kI64);

  Builder b(18);
  Value* y = b.Input("y", DType::kF32, {Sym("batch"), Sym("seq"), 64});
  Value* m2 = b.Op("ReduceMean", {y, b.Ints({-1})}, {{"keepdims", int64_t{0}}});
  Value* noop = b.Op("ReduceMean", {y}, {{"noop_with_empty_axes", int64_t{1}}});
  RequireOk(b.Infer());
  CHECK(ShapeOf(m2) == "[batch, seq]");
  CHECK(ShapeOf(noop) == "[batch, seq, 64]");
}

TEST_CASE("Split old and new signatures", "[shape]") {
  Builder old(11);
  Value* x = old.Input("x", DType::kF32, {Sym("batch"), Sym("seq"), 96});
  ir::Node* s1 =
      old.Node("Split", {x}, {{"axis", int64_t{-1}}, {"split", std::vector<int64_t>{32, 64}}}, 2);
  ir::Node* s2 = old.Node("Split", {x}, {{"axis", int64_t{2}}}, 3);
  RequireOk(old.Infer());
  CHECK(ShapeOf(s1->output(0)) == "[batch, seq, 32]");
  CHECK(ShapeOf(s1->output(1)) == "[batch, seq, 64]");
  CHECK(ShapeOf(s2->output(2)) == "[batch, seq, 32]");

  Builder b(18);
  Value* y = b.Input("y", DType::kF32, {Sym("batch"), Sym("seq") * Dim(2), 64});
  ir::Node* s3 = b.Node("Split", {y, b.Ints({16, 48})}, {{"axis", int64_t{2}}}, 2);
  ir::Node* s4 = b.Node("Split", {y}, {{"axis", int64_t{2}}, {"num_outputs", int64_t{3}}}, 3);
  ir::Node* s5 = b.Node("Split", {y}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}}, 2);
  RequireOk(b.Infer());
  CHECK(ShapeOf(s3->output(1)) == "[batch, 2*seq, 48]");
  CHECK(ShapeOf(s4->output(0)) == "[batch, 2*seq, 22]");
  CHECK(ShapeOf(s4->output(2)) == "[batch, 2*seq, 20]");
  CHECK(ShapeOf(s5->output(1)) == "[batch, seq, 64]");

  Builder bad(13);
  Value* z = bad.Input("z", DType::kF32, {10});
  bad.Node("Split", {z, bad.Ints({3, 3})}, {}, 2);
  CHECK(std::string(bad.Infer().message()).find("do not add up to 10") != std::string::npos);
}

TEST_CASE("Squeeze and Unsqueeze old and new", "[shape]") {
  Builder old(11);
  Value* x = old.Input("x", DType::kF32, {Sym("batch"), 1, Sym("seq"), 1});
  Value* sq = old.Op("Squeeze", {x}, {{"axes", std::vector<int64_t>{1}}});
  Value* all = old.Op("Squeeze", {x});
  Value* un = old.Op("Unsqueeze", {x}, {{"axes", std::vector<int64_t>{0, -1}}});
  RequireOk(old.Infer());
  CHECK(ShapeOf(sq) == "[batch, seq, 1]");
  CHECK(ShapeOf(all) == "[batch, seq]");
  CHECK(ShapeOf(un) == "[1, batch, 1, seq, 1, 1]");

  Builder b(13);
  Value* y = b.Input("y", DType::kF32, {Sym("batch"), 1, Sym("seq"), 1});
  Value* sq2 = b.Op("Squeeze", {y, b.Ints({-1, 1})});
  Value* un2 = b.Op("Unsqueeze", {y, b.Ints({1})});
  b.Op("Squeeze", {y, b.Ints({0})});  // batch is taken to be 1
  b.Op("Squeeze", {b.Input("z", DType::kF32, {3, 1}), b.Ints({0})});
  absl::Status s = b.Infer();
  CHECK(ShapeOf(sq2) == "[batch, seq]");
  CHECK(ShapeOf(un2) == "[batch, 1, 1, seq, 1]");
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("cannot squeeze dim 0 of [3, 1] (not 1)") !=
        std::string::npos);
}

TEST_CASE("Slice on symbolic dims", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), Sym("seq"), 64});
  Value* mask = b.Input("mask", DType::kBool, {1, 1, 1024, 1024});
  Value* all = b.Op("Slice", {x, b.Ints({0}), b.Ints({kMax}), b.Ints({1})});
  Value* drop_last = b.Op("Slice", {x, b.Ints({0}), b.Ints({-1}), b.Ints({1})});
  Value* last = b.Op("Slice", {x, b.Ints({-1}), b.Ints({kMax}), b.Ints({1})});
  Value* from2 = b.Op("Slice", {x, b.Ints({2}), b.Ints({kMax}), b.Ints({-2})});
  Value* down = b.Op("Slice", {x, b.Ints({60}), b.Ints({0}), b.Ints({2}), b.Ints({-2})});
  Value* reversed =
      b.Op("Slice", {x, b.Ints({-1}), b.Ints({INT64_MIN}), b.Ints({-1}), b.Ints({-1})});
  Value* shape = b.Op("Shape", {x});
  Value* seq = b.Op("Slice", {shape, b.Ints({1}), b.Ints({2})});
  Value* causal = b.Op(
      "Slice",
      {mask, b.Ints({0, 0}), b.Op("Concat", {seq, seq}, {{"axis", int64_t{0}}}), b.Ints({2, 3})});
  RequireOk(b.Infer());
  CHECK(ShapeOf(all) == "[batch, seq, 64]");
  CHECK(ShapeOf(drop_last) == "[batch, seq-1, 64]");
  CHECK(ShapeOf(last) == "[batch, 1, 64]");
  CHECK(ShapeOf(from2) == "[batch, seq-2, 64]");
  CHECK(ShapeOf(down) == "[batch, seq, 30]");
  CHECK(ShapeOf(reversed) == "[batch, seq, 64]");
  CHECK(ValueOf(seq) == "[seq]");
  CHECK(ShapeOf(causal) == "[1, 1, seq, seq]");
}

TEST_CASE("Range, ConstantOfShape, Equal and Where on known values", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), Sym("seq"), 64});
  Value* shape = b.Op("Shape", {x});
  Value* seq = b.Op("Gather", {shape, b.Scalar(1)});
  Value* positions = b.Op("Range", {b.Scalar(0), seq, b.Scalar(1)});
  Value* small = b.Op("Range", {b.Scalar(1), b.Scalar(10), b.Scalar(3)});
  // HF pattern: Where(Equal(target, -1), ones, target).
  Value* target = b.Op("Concat", {b.Ints({-1}), b.Op("Slice", {shape, b.Ints({1}), b.Ints({3})})},
                       {{"axis", int64_t{0}}});
  Value* eq = b.Op("Equal", {target, b.Scalar(-1)});
  Value* ones =
      b.Op("ConstantOfShape", {b.Ints({3})}, {{"value", ir::Tensor::FromInt64({1}, {1})}});
  Value* fixed = b.Op("Where", {eq, ones, target});
  Value* seq_plus = b.Op("Add", {seq, b.Scalar(2)});
  Value* halves = b.Op("Div", {b.Op("Mul", {seq, b.Scalar(4)}), b.Scalar(2)});
  Value* sz = b.Op("Size", {x});
  RequireOk(b.Infer());
  CHECK(ShapeOf(positions) == "[seq]");
  CHECK(positions->type().dtype == DType::kI64);
  CHECK(ValueOf(small) == "[1, 4, 7]");
  CHECK(ValueOf(target) == "[-1, seq, 64]");
  CHECK(eq->type().dtype == DType::kBool);
  CHECK(ValueOf(eq) == "[1, 0, 0]");
  CHECK(ValueOf(ones) == "[1, 1, 1]");
  CHECK(ones->type().dtype == DType::kI64);
  CHECK(ValueOf(fixed) == "[1, seq, 64]");
  CHECK(ValueOf(seq_plus) == "[seq+2]");
  CHECK(ValueOf(halves) == "[2*seq]");
  CHECK(ValueOf(sz) == "[64*batch*seq]");
}

TEST_CASE("Expand for grouped-query attention", "[shape]") {
  Builder b(17);
  Value* k = b.Input("k", DType::kF16, {Sym("batch"), 2, Sym("seq"), 16});
  Value* k5 = b.Op("Unsqueeze", {k, b.Ints({2})});
  Value* shape = b.Op("Shape", {k});
  Value* bd = b.Op("Unsqueeze", {b.Op("Gather", {shape, b.Scalar(0)}), b.Ints({0})});
  Value* sd = b.Op("Unsqueeze", {b.Op("Gather", {shape, b.Scalar(2)}), b.Ints({0})});
  Value* target = b.Op("Concat", {bd, b.Ints({2, 2}), sd, b.Ints({16})}, {{"axis", int64_t{0}}});
  Value* e = b.Op("Expand", {k5, target});
  Value* r = b.Op("Reshape", {e, b.Ints({0, 4, -1, 16})});
  RequireOk(b.Infer());
  CHECK(ShapeOf(k5) == "[batch, 2, 1, seq, 16]");
  CHECK(ShapeOf(e) == "[batch, 2, 2, seq, 16]");
  CHECK(ShapeOf(r) == "[batch, 4, seq, 16]");
}

TEST_CASE("Losses, TopK, LayerNormalization, Transpose, Einsum", "[shape]") {
  Builder b(17);
  Value* scores = b.Input("scores", DType::kF32, {Sym("n"), 50257});
  Value* labels = b.Input("labels", DType::kI64, {Sym("n")});
  ir::Node* mean = b.Node("SoftmaxCrossEntropyLoss", {scores, labels}, {}, 2);
  ir::Node* none =
      b.Node("SoftmaxCrossEntropyLoss", {scores, labels}, {{"reduction", std::string("none")}});
  Value* nll =
      b.Op("NegativeLogLikelihoodLoss", {scores, labels}, {{"reduction", std::string("sum")}});
  ir::Node* topk = b.Node("TopK", {scores, b.Ints({5})}, {}, 2);
  Value* x = b.Input("x", DType::kF16, {Sym("batch"), Sym("seq"), 64});
  Value* w = b.Input("w", DType::kF16, {64});
  ir::Node* ln = b.Node("LayerNormalization", {x, w, w}, {}, 3);
  Value* t = b.Op("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value* es = b.Op("Einsum", {x, b.Input("y", DType::kF16, {Sym("batch"), 64, 8})},
                   {{"equation", std::string("bsh,bhk->bsk")}});
  RequireOk(b.Infer());
  CHECK(ShapeOf(mean->output(0)) == "[]");
  CHECK(ShapeOf(mean->output(1)) == "[n, 50257]");
  CHECK(ShapeOf(none->output(0)) == "[n]");
  CHECK(none->output(0)->type().dtype == DType::kF32);
  CHECK(ShapeOf(nll) == "[]");
  CHECK(ShapeOf(topk->output(0)) == "[n, 5]");
  CHECK(topk->output(1)->type().dtype == DType::kI64);
  CHECK(ShapeOf(ln->output(0)) == "[batch, seq, 64]");
  CHECK(ShapeOf(ln->output(1)) == "[batch, seq, 1]");
  CHECK(ln->output(2)->type().dtype == DType::kF32);
  CHECK(ShapeOf(t) == "[seq, batch, 64]");
  CHECK(ShapeOf(es) == "[batch, seq, 8]");
}

// OneHot's depth is an input: a constant (of any numeric type) or a known shape value
// gives the inserted dim (without it the cost model would price a one-hot of experts as
// a dim the data sizes); anything else leaves it unknown, and a negative depth is refused.
TEST_CASE("OneHot inserts its depth at the axis", "[shape]") {
  Builder b(18);
  Value* idx = b.Input("idx", DType::kI64, {Sym("t"), 2});
  Value* values = b.g.AddConstant("values", ir::Tensor::FromFloat({2}, {0.0f, 1.0f}));
  Value* last = b.Op("OneHot", {idx, b.Scalar(4), values});
  Value* first = b.Op("OneHot", {idx, b.Ints({4}), values}, {{"axis", int64_t{0}}});
  Value* fdepth = b.g.AddConstant("fdepth", ir::Tensor::FromFloat({}, {3.7f}));
  Value* by_float = b.Op("OneHot", {idx, fdepth, values}, {{"axis", int64_t{-2}}});
  Value* shape = b.Op("Shape", {b.Input("x", DType::kF32, {Sym("e")})});
  Value* symbolic = b.Op("OneHot", {idx, shape, values});
  Value* runtime = b.Op("OneHot", {idx, b.Input("d", DType::kI64, {}), values});
  RequireOk(b.Infer());
  CHECK(ShapeOf(last) == "[t, 2, 4]");
  CHECK(last->type().dtype == DType::kF32);
  CHECK(ShapeOf(first) == "[4, t, 2]");
  CHECK(ShapeOf(by_float) == "[t, 3, 2]");
  CHECK(ShapeOf(symbolic) == "[t, 2, e]");
  CHECK(ShapeOf(runtime) == "[t, 2, ?]");
  Builder bad(18);
  bad.Op("OneHot", {bad.Input("idx", DType::kI64, {3}), bad.Scalar(-2),
                    bad.g.AddConstant("v", ir::Tensor::FromFloat({2}, {0.0f, 1.0f}))});
  const absl::Status s = bad.Infer();
  INFO(s.ToString());
  CHECK(s.message().find("depth -2 is negative or too large") != std::string::npos);
}

// NonZero's count and Compress's selection are sized by the data, and so is what is
// computed from them: Optimum's mixture of experts gathers an expert's tokens by NonZero
// and reshapes them with -1 ([1, n, 64] to [n, 64]).
TEST_CASE("NonZero and Compress give dims the data sizes", "[shape]") {
  Builder b(18);
  Value* mask = b.Input("mask", DType::kBool, {2, Sym("t")});
  Value* nz = b.Op("NonZero", {mask});
  Value* rows = b.Op("Gather", {nz, b.Scalar(1)});
  Value* x = b.Input("x", DType::kF32, {1, Sym("t"), 64});
  Value* picked = b.Op("Gather", {x, rows}, {{"axis", int64_t{1}}});
  Value* flat = b.Op("Reshape", {picked, b.Ints({-1, 64})});
  Value* cond = b.Input("cond", DType::kBool, {Sym("t")});
  Value* along = b.Op("Compress", {x, cond}, {{"axis", int64_t{1}}});
  Value* all = b.Op("Compress", {x, cond});
  Value* plain = b.Op("Reshape", {b.Input("y", DType::kF32, {Dim::Unknown(), 64}), b.Ints({-1})});
  // An unknown meeting one the data sizes, in either order.
  Value* y = b.Input("y2", DType::kF32, {Dim::Unknown(), 64});
  Value* sum1 = b.Op("Add", {y, flat});
  Value* sum2 = b.Op("Add", {flat, y});
  RequireOk(b.Infer());
  CHECK(ShapeOf(nz) == "[2, ?]");
  CHECK(nz->type().dtype == DType::kI64);
  CHECK((*nz->type().shape)[1].is_sized_by_data());
  CHECK((*rows->type().shape)[0].is_sized_by_data());
  CHECK((*picked->type().shape)[1].is_sized_by_data());
  CHECK(ShapeOf(flat) == "[?, 64]");
  CHECK((*flat->type().shape)[0].is_sized_by_data());
  CHECK(ShapeOf(along) == "[1, ?, 64]");
  CHECK((*along->type().shape)[1].is_sized_by_data());
  CHECK(ShapeOf(all) == "[?]");
  CHECK((*all->type().shape)[0].is_sized_by_data());
  CHECK_FALSE((*plain->type().shape)[0].is_sized_by_data());
  CHECK((*sum1->type().shape)[0].is_sized_by_data());
  CHECK((*sum2->type().shape)[0].is_sized_by_data());
}

// swin pads its feature map to a multiple of the window: (window - size % window) % window.
TEST_CASE("Mod of known integers is known, with either sign rule", "[shape]") {
  Builder b(17);
  Value* pad = b.Op(
      "Mod", {b.Op("Sub", {b.Scalar(4), b.Op("Mod", {b.Scalar(6), b.Scalar(4)})}), b.Scalar(4)});
  Value* python = b.Op("Mod", {b.Ints({-3, 3, 7}), b.Ints({4, -4, 4})});
  Value* c = b.Op("Mod", {b.Ints({-3, 3, 7}), b.Ints({4, -4, 4})}, {{"fmod", int64_t{1}}});
  RequireOk(b.Infer());
  CHECK(ValueOf(pad) == "[2]");
  CHECK(ValueOf(python) == "[1, -1, 3]");
  CHECK(ValueOf(c) == "[-3, 3, 3]");
}

TEST_CASE("torch Pad lowering evaluates pads through a rank-2 value", "[shape]") {
  Builder b(17);
  Value* labels = b.Input("labels", DType::kI64, {Sym("batch"), Sym("seq")});
  Value* zeros =
      b.Op("ConstantOfShape", {b.Ints({2})}, {{"value", ir::Tensor::FromInt64({1}, {0})}});
  Value* pairs = b.Op("Reshape", {b.Op("Concat", {b.Ints({0, 1}), zeros}, {{"axis", int64_t{0}}}),
                                  b.Ints({-1, 2})});
  Value* rev =
      b.Op("Slice", {pairs, b.Ints({-1}), b.Ints({INT64_MIN + 1}), b.Ints({0}), b.Ints({-1})});
  Value* pads = b.Op(
      "Reshape", {b.Op("Transpose", {rev}, {{"perm", std::vector<int64_t>{1, 0}}}), b.Ints({-1})});
  Value* padded = b.Op("Pad", {labels, pads, b.Scalar(-100)});
  Value* shifted = b.Op("Slice", {padded, b.Ints({1}), b.Ints({kMax}), b.Ints({1})});
  RequireOk(b.Infer());
  CHECK(ValueOf(pads) == "[0, 0, 0, 1]");
  CHECK(ValueOf(pairs) == "none");  // rank 2: used while inferring, then dropped
  CHECK(ShapeOf(padded) == "[batch, seq+1]");
  CHECK(ShapeOf(shifted) == "[batch, seq]");
}

TEST_CASE("libonnx infers an operator without a rule and symbolic dims pass through", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), 8, 8, 8});
  Value* w = b.g.AddConstant("w", ir::Tensor::Elided(DType::kF32, {8, 3, 4, 4}));
  Value* y = b.Op("ConvTranspose", {x, w}, {{"strides", std::vector<int64_t>{4, 4}}});
  // Over a symbolic length libonnx cannot know the output length.
  Value* s = b.Input("s", DType::kF32, {Sym("batch"), 8, Sym("seq")});
  Value* w1 = b.g.AddConstant("w1", ir::Tensor::Elided(DType::kF32, {8, 3, 5}));
  Value* y1 = b.Op("ConvTranspose", {s, w1});
  // A constant input's data reaches libonnx (Resize's scales); it computes static dims only.
  Value* img = b.Input("img", DType::kF32, {Sym("batch"), 3, 4, 4});
  Value* scales = b.g.AddConstant("scales", ir::Tensor::FromFloat({4}, {1, 1, 2, 2}));
  Value* up = b.Op("Resize", {img, nullptr, scales});
  RequireOk(b.Infer());
  CHECK(y->type().ToString() == "f32[batch, 3, 32, 32]");
  CHECK(y1->type().ToString() == "f32[batch, 3, ?]");
  CHECK(up->type().ToString() == "f32[?, 3, 8, 8]");
}

TEST_CASE("Conv and pools keep symbolic dims where the window allows", "[shape]") {
  Builder b(19);
  Value* img = b.Input("img", DType::kF32, {Sym("batch"), 3, 224, 224});
  Value* patches = b.g.AddConstant("patches", ir::Tensor::Elided(DType::kF32, {768, 3, 16, 16}));
  Value* embed = b.Op("Conv", {img, patches}, {{"strides", std::vector<int64_t>{16, 16}}});
  Value* audio = b.Input("audio", DType::kF32, {Sym("batch"), 80, Sym("seq")});
  Value* w = b.g.AddConstant("w", ir::Tensor::Elided(DType::kF32, {384, 80, 3}));
  Value* same = b.Op("Conv", {audio, w}, {{"pads", std::vector<int64_t>{1, 1}}});
  Value* valid = b.Op("Conv", {audio, w});
  Value* strided = b.Op("Conv", {audio, w}, {{"strides", std::vector<int64_t>{2}}});
  ir::Node* mp = b.Node("MaxPool", {img},
                        {{"kernel_shape", std::vector<int64_t>{3, 3}},
                         {"strides", std::vector<int64_t>{2, 2}},
                         {"ceil_mode", int64_t{1}}},
                        2);
  // Dilations of pools came with opset 19.
  Value* avg = b.Op(
      "AveragePool", {img},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"dilations", std::vector<int64_t>{2, 2}}});
  RequireOk(b.Infer());
  CHECK(embed->type().ToString() == "f32[batch, 768, 14, 14]");
  CHECK(same->type().ToString() == "f32[batch, 384, seq]");
  CHECK(valid->type().ToString() == "f32[batch, 384, seq-2]");
  CHECK(strided->type().ToString() == "f32[batch, 384, ?]");
  CHECK(mp->output(0)->type().ToString() == "f32[batch, 3, 112, 112]");
  CHECK(mp->output(1)->type().ToString() == "i64[batch, 3, 112, 112]");
  CHECK(avg->type().ToString() == "f32[batch, 3, 220, 220]");
}

TEST_CASE("Conv refuses weights that do not fit its groups", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {1, 6, 8});
  Value* w = b.g.AddConstant("w", ir::Tensor::Elided(DType::kF32, {4, 4, 3}));
  b.Op("Conv", {x, w}, {{"group", int64_t{2}}});
  absl::Status s = b.Infer();
  CHECK(std::string(s.message()) ==
        "node '/Conv_1' (Conv): X f32[1, 6, 8] and W f32[4, 4, 3] do not fit 2 groups");
}

TEST_CASE("libonnx inference errors name the node", "[shape]") {
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {8, 4, 4});
  b.Op("DepthToSpace", {x}, {{"blocksize", int64_t{2}}});
  absl::Status s = b.Infer();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::StartsWith("node '/DepthToSpace_1' (DepthToSpace): shape inference (libonnx)"));
}

TEST_CASE("an operator making a sequence is refused as one", "[shape]") {
  // torch's TorchScript exporter writes torch.unbind as SplitToSequence (Mamba's scan).
  Builder b(17);
  Value* x = b.Input("x", DType::kF32, {2, 8, 4});
  b.Op("SplitToSequence", {x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
  absl::Status s = b.Infer();
  CHECK(std::string(s.message()) ==
        "node '/SplitToSequence_1' (SplitToSequence): shape inference (libonnx) gives output 0 "
        "a sequence: tpc handles tensors of its element types only");
}

TEST_CASE("libonnx keeps only ranks for an operator whose shapes changed after opset 17",
          "[shape]") {
  // DFT-20 takes its axis as an input (default -2); libonnx 1.12's DFT-17 reads an
  // attribute (default 1).
  Builder b(20);
  Value* x = b.Input("x", DType::kF32, {1, 8, 1});
  Value* y = b.Op("DFT", {x});
  RequireOk(b.Infer());
  CHECK(y->type().ToString() == "f32[?, ?, ?]");
}

TEST_CASE("GridSample, AffineGrid and DeformConv keep symbolic dims", "[shape]") {
  Builder b(22);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), 3, 8, 8, 8});
  Value* grid = b.Input("grid", DType::kF32, {Sym("batch"), 2, Sym("h"), 5, 3});
  Value* sampled = b.Op("GridSample", {x, grid}, {{"mode", std::string("nearest")}});
  Value* theta = b.Input("theta", DType::kF32, {Sym("batch"), 2, 3});
  Value* size = b.Input("size", DType::kI64, {4});
  Value* unknown = b.Op("AffineGrid", {theta, size});
  Value* known = b.Op("AffineGrid", {theta, b.Ints({4, 3, 6, 7})});
  Value* img = b.Input("img", DType::kF32, {Sym("batch"), 4, 9, 9});
  Value* w = b.g.AddConstant("w", ir::Tensor::Elided(DType::kF32, {6, 4, 3, 3}));
  Value* offset = b.Input("offset", DType::kF32, {Sym("batch"), 18, 7, 7});
  Value* deformed = b.Op("DeformConv", {img, w, offset});
  RequireOk(b.Infer());
  CHECK(sampled->type().ToString() == "f32[batch, 3, 2, h, 5]");
  CHECK(unknown->type().ToString() == "f32[batch, ?, ?, 2]");
  CHECK(known->type().ToString() == "f32[batch, 6, 7, 2]");
  CHECK(deformed->type().ToString() == "f32[batch, 6, 7, 7]");

  Builder bad(22);
  bad.Op("GridSample",
         {bad.Input("x", DType::kF32, {1, 3, 8, 8}), bad.Input("grid", DType::kF32, {1, 4, 4, 3})});
  CHECK(std::string(bad.Infer().message()) ==
        "node '/GridSample_1' (GridSample): the grid's last dim is 3, X has 2 spatial dims");
}

TEST_CASE("Attention: 3-D and 4-D forms, grouped K/V heads and a past cache", "[shape]") {
  Builder b(23);
  Value* q = b.Input("q", DType::kF32, {Sym("batch"), Sym("seq"), 512});
  Value* k = b.Input("k", DType::kF32, {Sym("batch"), Sym("seq"), 128});
  Value* v = b.Input("v", DType::kF32, {Sym("batch"), Sym("seq"), 128});
  Value* past_k = b.Input("past_k", DType::kF32, {Sym("batch"), 2, Sym("past"), 64});
  Value* past_v = b.Input("past_v", DType::kF32, {Sym("batch"), 2, Sym("past"), 64});
  ir::Node* a3 = b.Node("Attention", {q, k, v, nullptr, past_k, past_v},
                        {{"q_num_heads", int64_t{8}}, {"kv_num_heads", int64_t{2}}}, 4);
  Value* q4 = b.Input("q4", DType::kF32, {2, 8, 5, 64});
  Value* k4 = b.Input("k4", DType::kF32, {2, 2, 7, 64});
  Value* v4 = b.Input("v4", DType::kF32, {2, 2, 7, 32});
  Value* y4 = b.Op("Attention", {q4, k4, v4});
  RequireOk(b.Infer());
  CHECK(ShapeOf(a3->output(0)) == "[batch, seq, 512]");
  CHECK(ShapeOf(a3->output(1)) == "[batch, 2, past+seq, 64]");
  CHECK(ShapeOf(a3->output(2)) == "[batch, 2, past+seq, 64]");
  CHECK(ShapeOf(a3->output(3)) == "[batch, 8, seq, past+seq]");
  CHECK(ShapeOf(y4) == "[2, 8, 5, 32]");
  Builder bad(23);
  Value* q3 = bad.Input("q", DType::kF32, {1, 4, 64});
  bad.Op("Attention", {q3, q3, q3});
  CHECK(std::string(bad.Infer().message()) ==
        "node '/Attention_1' (Attention): 3-D Q, K and V need the q_num_heads and kv_num_heads "
        "attributes");
}

TEST_CASE("QuantizeLinear and DequantizeLinear keep symbolic dims and the types of opset 21",
          "[shape]") {
  Builder b(21);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), 8});
  Value* scale = b.Input("scale", DType::kF32, {Sym("batch"), 4});
  Value* zp = b.Input("zp", DType::kI8, {Sym("batch"), 4});
  Value* q16 =
      b.Op("QuantizeLinear", {x, scale},
           {{"axis", int64_t{1}}, {"block_size", int64_t{2}}, {"output_dtype", int64_t{5}}});
  Value* q8 =
      b.Op("QuantizeLinear", {x, scale, zp}, {{"axis", int64_t{1}}, {"block_size", int64_t{2}}});
  Value* qu8 = b.Op("QuantizeLinear", {x, b.Input("s", DType::kF32, {})});
  Value* h = b.Input("h", DType::kF16, {});
  Value* dq = b.Op("DequantizeLinear", {q8, h});
  RequireOk(b.Infer());
  CHECK(q16->type().ToString() == "i16[batch, 8]");
  CHECK(q8->type().ToString() == "i8[batch, 8]");
  CHECK(qu8->type().ToString() == "u8[batch, 8]");
  CHECK(dq->type().ToString() == "f16[batch, 8]");

  Builder bad(21);
  Value* bx = bad.Input("x", DType::kF32, {4});
  bad.Op("QuantizeLinear", {bx, bad.Input("s", DType::kF32, {}), bad.Input("z", DType::kU8, {})},
         {{"output_dtype", int64_t{3}}});
  CHECK_THAT(std::string(bad.Infer().message()), Catch::Contains("differs from the zero point"));
}

TEST_CASE("CenterCropPad and Col2Im take their sizes from known values", "[shape]") {
  Builder b(18);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), 10, 7});
  Value* crop =
      b.Op("CenterCropPad", {x, b.Ints({4, 9})}, {{"axes", std::vector<int64_t>{-2, -1}}});
  Value* sizes = b.Input("sizes", DType::kI64, {2});
  Value* unknown = b.Op("CenterCropPad", {x, sizes}, {{"axes", std::vector<int64_t>{1, 2}}});
  Value* cols = b.Input("cols", DType::kF32, {Sym("batch"), 12, 20});
  Value* im = b.Op("Col2Im", {cols, b.Ints({5, 8}), b.Ints({2, 3})});
  Value* im2 = b.Op("Col2Im", {cols, sizes, b.Ints({2, 3})});
  RequireOk(b.Infer());
  CHECK(ShapeOf(crop) == "[batch, 4, 9]");
  CHECK(ShapeOf(unknown) == "[batch, ?, ?]");
  CHECK(ShapeOf(im) == "[batch, 2, 5, 8]");
  CHECK(ShapeOf(im2) == "[batch, 2, ?, ?]");
}

TEST_CASE("Axes, split sizes and pads computed at run time keep the rank", "[shape]") {
  Builder b(18);
  Value* x = b.Input("x", DType::kF32, {Sym("batch"), 6, 4});
  Value* axes1 = b.Input("axes1", DType::kI64, {1});
  Value* axes2 = b.Input("axes2", DType::kI64, {2});
  Value* starts = b.Input("starts", DType::kI64, {1});
  Value* steps = b.Input("steps", DType::kI64, {1});
  // Slice: unknown axes make every dim unknown; unknown steps only the sliced one.
  Value* slice = b.Op("Slice", {x, b.Ints({1}), b.Ints({3}), axes1});
  Value* bounds = b.Op("Slice", {x, starts, b.Ints({3}), b.Ints({1})});
  Value* stepped = b.Op("Slice", {x, b.Ints({1}), b.Ints({3}), b.Ints({2}), steps});
  // Split: one output per part, of unknown length on the axis.
  Value* sizes = b.Input("sizes", DType::kI64, {3});
  ir::Node* split = b.Node("Split", {x, sizes}, {{"axis", int64_t{1}}}, 3);
  ir::Node* one = b.Node("Split", {x, b.Input("one", DType::kI64, {1})}, {}, 1);
  Value* empty = b.Input("empty", DType::kF32, {0, 4});
  ir::Node* zeros = b.Node("Split", {empty, sizes}, {}, 3);
  // Unsqueeze: the rank grows by the axes' count; a scalar gets only 1s.
  Value* un = b.Op("Unsqueeze", {x, axes2});
  Value* scalar = b.Op("Unsqueeze", {b.Scalar(7), axes1});
  // Squeeze: the rank drops by the axes' count; the dims are known when the 1s are.
  Value* sq = b.Op("Squeeze", {b.Input("y", DType::kF32, {Sym("batch"), 1, 4}), axes1});
  Value* sq_static = b.Op("Squeeze", {b.Input("z", DType::kF32, {3, 1, 4, 1}), axes2});
  // Pad: unknown axes make every dim unknown, unless no pad is other than 0.
  Value* fill = b.Input("fill", DType::kF32, {});
  Value* pad = b.Op("Pad", {x, b.Ints({1, 2}), fill, axes1});
  Value* no_pad = b.Op("Pad", {x, b.Ints({0, 0}), fill, axes1});
  RequireOk(b.Infer());
  CHECK(ShapeOf(slice) == "[?, ?, ?]");
  CHECK(ShapeOf(bounds) == "[batch, ?, 4]");
  CHECK(ShapeOf(stepped) == "[batch, 6, ?]");
  REQUIRE(split->num_outputs() == 3);
  CHECK(ShapeOf(split->output(0)) == "[batch, ?, 4]");
  CHECK(ShapeOf(split->output(2)) == "[batch, ?, 4]");
  CHECK(ShapeOf(one->output(0)) == "[batch, 6, 4]");
  CHECK(ShapeOf(zeros->output(1)) == "[0, 4]");
  CHECK(ShapeOf(un) == "[?, ?, ?, ?, ?]");
  CHECK(ShapeOf(scalar) == "[1]");
  CHECK(ValueOf(scalar) == "[7]");
  CHECK(ShapeOf(sq) == "[?, ?]");
  CHECK(ShapeOf(sq_static) == "[3, 4]");
  CHECK(ShapeOf(pad) == "[?, ?, ?]");
  CHECK(ShapeOf(no_pad) == "[batch, 6, 4]");

  // The output rank itself unknown: the error names the node.
  Builder bad(13);
  Value* y = bad.Input("y", DType::kF32, {3, 1, 4});
  bad.Op("Squeeze", {y, bad.Input("axes", DType::kI64, {Sym("n")})});
  const absl::Status s = bad.Infer();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("/Squeeze_1") && Catch::Contains("their count is unknown ([n])"));

  Builder parts(13);
  Value* w = parts.Input("w", DType::kF32, {6});
  parts.Node("Split", {w, parts.Input("split", DType::kI64, {3})}, {}, 2);
  CHECK_THAT(std::string(parts.Infer().message()),
             Catch::Contains("split has 3 sizes for 2 outputs"));
}

TEST_CASE("what onnxruntime refuses of torch's Mamba exports is refused", "[shape]") {
  // Tile's repeats 2-D (1-D is right, and still infers).
  Builder tile(17);
  Value* v = tile.Input("v", DType::kI64, {1});
  tile.Op("Tile", {v, tile.Input("r", DType::kI64, {1, 1})});
  CHECK_THAT(std::string(tile.Infer().message()),
             Catch::Contains("repeats is i64[1, 1]; a Tile's repeats is 1-D"));
  Builder ok(17);
  Value* tiled = ok.Op("Tile", {ok.Input("v", DType::kI64, {1}), ok.Ints({3})});
  RequireOk(ok.Infer());
  CHECK(ShapeOf(tiled) == "[3]");

  // A Transpose's perm with negative entries.
  Builder perm(17);
  perm.Op("Transpose", {perm.Input("x", DType::kF32, {2, 3, 4, 5})},
          {{"perm", std::vector<int64_t>{0, -2, -1, 1}}});
  CHECK_THAT(std::string(perm.Infer().message()),
             Catch::Contains("perm [0, -2, -1, 1] has a negative entry; a Transpose's perm is "
                             "a permutation of 0 to 3"));
}

TEST_CASE("Rule table", "[shape]") {
  std::vector<std::string> ops = SupportedOps();
  CHECK(std::is_sorted(ops.begin(), ops.end()));
  CHECK(std::adjacent_find(ops.begin(), ops.end()) == ops.end());
  CHECK(FindShapeRule("ai.onnx", "MatMul") != nullptr);
  CHECK(FindShapeRule("", "MatMul") == FindShapeRule("ai.onnx", "MatMul"));
  CHECK(FindShapeRule("com.microsoft", "Gelu") != nullptr);
  CHECK(FindShapeRule("", "NoSuchOp") == nullptr);
}

}  // namespace
}  // namespace tpc::onnx
