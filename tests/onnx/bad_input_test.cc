// Bad input: each case gives an error that names the file or node and the reason.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <string>

#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tpc/onnx/importer.h"

namespace {

using tpc::testing::ReadFile;
using tpc::testing::SourcePath;
using tpc::testing::TempDir;
using tpc::testing::WriteFile;

// y = MatMul(x, w) + b, with w and b initializers: the smallest useful model.
::onnx::ModelProto TinyModel() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  auto add_value = [](::onnx::ValueInfoProto* vi, const std::string& name,
                      std::vector<std::string> dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    for (const auto& d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (std::isdigit(static_cast<unsigned char>(d[0]))) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
  };
  add_value(g->add_input(), "x", {"batch", "4"});
  add_value(g->add_output(), "y", {"batch", "2"});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(2);
  for (int i = 0; i < 8; ++i) w->add_float_data(static_cast<float>(i));
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(::onnx::TensorProto::FLOAT);
  b->add_dims(2);
  b->add_float_data(1.0f);
  b->add_float_data(2.0f);
  auto* mm = g->add_node();
  mm->set_name("mm");
  mm->set_op_type("MatMul");
  mm->add_input("x");
  mm->add_input("w");
  mm->add_output("xw");
  auto* add = g->add_node();
  add->set_name("add");
  add->set_op_type("Add");
  add->add_input("xw");
  add->add_input("b");
  add->add_output("y");
  return m;
}

std::string Save(const ::onnx::ModelProto& m, const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  WriteFile(path, m.SerializeAsString());
  return path;
}

// The import error's message (the import must fail).
std::string ImportError(const std::string& path) {
  auto graph = tpc::onnx::ImportModel(path);
  REQUIRE_FALSE(graph.ok());
  return std::string(graph.status().message());
}

// Moves initializer `name`'s data to `location` at `offset` (writing the bytes there
// when `write` is set).
void MakeExternal(::onnx::ModelProto& m, const std::string& dir, const std::string& name,
                  const std::string& location, bool write) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() != name) continue;
    std::string bytes(reinterpret_cast<const char*>(t.float_data().data()),
                      static_cast<size_t>(t.float_data_size()) * 4);
    t.clear_float_data();
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* kv = t.add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    if (write) WriteFile(dir + "/" + location, bytes);
  }
}

}  // namespace

TEST_CASE("the tiny model imports (the cases below break it one way each)", "[onnx][bad]") {
  std::string dir = TempDir("tiny");
  auto graph = tpc::onnx::ImportModel(Save(TinyModel(), dir, "tiny.onnx"));
  REQUIRE(graph.ok());
  CHECK((*graph)->outputs().size() == 1);
}

TEST_CASE("not a protobuf", "[onnx][bad]") {
  std::string dir = TempDir("notpb");
  std::string path = dir + "/text.onnx";
  WriteFile(path, "this is a text file, not an ONNX model\n");
  std::string msg = ImportError(path);
  CHECK_THAT(msg, Catch::Contains(path));
  CHECK_THAT(msg,
             Catch::Contains("not a valid ONNX protobuf") || Catch::Contains("not an ONNX model"));
}

TEST_CASE("empty and missing files", "[onnx][bad]") {
  std::string dir = TempDir("empty");
  WriteFile(dir + "/empty.onnx", "");
  CHECK_THAT(ImportError(dir + "/empty.onnx"), Catch::Contains("empty file"));
  CHECK_THAT(ImportError(dir + "/missing.onnx"), Catch::Contains("no such file"));
}

TEST_CASE("truncated file", "[onnx][bad]") {
  std::string dir = TempDir("trunc");
  std::string whole = ReadFile(SourcePath("models/mlp.onnx"));
  REQUIRE(whole.size() > 1000);
  std::string path = dir + "/truncated.onnx";
  WriteFile(path, whole.substr(0, whole.size() / 2));
  std::string msg = ImportError(path);
  CHECK_THAT(msg, Catch::Contains(path));
  CHECK_THAT(msg, Catch::Contains("truncated"));
}

TEST_CASE("missing initializer or input", "[onnx][bad]") {
  std::string dir = TempDir("missing");
  auto m = TinyModel();
  m.mutable_graph()->mutable_initializer()->RemoveLast();  // drop "b"
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("node 'add' (Add)"));
  CHECK_THAT(msg, Catch::Contains("input 'b' is not defined"));
}

