// A SplitToSequence read only by SequenceAt at known indices becomes slices (TorchScript
// writes torch.split / tensor_split / unbind this way when it computes the sizes); the
// run gives the parts SequenceAt would.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "onnx/defs/parser.h"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/tensor.h"

namespace {

using tpc::runtime::Tensor;

absl::StatusOr<std::unique_ptr<tpc::ir::Graph>> ImportSequenceText(const std::string& name,
                                                                   const std::string& text) {
  ::onnx::ModelProto m;
  const auto parsed = ::onnx::OnnxParser::Parse(m, text.c_str());
  INFO(parsed.ErrorMessage());
  REQUIRE(parsed.IsOK());
  const std::string path = tpc::testing::TempDir("sequence_split") + "/" + name + ".onnx";
  tpc::testing::WriteFile(path, m.SerializeAsString());
  return tpc::onnx::ImportModel(path);
}

bool HasSequenceOps(const tpc::ir::Graph& g) {
  for (const tpc::ir::Node* n : g.nodes()) {
    if (n->is_call() && n->op_type().find("Sequence") != std::string::npos) return true;
  }
  return false;
}

// x = 0, 1, 2, ... of `shape` (row-major).
Tensor Iota(const std::vector<int64_t>& shape) {
  Tensor t = Tensor::Allocate(tpc::ir::DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

// The columns [begin, end) of axis 1 of a rank-3 iota of `shape`.
std::vector<float> IotaColumns(const std::vector<int64_t>& shape, int64_t begin, int64_t end) {
  std::vector<float> out;
  for (int64_t a = 0; a < shape[0]; ++a) {
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t c = 0; c < shape[2]; ++c) {
        out.push_back(static_cast<float>((a * shape[1] + b) * shape[2] + c));
      }
    }
  }
  return out;
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

std::vector<std::vector<Tensor>> Run(tpc::ir::Graph& g, const Tensor& x) {
  auto out = tpc::testing::RunRanks({&g}, {{"x", x}});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  return *out;
}

// tensor_split(x, 3, dim=1) as TorchScript writes it for a seq it does not know:
// sizes [q + 1] * r + [q] * (3 - r) from Shape, parts 0, 1 and -1.
const char* const kTensorSplit = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, seq, 3] x) => (float[2, a, 3] p0, float[2, b, 3] p1, float[2, c, 3] p2) {
  shape = Shape(x)
  one = Constant<value = int64[1] {1}>()
  three = Constant<value = int64[1] {3}>()
  seq = Gather<axis = 0>(shape, one)
  q = Div(seq, three)
  r = Mod(seq, three)
  q1 = Add(q, one)
  big = Tile(q1, r)
  rest = Sub(three, r)
  small = Tile(q, rest)
  sizes = Concat<axis = 0>(big, small)
  parts = SplitToSequence<axis = 1>(x, sizes)
  i0 = Constant<value = int64 {0}>()
  i1 = Constant<value = int32 {1}>()
  last = Constant<value = int64 {-1}>()
  p0 = SequenceAt(parts, i0)
  p1 = SequenceAt(parts, i1)
  p2 = SequenceAt(parts, last)
})";

TEST_CASE("tensor_split with sizes computed from a symbolic dim runs as slices",
          "[onnx][sequence]") {
  auto g = ImportSequenceText("tensor_split", kTensorSplit);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  CHECK_FALSE(HasSequenceOps(**g));
  // seq 7: sizes 3, 2, 2; seq 9: 3, 3, 3; seq 2: 1, 1, 0.
  for (const auto& [seq, bounds] : std::map<int64_t, std::vector<int64_t>>{
           {7, {0, 3, 5, 7}}, {9, {0, 3, 6, 9}}, {2, {0, 1, 2, 2}}}) {
    INFO("seq " << seq);
    const std::vector<int64_t> shape = {2, seq, 3};
    auto out = Run(**g, Iota(shape));
    REQUIRE(out[0].size() == 3);
    for (size_t k = 0; k < 3; ++k) {
      INFO("part " << k);
      CHECK(out[0][k].shape() == std::vector<int64_t>{2, bounds[k + 1] - bounds[k], 3});
      CHECK(Floats(out[0][k]) == IotaColumns(shape, bounds[k], bounds[k + 1]));
    }
  }
}

