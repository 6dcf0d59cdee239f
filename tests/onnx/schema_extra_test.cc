// Attributes and inputs libonnx 1.12 has no schema for (com.microsoft operators, the default
// domain's operators after opset 17, attributes operators gained since) are checked against
// tpc's own table: one tpc does not know, or a value it does not implement, is refused at
// import, naming the node, instead of being ignored.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tpc/onnx/importer.h"

namespace {

using tpc::testing::TempDir;
using tpc::testing::WriteFile;

struct Attr {
  Attr(std::string n, ::onnx::AttributeProto::AttributeType t) : name(std::move(n)), type(t) {}
  std::string name;
  ::onnx::AttributeProto::AttributeType type;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
};

Attr Int(std::string name, int64_t v) {
  Attr a{std::move(name), ::onnx::AttributeProto::INT};
  a.i = v;
  return a;
}
Attr Float(std::string name, float v) {
  Attr a{std::move(name), ::onnx::AttributeProto::FLOAT};
  a.f = v;
  return a;
}
Attr Ints(std::string name, std::vector<int64_t> v) {
  Attr a{std::move(name), ::onnx::AttributeProto::INTS};
  a.ints = std::move(v);
  return a;
}

// A model of one node `domain::op` at `opset`: its inputs (an empty name: absent) are graph
// inputs of `shape`, f32 (names starting with "i32": int32 [shape[0]] and [1]).
::onnx::ModelProto OneNode(const std::string& domain, const std::string& op, int64_t opset,
                           const std::vector<std::string>& inputs, int outputs,
                           const std::vector<Attr>& attrs, const std::vector<int64_t>& shape) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_version(opset);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("one");
  auto* n = g->add_node();
  n->set_name("the_node");
  n->set_op_type(op);
  n->set_domain(domain);
  for (const auto& in : inputs) {
    n->add_input(in);
    if (in.empty()) continue;
    auto* tt = g->add_input()->mutable_type()->mutable_tensor_type();
    g->mutable_input(g->input_size() - 1)->set_name(in);
    const bool i32 = in.rfind("i32", 0) == 0;
    tt->set_elem_type(i32 ? ::onnx::TensorProto::INT32 : ::onnx::TensorProto::FLOAT);
    if (i32) {
      tt->mutable_shape()->add_dim()->set_dim_value(in == "i32_total" ? 1 : shape[0]);
    } else {
      for (int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  for (int k = 0; k < outputs; ++k) {
    n->add_output("y" + std::to_string(k));
    g->add_output()->set_name("y" + std::to_string(k));
  }
  for (const Attr& a : attrs) {
    auto* p = n->add_attribute();
    p->set_name(a.name);
    p->set_type(a.type);
    if (a.type == ::onnx::AttributeProto::INT) p->set_i(a.i);
    if (a.type == ::onnx::AttributeProto::FLOAT) p->set_f(a.f);
    for (int64_t v : a.ints) p->add_ints(v);
  }
  return m;
}

// "" when the model imports, else the error's message.
std::string ImportMessage(const ::onnx::ModelProto& m) {
  const std::string dir = TempDir("schema_extra");
  WriteFile(dir + "/m.onnx", m.SerializeAsString());
  auto graph = tpc::onnx::ImportModel(dir + "/m.onnx");
  return graph.ok() ? "" : std::string(graph.status().message());
}

// onnxruntime's GroupQueryAttention over [batch 1, seq 2, 2 heads of 4] with a past.
::onnx::ModelProto Gqa(std::vector<Attr> attrs, std::vector<std::string> extra_inputs = {}) {
  std::vector<std::string> in = {"q", "k", "v", "", "", "i32_lens", "i32_total"};
  in.insert(in.end(), extra_inputs.begin(), extra_inputs.end());
  attrs.push_back(Int("num_heads", 2));
  attrs.push_back(Int("kv_num_heads", 2));
  return OneNode("com.microsoft", "GroupQueryAttention", 17, in, 3, attrs, {1, 2, 8});
}

}  // namespace

TEST_CASE("com.microsoft attributes tpc does not know are refused, naming the node",
          "[onnx][bad]") {
  CHECK(ImportMessage(OneNode("com.microsoft", "QuickGelu", 17, {"x"}, 1, {Float("alpha", 1.5f)},
                              {2, 4})) == "");
  const std::string unknown = ImportMessage(
      OneNode("com.microsoft", "QuickGelu", 17, {"x"}, 1, {Float("beta", 1.5f)}, {2, 4}));
  CHECK_THAT(unknown, Catch::Contains("the_node") && Catch::Contains("'beta'") &&
                          Catch::Contains("(alpha)"));
  CHECK_THAT(
      ImportMessage(OneNode("com.microsoft", "QuickGelu", 17, {"x"}, 1, {Int("alpha", 2)}, {2, 4})),
      Catch::Contains("'alpha' is INT, the operator's schema wants FLOAT"));
  CHECK(ImportMessage(Gqa({Int("local_window_size", 2), Int("smooth_softmax", -1)})) == "");
  CHECK_THAT(ImportMessage(Gqa({Int("fancy_cache", 1)})), Catch::Contains("'fancy_cache'"));
}

TEST_CASE("attribute values and inputs tpc does not implement are refused at import",
          "[onnx][bad]") {
  CHECK_THAT(ImportMessage(Gqa({Int("causal", 0)})),
             Catch::Contains("the_node") && Catch::Contains("'causal' = 0 is not supported") &&
                 Catch::Contains("only 1"));
  CHECK(ImportMessage(Gqa({Int("causal", 1)})) == "");
  // query_seqlens (input 16): onnxruntime's right-padded query chunks.
  std::vector<std::string> extra(10, "");  // inputs 7 to 16
  extra.back() = "qs";
  CHECK_THAT(ImportMessage(Gqa({}, extra)), Catch::Contains("input 16 ('qs') is not supported"));
  // CausalConvWithState: the channels-first, windowless form only (the others are
  // onnxruntime's CUDA kernel's).
  const auto conv = [](std::vector<Attr> attrs) {
    return OneNode("com.microsoft", "CausalConvWithState", 17, {"x", "w"}, 2, attrs, {2, 4, 3});
  };
  CHECK(ImportMessage(conv({Int("dilation", 2)})) == "");
  CHECK_THAT(ImportMessage(conv({Int("dilation", 0)})),
             Catch::Contains("the_node") && Catch::Contains("dilation 0"));
  CHECK_THAT(
      ImportMessage(conv({Int("channels_last", 1)})),
      Catch::Contains("the_node") && Catch::Contains("'channels_last' = 1 is not supported"));
  CHECK_THAT(ImportMessage(conv({Int("state_window", 2)})),
             Catch::Contains("'state_window' = 2 is not supported"));
  std::vector<std::string> too_many(11, "");
  too_many.back() = "x";
  CHECK_THAT(ImportMessage(Gqa({}, too_many)), Catch::Contains("takes at most 17"));
  // QMoE: integer codes with the default zero points, the routing weights normalized
  // (onnxruntime's CPU normalizes them whatever the attribute says).
  const auto qmoe = [](std::vector<Attr> attrs, std::vector<std::string> extra = {}) {
    std::vector<std::string> in = {"x", "r", "w1", "s1", "", "w2", "s2", ""};
    in.insert(in.end(), extra.begin(), extra.end());
    return OneNode("com.microsoft", "QMoE", 17, in, 1, attrs, {4, 4, 4});
  };
  CHECK_THAT(ImportMessage(qmoe({Int("normalize_routing_weights", 1)}, {"", "", "", "zp1"})),
             Catch::Contains("the_node") && Catch::Contains("input 11 ('zp1') is not supported"));
  CHECK_THAT(ImportMessage(qmoe({Int("use_sparse_mixer", 1)})),
             Catch::Contains("'use_sparse_mixer' = 1 is not supported"));
  CHECK_THAT(ImportMessage(qmoe({})),
             Catch::Contains("the_node") && Catch::Contains("normalize_routing_weights 0"));
}

TEST_CASE("the default domain's newer attributes are known, others refused", "[onnx][bad]") {
  // AveragePool gained dilations at opset 19; libonnx 1.12 knows its opset-11 schema.
  CHECK(ImportMessage(OneNode("", "AveragePool", 19, {"x"}, 1,
                              {Ints("kernel_shape", {2, 2}), Ints("dilations", {1, 1})},
                              {1, 1, 4, 4})) == "");
  CHECK_THAT(ImportMessage(OneNode("", "AveragePool", 19, {"x"}, 1,
                                   {Ints("kernel_shape", {2, 2}), Ints("dilatations", {1, 1})},
                                   {1, 1, 4, 4})),
             Catch::Contains("'dilatations' is not one tpc knows"));
  // Relu changed at opset 14 only: an opset-19 Relu has its opset-14 schema's attributes.
  CHECK_THAT(ImportMessage(OneNode("", "Relu", 19, {"x"}, 1, {Float("alpha", 0.1f)}, {2, 4})),
             Catch::Contains("alpha") && Catch::Contains("the_node"));
  // Mish (opset 18) libonnx 1.12 does not know at all.
  CHECK(ImportMessage(OneNode("", "Mish", 19, {"x"}, 1, {}, {2, 4})) == "");
  CHECK_THAT(ImportMessage(OneNode("", "Mish", 19, {"x"}, 1, {Float("beta", 1)}, {2, 4})),
             Catch::Contains("(it has none)"));
}