TEST_CASE("graph output nobody produces", "[onnx][bad]") {
  std::string dir = TempDir("noout");
  auto m = TinyModel();
  m.mutable_graph()->mutable_output(0)->set_name("nothing");
  CHECK_THAT(ImportError(Save(m, dir, "m.onnx")),
             Catch::Contains("graph output 'nothing' is not produced"));
}

TEST_CASE("cycle", "[onnx][bad]") {
  std::string dir = TempDir("cycle");
  auto m = TinyModel();
  // mm now reads add's output: mm -> add -> mm.
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("cycle"));
  CHECK_THAT(msg, Catch::Contains("node 'mm' (MatMul)"));
}

TEST_CASE("value defined twice", "[onnx][bad]") {
  std::string dir = TempDir("ssa");
  auto m = TinyModel();
  m.mutable_graph()->mutable_node(1)->set_output(0, "xw");
  CHECK_THAT(ImportError(Save(m, dir, "m.onnx")), Catch::Contains("value 'xw' is already defined"));
}

TEST_CASE("type mismatch", "[onnx][bad]") {
  std::string dir = TempDir("type");
  auto m = TinyModel();
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      ::onnx::TensorProto::INT64);
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("type mismatch"));
  CHECK_THAT(msg, Catch::Contains("'y' is declared i64"));
  CHECK_THAT(msg, Catch::Contains("node 'add' (Add) produces f32"));
}

TEST_CASE("unsupported operator", "[onnx][bad]") {
  std::string dir = TempDir("unsupported");
  auto m = TinyModel();
  m.mutable_graph()->mutable_node(0)->set_op_type("FancyConvolution");
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("node 'mm' (FancyConvolution)"));
  CHECK_THAT(msg, Catch::Contains("unsupported operator"));
}

TEST_CASE("a sparse constant is refused, naming the attribute's type", "[onnx][bad]") {
  std::string dir = TempDir("sparse");
  auto m = TinyModel();
  auto* node = m.mutable_graph()->mutable_node(0);
  node->set_op_type("Constant");
  node->clear_input();
  auto* a = node->add_attribute();
  a->set_name("sparse_value");
  a->set_type(::onnx::AttributeProto::SPARSE_TENSOR);
  a->mutable_sparse_tensor()->add_dims(2);
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("node 'mm' (Constant): attribute 'sparse_value' has an "
                                  "unsupported type, SPARSE_TENSOR (tpc reads dense tensors "
                                  "only)"));
}