// split(x, chunk, dim=1) with an int32 scalar chunk; parts counted from the end over a
// symbolic dim (the count, ceil(seq / chunk), found at run time).
std::string ChunkModel(const std::string& chunk) {
  return R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, seq, 3] x) => (float[2, a, 3] y, float[2, b, 3] z) <int32 chunk = {)" +
         chunk + R"(}> {
  parts = SplitToSequence<axis = -2>(x, chunk)
  m1 = Constant<value = int64 {-1}>()
  m2 = Constant<value = int64 {-2}>()
  y = SequenceAt(parts, m1)
  z = SequenceAt(parts, m2)
})";
}

TEST_CASE("a scalar split gives chunks, the last one shorter", "[onnx][sequence]") {
  auto g = ImportSequenceText("chunks", ChunkModel("3"));
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  CHECK_FALSE(HasSequenceOps(**g));
  const std::vector<int64_t> shape = {2, 7, 3};  // chunks [0, 3), [3, 6), [6, 7)
  auto out = Run(**g, Iota(shape));
  CHECK(Floats(out[0][0]) == IotaColumns(shape, 6, 7));
  CHECK(Floats(out[0][1]) == IotaColumns(shape, 3, 6));
  const std::vector<int64_t> even = {2, 6, 3};  // chunks [0, 3), [3, 6)
  out = Run(**g, Iota(even));
  CHECK(Floats(out[0][0]) == IotaColumns(even, 3, 6));
  CHECK(Floats(out[0][1]) == IotaColumns(even, 0, 3));

  auto zero = ImportSequenceText("zero_chunk", ChunkModel("0"));
  REQUIRE_FALSE(zero.ok());
  CHECK_THAT(std::string(zero.status().message()),
             Catch::Contains("node producing 'parts' (SplitToSequence): its split is 0; a chunk "
                             "length is positive"));
}

// unbind(x, dim=1): no split, keepdims 0 (Squeeze's axes an attribute before opset 13).
std::string UnbindModel(int opset) {
  return R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[2, 4, 3] x) => (float[2, 3] y, float[2, 3] z) {
  parts = SplitToSequence<axis = 1, keepdims = 0>(x)
  i = Constant<value = int64 {-1}>()
  j = Constant<value = int64 {1}>()
  y = SequenceAt(parts, i)
  z = SequenceAt(parts, j)
})";
}

TEST_CASE("unbind, the split axis squeezed, at opsets before and after 13", "[onnx][sequence]") {
  for (int opset : {11, 18}) {
    INFO("opset " << opset);
    auto g = ImportSequenceText("unbind" + std::to_string(opset), UnbindModel(opset));
    INFO(g.status().ToString());
    REQUIRE(g.ok());
    CHECK_FALSE(HasSequenceOps(**g));
    CHECK((*g)->outputs()[0]->type().ToString() == "f32[2, 3]");
    const std::vector<int64_t> shape = {2, 4, 3};
    auto out = Run(**g, Iota(shape));
    CHECK(Floats(out[0][0]) == IotaColumns(shape, 3, 4));
    CHECK(Floats(out[0][1]) == IotaColumns(shape, 1, 2));
  }
}

// A node of the graph (op, inputs, outputs, name).
::onnx::NodeProto* AddNode(::onnx::GraphProto* g, const std::string& op,
                           std::vector<std::string> in, std::vector<std::string> out,
                           const std::string& name = "") {
  ::onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(std::move(s));
  for (auto& s : out) n->add_output(std::move(s));
  return n;
}

