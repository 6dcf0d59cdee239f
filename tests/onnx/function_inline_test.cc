// Model-local functions are inlined: values renamed apart, attribute references
// resolved, nested calls expanded.
#include <catch2/catch.hpp>

#include <map>

#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tpc/onnx/importer.h"

namespace {

void SetFloatInput(::onnx::ValueInfoProto* vi, const std::string& name) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(8);
}

::onnx::NodeProto* AddNode(google::protobuf::RepeatedPtrField<::onnx::NodeProto>* nodes,
                           const std::string& op, std::vector<std::string> in,
                           std::vector<std::string> out, const std::string& domain = "") {
  auto* n = nodes->Add();
  n->set_op_type(op);
  n->set_domain(domain);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// custom::Scaled(X) = Mul(X, alpha) with alpha from the call's attribute `alpha`;
// custom::Twice(X) = Scaled(Scaled(X)) nests a call.
::onnx::ModelProto ModelWithFunctions() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  auto* custom = m.add_opset_import();
  custom->set_domain("custom");
  custom->set_version(1);

  auto* scaled = m.add_functions();
  scaled->set_name("Scaled");
  scaled->set_domain("custom");
  scaled->add_input("X");
  scaled->add_output("Y");
  scaled->add_attribute("alpha");
  scaled->add_opset_import()->set_version(17);
  auto* c = AddNode(scaled->mutable_node(), "Constant", {}, {"a"});
  auto* ref = c->add_attribute();
  ref->set_name("value_float");
  ref->set_type(::onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  AddNode(scaled->mutable_node(), "Mul", {"X", "a"}, {"Y"});

  auto* twice = m.add_functions();
  twice->set_name("Twice");
  twice->set_domain("custom");
  twice->add_input("X");
  twice->add_output("Y");
  twice->add_opset_import()->set_version(17);
  twice->add_opset_import()->set_domain("custom");
  auto* first = AddNode(twice->mutable_node(), "Scaled", {"X"}, {"T"}, "custom");
  auto* a1 = first->add_attribute();
  a1->set_name("alpha");
  a1->set_type(::onnx::AttributeProto::FLOAT);
  a1->set_f(2.0f);
  auto* second = AddNode(twice->mutable_node(), "Scaled", {"T"}, {"Y"}, "custom");
  auto* a2 = second->add_attribute();
  a2->set_name("alpha");
  a2->set_type(::onnx::AttributeProto::FLOAT);
  a2->set_f(3.0f);

  auto* g = m.mutable_graph();
  g->set_name("fn");
  SetFloatInput(g->add_input(), "x");
  SetFloatInput(g->add_output(), "z");
  auto* call = AddNode(g->mutable_node(), "Scaled", {"x"}, {"y"}, "custom");
  call->set_name("call0");
  auto* alpha = call->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(::onnx::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  AddNode(g->mutable_node(), "Twice", {"y"}, {"z"}, "custom")->set_name("call1");
  return m;
}

}  // namespace

TEST_CASE("local functions are inlined with attribute references", "[onnx]") {
  std::string dir = tpc::testing::TempDir("fn");
  std::string path = dir + "/fn.onnx";
  tpc::testing::WriteFile(path, ModelWithFunctions().SerializeAsString());
  auto graph = tpc::onnx::ImportModel(path);
  REQUIRE(graph.ok());

  // Three Mul calls remain, each with its own scale constant: 0.5, 2, 3.
  std::vector<double> scales;
  int muls = 0;
  for (tpc::ir::Node* n : (*graph)->nodes()) {
    if (!n->is_call()) continue;
    CHECK(n->op_type() == "Mul");
    ++muls;
    const tpc::ir::Node* k = n->input(1)->producer();
    REQUIRE(k->kind() == tpc::ir::NodeKind::kConstant);
    scales.push_back(k->tensor().ElementAsDouble(0));
  }
  CHECK(muls == 3);
  CHECK(scales == std::vector<double>{0.5, 2.0, 3.0});
  // The graph's own names survive; the bodies' internals are renamed apart.
  REQUIRE((*graph)->FindValue("y") != nullptr);
  CHECK((*graph)->outputs()[0]->name() == "z");
  CHECK((*graph)->outputs()[0]->type().ToString() == "f32[batch, 8]");
}

TEST_CASE("a function that calls itself is reported", "[onnx]") {
  auto m = ModelWithFunctions();
  // Scaled now calls Scaled.
  auto* body = m.mutable_functions(0)->mutable_node(1);
  body->set_op_type("Scaled");
  body->set_domain("custom");
  std::string dir = tpc::testing::TempDir("fnrec");
  std::string path = dir + "/rec.onnx";
  tpc::testing::WriteFile(path, m.SerializeAsString());
  auto graph = tpc::onnx::ImportModel(path);
  REQUIRE_FALSE(graph.ok());
  CHECK_THAT(std::string(graph.status().message()), Catch::Contains("nests too deeply"));
}