TEST_CASE("a Loop is reported as unsupported, an If without a branch as such", "[onnx][bad]") {
  std::string dir = TempDir("if");
  auto m = TinyModel();
  auto* node = m.mutable_graph()->mutable_node(0);
  node->set_op_type("If");
  node->mutable_input()->RemoveLast();  // If(cond)
  auto* a = node->add_attribute();
  a->set_name("then_branch");
  a->set_type(::onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("then");
  std::string msg = ImportError(Save(m, dir, "if.onnx"));
  CHECK_THAT(msg, Catch::Contains("node 'mm' (If): an If needs a condition and the graphs "
                                  "then_branch and else_branch"));

  node->set_op_type("Loop");  // Loop(M, cond) with a body
  node->add_input("x");
  a->set_name("body");
  msg = ImportError(Save(m, dir, "loop.onnx"));
  CHECK_THAT(msg, Catch::Contains("node 'mm' (Loop)"));
  CHECK_THAT(msg, Catch::Contains("control flow"));
}

TEST_CASE("external data: present, missing, absolute, escaping", "[onnx][bad]") {
  std::string dir = TempDir("ext");
  {
    auto m = TinyModel();
    MakeExternal(m, dir, "w", "w.bin", /*write=*/true);
    auto graph = tpc::onnx::ImportModel(Save(m, dir, "ok.onnx"));
    REQUIRE(graph.ok());
    const tpc::ir::Node* w = (*graph)->FindValue("w")->producer();
    CHECK(w->tensor().is_mapped());
    CHECK(w->tensor().ElementAsDouble(5) == 5.0);
  }
  {
    auto m = TinyModel();
    MakeExternal(m, dir, "w", "gone.bin", /*write=*/false);
    std::string msg = ImportError(Save(m, dir, "missing.onnx"));
    CHECK_THAT(msg, Catch::Contains("initializer 'w'"));
    CHECK_THAT(msg, Catch::Contains("external data file 'gone.bin' cannot be read"));
  }
  {
    auto m = TinyModel();
    MakeExternal(m, dir, "w", "/etc/passwd", /*write=*/false);
    CHECK_THAT(ImportError(Save(m, dir, "abs.onnx")), Catch::Contains("is absolute"));
  }
  {
    std::string inner = dir + "/inner";
    std::filesystem::create_directories(inner);
    auto m = TinyModel();
    MakeExternal(m, inner, "w", "../w.bin", /*write=*/false);
    std::string msg = ImportError(Save(m, inner, "escape.onnx"));
    CHECK_THAT(msg, Catch::Contains("initializer 'w'"));
    CHECK_THAT(msg, Catch::Contains("leaves the model's folder"));
  }
  {
    // A link in the folder to a file elsewhere (Hugging Face's cache: a snapshot's files
    // are links into blobs/): read, as onnxruntime reads it.
    std::filesystem::create_directories(dir + "/blobs");
    std::filesystem::create_directories(dir + "/snapshot");
    auto m = TinyModel();
    MakeExternal(m, dir + "/blobs", "w", "w.bin", /*write=*/true);
    std::filesystem::create_symlink("../blobs/w.bin", dir + "/snapshot/w.bin");
    auto graph = tpc::onnx::ImportModel(Save(m, dir + "/snapshot", "linked.onnx"));
    INFO(graph.status().ToString());
    REQUIRE(graph.ok());
    CHECK((*graph)->FindValue("w")->producer()->tensor().ElementAsDouble(5) == 5.0);
  }
  {
    // The file is there but shorter than the tensor.
    auto m = TinyModel();
    MakeExternal(m, dir, "w", "short.bin", /*write=*/false);
    WriteFile(dir + "/short.bin", "abcd");
    CHECK_THAT(ImportError(Save(m, dir, "short.onnx")), Catch::Contains("past the end"));
  }
}

TEST_CASE("initializer with the wrong number of bytes", "[onnx][bad]") {
  std::string dir = TempDir("bytes");
  auto m = TinyModel();
  m.mutable_graph()->mutable_initializer(1)->add_float_data(3.0f);  // b: 3 floats for [2]
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("tensor 'b'"));
  CHECK_THAT(msg, Catch::Contains("holds 12 bytes"));
}

TEST_CASE("unsupported opset", "[onnx][bad]") {
  std::string dir = TempDir("opset");
  auto m = TinyModel();
  m.mutable_opset_import(0)->set_version(7);
  CHECK_THAT(ImportError(Save(m, dir, "m.onnx")), Catch::Contains("opset 7 is not supported"));
}

// ---- Malformed nodes and attributes: refused as onnx.checker refuses them ----

// The tiny model with `mm` replaced by a node made by `edit`, at opset `opset` (17: within
// libonnx's schemas; 21: newer than it knows, checked by tpc alone).
// A Constant node `c` whose `value` is an INT (ONNX wants a tensor).
static void AddMistypedConstant(::onnx::ModelProto& m) {
  auto* c = m.mutable_graph()->add_node();
  c->set_name("c");
  c->set_op_type("Constant");
  c->add_output("unused_c");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(3);
}

// `w` as external data in DIR/w.bin, with the extra external_data entries `kvs`.
static void ExternalWith(::onnx::ModelProto& m, const std::string& dir,
                         const std::vector<std::pair<std::string, std::string>>& kvs) {
  MakeExternal(m, dir, "w", "w.bin", /*write=*/true);
  for (const auto& [key, value] : kvs) {
    auto* kv = m.mutable_graph()->mutable_initializer(0)->add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  }
}

// `w` as external data in DIR/NAME, made a special file: a FIFO ("fifo.bin") or a
// symlink to itself (any other name).
static void ExternalSpecial(::onnx::ModelProto& m, const std::string& dir,
                            const std::string& name) {
  if (name == "fifo.bin") {
    REQUIRE(::mkfifo((dir + "/" + name).c_str(), 0600) == 0);
  } else {
    std::filesystem::create_symlink(name, dir + "/" + name);
  }
  MakeExternal(m, dir, "w", name, /*write=*/false);
}