TEST_CASE("the slices' own names stay apart from an inlined function's", "[onnx][sequence]") {
  // The SequenceAt 'F/0' names its helper values 'F/0/...', as the first inlined call of
  // function F names its body's: 'F/0/Constant_output' was taken twice (an abort).
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  for (auto [domain, version] : {std::pair{"", 17}, {"local", 1}}) {
    auto* op = m.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  auto* f = m.add_functions();
  f->set_name("F");
  f->set_domain("local");
  f->add_input("X");
  f->add_output("Y");
  f->add_opset_import()->set_version(17);
  ::onnx::NodeProto* c = f->add_node();
  c->set_op_type("Constant");
  c->add_output("Constant_output");
  auto* value = c->add_attribute();
  value->set_name("value");
  value->set_type(::onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(::onnx::TensorProto::FLOAT);
  value->mutable_t()->add_float_data(2.0f);
  ::onnx::NodeProto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("X");
  mul->add_input("Constant_output");
  mul->add_output("Y");
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (auto [vi, name] :
       {std::pair{g->add_input(), "x"}, {g->add_output(), "y0"}, {g->add_output(), "y1"}}) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    for (int64_t d :
         std::string(name) == "y0" ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2, 5, 3}) {
      tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  auto* index = g->add_initializer();
  index->set_name("i");
  index->set_data_type(::onnx::TensorProto::INT64);
  index->add_int64_data(1);
  auto* split = AddNode(g, "SplitToSequence", {"x"}, {"s"});
  for (auto [key, v] : {std::pair{"axis", 1}, {"keepdims", 0}}) {
    auto* a = split->add_attribute();
    a->set_name(key);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  AddNode(g, "SequenceAt", {"s", "i"}, {"y0"}, "F/0");
  AddNode(g, "F", {"x"}, {"y1"})->set_domain("local");
  const std::string path = tpc::testing::TempDir("sequence_split") + "/names.onnx";
  tpc::testing::WriteFile(path, m.SerializeAsString());
  auto graph = tpc::onnx::ImportModel(path);
  INFO(graph.status().ToString());
  REQUIRE(graph.ok());
  const std::vector<int64_t> shape = {2, 5, 3};
  auto out = Run(**graph, Iota(shape));
  CHECK(Floats(out[0][0]) == IotaColumns(shape, 1, 2));
  std::vector<float> doubled = Floats(Iota(shape));
  for (float& v : doubled) v *= 2;
  CHECK(Floats(out[0][1]) == doubled);
}

TEST_CASE("a sequence tpc cannot take apart is refused, saying why", "[onnx][sequence][bad]") {
  // An index past the end of known sizes.
  auto past = ImportSequenceText("past", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x) => (float[2, 2] y) <int64[3] sizes = {2, 2, 2}, int64 i = {3}> {
  parts = SplitToSequence<axis = 1>(x, sizes)
  y = SequenceAt(parts, i)
})");
  REQUIRE_FALSE(past.ok());
  CHECK_THAT(std::string(past.status().message()),
             Catch::Contains("node producing 'y' (SequenceAt): it reads element 3 of the 3 "
                             "tensor(s) of node producing 'parts' (SplitToSequence) (-3 to 2)"));

  // An index no tensor reaches (index · chunk would overflow).
  auto huge = ImportSequenceText("huge", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, n] x) => (float[2, 2] y) <int64 two = {2}, int64 i = {4611686018427387904}> {
  parts = SplitToSequence<axis = 1>(x, two)
  y = SequenceAt(parts, i)
})");
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(std::string(huge.status().message()), Catch::Contains("past any tensor's size"));

  // Sizes that do not add up to the axis.
  auto sum = ImportSequenceText("sum", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x) => (float[2, 2] y) <int64[2] sizes = {2, 2}, int64 i = {0}> {
  parts = SplitToSequence<axis = 1>(x, sizes)
  y = SequenceAt(parts, i)
})");
  REQUIRE_FALSE(sum.ok());
  CHECK_THAT(std::string(sum.status().message()),
             Catch::Contains("its split sums to 4 but the axis has 6 elements"));

  // An index the data decides.
  auto data = ImportSequenceText("data", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x, int64 i) => (float[2, 2] y) <int64 two = {2}> {
  parts = SplitToSequence<axis = 1>(x, two)
  y = SequenceAt(parts, i)
})");
  REQUIRE_FALSE(data.ok());
  CHECK_THAT(std::string(data.status().message()),
             Catch::Contains("node producing 'y' (SequenceAt): its index 'i' (i64[]) is not an "
                             "integer known when compiling"));

  // A use other than SequenceAt.
  auto length = ImportSequenceText("length", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x) => (int64 n) <int64 two = {2}> {
  parts = SplitToSequence<axis = 1>(x, two)
  n = SequenceLength(parts)
})");
  REQUIRE_FALSE(length.ok());
  CHECK_THAT(std::string(length.status().message()),
             Catch::Contains("(SplitToSequence): 'parts', the sequence a SplitToSequence makes, "
                             "is input 0 of node producing 'n' (SequenceLength)"));
}

}  // namespace