static std::string NodeError(int opset, const std::function<void(::onnx::NodeProto*)>& edit) {
  std::string dir = TempDir("node");
  auto m = TinyModel();
  m.mutable_opset_import(0)->set_version(opset);
  edit(m.mutable_graph()->mutable_node(0));
  return ImportError(Save(m, dir, "m.onnx"));
}

TEST_CASE("an operator with too many inputs is refused", "[onnx][bad]") {
  std::string msg = NodeError(17, [](::onnx::NodeProto* n) {
    n->add_input("w");
    n->add_input("x");
  });
  CHECK_THAT(msg, Catch::Contains("node 'mm' (MatMul)"));
  CHECK_THAT(msg, Catch::Contains("input size 4"));
}

TEST_CASE("an attribute of the wrong type is refused", "[onnx][bad]") {
  for (int opset : {17, 21}) {
    INFO("opset " << opset);
    std::string msg = NodeError(opset, [](::onnx::NodeProto* n) {
      n->set_op_type("Gemm");
      auto* a = n->add_attribute();
      a->set_name("alpha");
      a->set_type(::onnx::AttributeProto::STRING);
      a->set_s("one");
    });
    CHECK_THAT(msg, Catch::Contains("node 'mm' (Gemm)"));
    CHECK_THAT(msg, Catch::Contains("alpha"));
  }
}

TEST_CASE("a Constant whose value has the wrong type is refused", "[onnx][bad]") {
  for (int opset : {17, 21}) {
    INFO("opset " << opset);
    std::string dir = TempDir("const");
    auto m = TinyModel();
    m.mutable_opset_import(0)->set_version(opset);
    AddMistypedConstant(m);
    std::string msg = ImportError(Save(m, dir, "m.onnx"));
    CHECK_THAT(msg, Catch::Contains("node 'c' (Constant)"));
    CHECK_THAT(msg, Catch::Contains("value"));
  }
}

TEST_CASE("a node of a domain the model does not import is refused", "[onnx][bad]") {
  std::string msg = NodeError(17, [](::onnx::NodeProto* n) { n->set_domain("com.example"); });
  CHECK_THAT(msg, Catch::Contains("node 'mm' (com.example::MatMul)"));
  CHECK_THAT(msg, Catch::Contains("not among the model's opset imports"));
}

// ---- Sizes: negative dims and element counts past the limit ----

TEST_CASE("negative and absurd dims are refused, naming the tensor", "[onnx][bad]") {
  std::string dir = TempDir("dims");
  {
    auto m = TinyModel();
    m.mutable_graph()->mutable_initializer(1)->set_dims(0, -2);
    std::string msg = ImportError(Save(m, dir, "neg.onnx"));
    CHECK_THAT(msg, Catch::Contains("tensor 'b'"));
    CHECK_THAT(msg, Catch::Contains("negative dim -2"));
  }
  {
    // 2^31 · 2^31 elements: the product overflows no int64 but passes the limit.
    auto m = TinyModel();
    auto* b = m.mutable_graph()->mutable_initializer(1);
    b->set_dims(0, int64_t{1} << 31);
    b->add_dims(int64_t{1} << 31);
    std::string msg = ImportError(Save(m, dir, "huge_init.onnx"));
    CHECK_THAT(msg, Catch::Contains("tensor 'b'"));
    CHECK_THAT(msg, Catch::Contains("more than 2^48 elements"));
  }
  {
    // A 0 dim makes the count 0, but strides multiply the other dims: [4, 2^62, 0] is
    // refused too.
    auto m = TinyModel();
    auto* b = m.mutable_graph()->mutable_initializer(1);
    b->clear_float_data();
    b->set_dims(0, 4);
    b->add_dims(int64_t{1} << 62);
    b->add_dims(0);
    std::string msg = ImportError(Save(m, dir, "huge_empty.onnx"));
    CHECK_THAT(msg, Catch::Contains("tensor 'b'"));
    CHECK_THAT(msg, Catch::Contains("more than 2^48 elements"));
  }
  {
    // 2^62 · 4 elements would overflow an int64 product.
    auto m = TinyModel();
    auto* x = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type();
    x->mutable_shape()->mutable_dim(0)->set_dim_value(int64_t{1} << 62);
    std::string msg = ImportError(Save(m, dir, "huge_input.onnx"));
    CHECK_THAT(msg, Catch::Contains("graph input"));
    CHECK_THAT(msg, Catch::Contains("'x'"));
    CHECK_THAT(msg, Catch::Contains("more than 2^48 elements"));
  }
}

// ---- External data that is not a plain file region ----

TEST_CASE("external data offsets that are not integers are refused", "[onnx][bad]") {
  for (const char* offset : {"abc", "99999999999999999999", "-8", "12abc"}) {
    INFO("offset " << offset);
    std::string dir = TempDir("offset");
    auto m = TinyModel();
    ExternalWith(m, dir, {{"offset", offset}});
    std::string msg = ImportError(Save(m, dir, "m.onnx"));
    CHECK_THAT(msg, Catch::Contains("initializer 'w'"));
    CHECK_THAT(msg, Catch::Contains("not a non-negative integer"));
  }
}

TEST_CASE("an offset + length past int64 is refused", "[onnx][bad]") {
  std::string dir = TempDir("overflow");
  auto m = TinyModel();
  ExternalWith(m, dir, {{"offset", "9223372036854775800"}, {"length", "32"}});
  std::string msg = ImportError(Save(m, dir, "m.onnx"));
  CHECK_THAT(msg, Catch::Contains("initializer 'w'"));
  CHECK_THAT(msg, Catch::Contains("past the end"));
}

TEST_CASE("a symlink loop or a FIFO as external data is an error, not a crash or a hang",
          "[onnx][bad]") {
  std::string dir = TempDir("special");
  {
    auto m = TinyModel();
    ExternalSpecial(m, dir, "loop.bin");
    std::string msg = ImportError(Save(m, dir, "loop.onnx"));
    CHECK_THAT(msg, Catch::Contains("initializer 'w'"));
    CHECK_THAT(msg, Catch::Contains("loop.bin"));
  }
  {
    auto m = TinyModel();
    ExternalSpecial(m, dir, "fifo.bin");
    std::string msg = ImportError(Save(m, dir, "fifo.onnx"));
    CHECK_THAT(msg, Catch::Contains("initializer 'w'"));
    CHECK_THAT(msg, Catch::Contains("not a regular file"));
  }
}

// ---- The same through tp-compile: exit 2, the reason, nothing written ----

TEST_CASE("tp-compile refuses each bad model with exit 2 and writes nothing",
          "[onnx][bad][tools]") {
  const std::string dir = TempDir("cli_bad");
  std::vector<std::pair<std::string, std::string>> cases;  // model path, expected text
  auto add = [&](const std::string& name, const ::onnx::ModelProto& m, const std::string& want) {
    cases.emplace_back(Save(m, dir, name), want);
  };
  {
    auto m = TinyModel();
    m.mutable_graph()->mutable_node(0)->add_input("w");
    m.mutable_graph()->mutable_node(0)->add_input("x");
    add("arity.onnx", m, "node 'mm' (MatMul)");
  }
  {
    auto m = TinyModel();
    AddMistypedConstant(m);
    add("constant.onnx", m, "node 'c' (Constant)");
  }
  {
    auto m = TinyModel();
    ExternalWith(m, dir, {{"offset", "abc"}});
    add("offset.onnx", m, "initializer 'w': external data offset 'abc'");
  }
  for (const char* special : {"fifo.bin", "loop.bin"}) {
    auto m = TinyModel();
    ExternalSpecial(m, dir, special);
    add(std::string(special) + ".onnx", m,
        special == std::string("fifo.bin") ? "not a regular file" : "loop.bin");
  }
  {
    auto m = TinyModel();
    auto* x = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type();
    x->mutable_shape()->mutable_dim(0)->set_dim_value(int64_t{1} << 62);
    add("huge.onnx", m, "more than 2^48 elements");
  }
  for (const auto& [model, want] : cases) {
    INFO(model);
    const std::string out = dir + "/plan";
    tpc::testing::CommandResult r = tpc::testing::RunTpCompile(model + " --tp 2 -o " + out);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("tp-compile: error: " + model));
    CHECK_THAT(r.output, Catch::Contains(want));
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK(tpc::testing::NoTemporaries(dir));
  }
}
