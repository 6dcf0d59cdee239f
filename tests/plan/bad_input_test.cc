// Bad input to a tensor-parallel compile: each case exits 2 with a message naming what
// is wrong, leaves no output folder (or leaves the existing one untouched) and no
// temporary folder (".tmp-") beside it. The last case, weights that vanish while a plan
// is written, runs through the library: through the binary the moment between import
// and weight slicing cannot be hit reliably from outside the process.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/shard/shard_pass.h"

namespace {

using tpc::testing::CommandResult;
using tpc::testing::NoTemporaries;
using tpc::testing::RunTpCompile;

namespace fs = std::filesystem;
using tpc::testing::ReadFile;
using tpc::testing::SourcePath;
using tpc::testing::TempDir;
using tpc::testing::WriteFile;

}  // namespace

TEST_CASE("tp-compile --tp 7: no weight splits into 7 equal parts", "[plan][bad]") {
  const std::string dir = TempDir("tp7");
  const CommandResult r =
      RunTpCompile(SourcePath("models/mlp.onnx") + " --tp 7 -o " + dir + "/plan");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("splits into 7"));
  CHECK_FALSE(fs::exists(dir + "/plan"));
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile: a model of integer weights is told none is a float", "[plan][bad]") {
  // y = MatMul(x, W) in int32: W's 24 columns divide by 2, but tpc splits floats only.
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("ints");
  for (auto [vi, name, cols] : {std::tuple{g->add_input(), "x", 6}, {g->add_output(), "y", 24}}) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::INT32);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    tt->mutable_shape()->add_dim()->set_dim_value(cols);
  }
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(::onnx::TensorProto::INT32);
  w->add_dims(6);
  w->add_dims(24);
  for (int i = 0; i < 6 * 24; ++i) w->add_int32_data(i);
  auto* mm = g->add_node();
  mm->set_op_type("MatMul");
  mm->add_input("x");
  mm->add_input("W");
  mm->add_output("y");
  const std::string dir = TempDir("ints");
  WriteFile(dir + "/ints.onnx", m.SerializeAsString());
  const CommandResult r = RunTpCompile(dir + "/ints.onnx --tp 2 -o " + dir + "/plan");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("(it has no float weights: tpc splits float weights only)"));
  CHECK_FALSE(fs::exists(dir + "/plan"));
}

TEST_CASE("tp-compile: an input without a shape, or N past every weight, is told so",
          "[plan][bad]") {
  // mlp.onnx with its input's shape cleared: the cost model read its dims (a crash).
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(ReadFile(SourcePath("models/mlp.onnx"))));
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  const std::string dir = TempDir("unranked");
  WriteFile(dir + "/unranked.onnx", m.SerializeAsString());
  CommandResult r = RunTpCompile(dir + "/unranked.onnx --tp 2 -o " + dir + "/plan");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("graph input '" + m.graph().input(0).name() +
                                       "' is declared without a shape"));
  CHECK_FALSE(fs::exists(dir + "/plan"));
  // At N = 1 nothing is split: it compiles.
  CHECK(RunTpCompile(dir + "/unranked.onnx --tp 1 --quiet -o " + dir + "/one").exit_code == 0);

  r = RunTpCompile(SourcePath("models/mlp.onnx") + " --tp 100000 -o " + dir + "/huge");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("(every float weight has fewer than 100000 elements)"));
}

TEST_CASE("tp-compile --dtype refuses a model whose weights it would not convert", "[plan][bad]") {
  // mlp.onnx in f64 (weights, constants, input and output): --dtype converts f32.
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(ReadFile(SourcePath("models/mlp.onnx"))));
  auto to_f64 = [](::onnx::TensorProto& t) {
    std::vector<float> f(t.float_data().begin(), t.float_data().end());
    if (t.has_raw_data()) {
      f.resize(t.raw_data().size() / 4);
      std::memcpy(f.data(), t.raw_data().data(), t.raw_data().size());
    }
    const std::vector<double> d(f.begin(), f.end());
    t.clear_float_data();
    t.set_data_type(::onnx::TensorProto::DOUBLE);
    t.set_raw_data(std::string(reinterpret_cast<const char*>(d.data()), d.size() * 8));
  };
  auto* g = m.mutable_graph();
  for (auto& t : *g->mutable_initializer()) to_f64(t);
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t() && a.t().data_type() == ::onnx::TensorProto::FLOAT) to_f64(*a.mutable_t());
    }
  }
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      ::onnx::TensorProto::DOUBLE);
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      ::onnx::TensorProto::DOUBLE);
  const std::string dir = TempDir("f64_weights");
  WriteFile(dir + "/f64.onnx", m.SerializeAsString());
  for (const char* dtype : {"f16", "bf16", "f32"}) {
    INFO(dtype);
    const CommandResult r =
        RunTpCompile(dir + "/f64.onnx --tp 2 --dtype " + dtype + " -o " + dir + "/plan");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("the model's float weights are f64, and --dtype "
                                         "converts f32 ones"));
    CHECK_FALSE(fs::exists(dir + "/plan"));
  }
}

TEST_CASE("tp-compile on a full disk: exit 1, the file and the reason, nothing left",
          "[plan][bad]") {
  // A file-size limit of 64 KiB stands for the full disk (the weights pass it; the tool
  // ignores SIGXFSZ, so the write fails with EFBIG).
  const std::string dir = TempDir("full_disk");
  const CommandResult r = tpc::testing::RunCommand(
      "ulimit -f 64; " + tpc::testing::ToolPath("tp-compile") + " " +
      SourcePath("models/llama.onnx") + " --tp 2 --quiet -o " + dir + "/plan");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains(dir + "/plan/rank") &&
                           Catch::Contains(": cannot write (File too large)") &&
                           Catch::Contains("(nothing was written)"));
  CHECK_FALSE(fs::exists(dir + "/plan"));
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile --sequence-parallel with a seq size N does not divide", "[plan][bad]") {
  const std::string dir = TempDir("seq7");
  const CommandResult r =
      RunTpCompile(SourcePath("models/gpt2.onnx") + " --tp 2 --sequence-parallel --dim seq=7 -o " +
                   dir + "/plan");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("tp-compile: error: "));
  CHECK_THAT(r.output, Catch::Contains("seq"));
  CHECK_FALSE(fs::exists(dir + "/plan"));
  CHECK(NoTemporaries(dir));
}

// A parent made read-only does not stop root, so the unwritable output is a path
// under a regular file.
TEST_CASE("tp-compile -o under a regular file", "[plan][bad]") {
  const std::string dir = TempDir("under_file");
  WriteFile(dir + "/FILE", "a file, not a folder");
  const CommandResult r =
      RunTpCompile(SourcePath("models/mlp.onnx") + " --tp 2 -o " + dir + "/FILE/plan");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(dir + "/FILE/plan"));
  CHECK_THAT(r.output, Catch::Contains("does not exist") || Catch::Contains("not a folder"));
  CHECK(ReadFile(dir + "/FILE") == "a file, not a folder");
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile --tp 2 into a non-empty folder without --force", "[plan][bad]") {
  const std::string dir = TempDir("nonempty");
  const std::string out = dir + "/plan";
  fs::create_directories(out);
  WriteFile(out + "/keep.txt", "precious");
  const std::string model = SourcePath("models/gpt2.onnx");
  const CommandResult r = RunTpCompile(model + " --tp 2 -o " + out);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(out));
  CHECK_THAT(r.output, Catch::Contains("not empty"));
  CHECK(ReadFile(out + "/keep.txt") == "precious");
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator{}) == 1);
  CHECK(NoTemporaries(dir));
  // --force replaces plans only: a folder of other files is refused, kept whole.
  CommandResult forced = RunTpCompile(model + " --tp 2 --quiet --force -o " + out);
  INFO(forced.output);
  CHECK(forced.exit_code == 2);
  CHECK_THAT(forced.output,
             Catch::Contains("is not empty and is not a plan (it has no plan.json)"));
  CHECK(ReadFile(out + "/keep.txt") == "precious");
  // A plan is replaced, the extra file with it.
  fs::remove(out + "/keep.txt");
  REQUIRE(RunTpCompile(model + " --tp 4 --quiet -o " + out).exit_code == 0);
  WriteFile(out + "/keep.txt", "stale");
  forced = RunTpCompile(model + " --tp 2 --quiet --force -o " + out);
  CHECK(forced.exit_code == 0);
  CHECK_FALSE(fs::exists(out + "/keep.txt"));
  CHECK(fs::exists(out + "/rank1.onnx"));
  CHECK_FALSE(fs::exists(out + "/rank3.onnx"));
  CHECK(NoTemporaries(dir));
}

namespace {
std::string MlpWithExternalData(const std::string& dir);  // below
}  // namespace

TEST_CASE("tp-compile -o never takes the model, its dump or a link's target from the user",
          "[plan][bad]") {
  const std::string dir = TempDir("keep_model");
  fs::create_directories(dir + "/m");
  fs::copy_file(SourcePath("models/mlp.onnx"), dir + "/m/mlp.onnx");
  const std::string model = dir + "/m/mlp.onnx";
  const std::string bytes = ReadFile(model);
  // -o the model's folder, or one above it, even with --force.
  for (const std::string& out : {dir + "/m", dir}) {
    const CommandResult r = RunTpCompile(model + " --tp 2 --force -o " + out);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("holds the model"));
    CHECK(ReadFile(model) == bytes);
  }
  // --dump-ir onto the model, or inside the folder the plan replaces.
  CommandResult r = RunTpCompile(model + " --tp 2 -o " + dir + "/p --dump-ir " + model);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("is the model " + model));
  CHECK(ReadFile(model) == bytes);
  r = RunTpCompile(model + " --tp 2 -o " + dir + "/p --dump-ir " + dir + "/p/ir.txt");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("which the plan replaces whole"));
  // The model's external data and the styles file are read too: never the dump, never
  // inside -o (a plan beside them, replaced with --force, took them with it).
  fs::create_directories(dir + "/ext");
  const std::string ext = MlpWithExternalData(dir + "/ext");
  const std::string weights = ReadFile(dir + "/ext/mlp.weights");
  r = RunTpCompile(ext + " --tp 2 -o " + dir + "/p --dump-ir " + dir + "/ext/mlp.weights");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("is the model's external data mlp.weights"));
  CHECK(ReadFile(dir + "/ext/mlp.weights") == weights);
  REQUIRE(RunTpCompile(model + " --tp 2 --quiet -o " + dir + "/plan").exit_code == 0);
  WriteFile(dir + "/plan/styles.txt", "*.weight: replicate\n");
  r = RunTpCompile(model + " --tp 2 --force -o " + dir + "/plan --styles " + dir +
                   "/plan/styles.txt");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("holds the styles file"));
  CHECK(fs::exists(dir + "/plan/styles.txt"));
  // A model given through a link in a plan folder (a snapshot of links into blobs/).
  fs::create_symlink(model, dir + "/plan/linked.onnx");
  r = RunTpCompile(dir + "/plan/linked.onnx --tp 2 --force -o " + dir + "/plan");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("holds the model"));
  CHECK(fs::is_symlink(dir + "/plan/linked.onnx"));
  // -o a link to a folder: the plan goes into the folder, the link stays.
  fs::create_directories(dir + "/big_disk/plan");
  fs::create_directory_symlink(dir + "/big_disk/plan", dir + "/link");
  r = RunTpCompile(model + " --tp 2 --quiet -o " + dir + "/link");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(fs::is_symlink(dir + "/link"));
  CHECK(fs::exists(dir + "/big_disk/plan/plan.json"));
  CHECK(NoTemporaries(dir + "/big_disk"));
}

namespace {

// models/mlp.onnx saved in `dir` with its big initializers in `dir/mlp.weights`.
std::string MlpWithExternalData(const std::string& dir) {
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(ReadFile(SourcePath("models/mlp.onnx"))));
  std::string weights;
  int moved = 0;
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (!t.has_raw_data() || t.raw_data().size() < 4096) continue;
    const int64_t offset = static_cast<int64_t>(weights.size());
    weights += t.raw_data();
    const int64_t length = static_cast<int64_t>(t.raw_data().size());
    t.clear_raw_data();
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    const std::vector<std::pair<std::string, std::string>> entries = {
        {"location", "mlp.weights"},
        {"offset", std::to_string(offset)},
        {"length", std::to_string(length)}};
    for (const auto& [k, v] : entries) {
      auto* kv = t.add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    }
    ++moved;
  }
  REQUIRE(moved >= 2);  // the two weight matrices
  WriteFile(dir + "/mlp.weights", weights);
  WriteFile(dir + "/mlp.onnx", m.SerializeAsString());
  return dir + "/mlp.onnx";
}

struct Partitioned {
  std::unique_ptr<tpc::ir::Graph> graph;
};

Partitioned ImportAndPartition(const std::string& model, int64_t n) {
  auto graph = tpc::onnx::ImportModel(model);
  INFO(graph.status().ToString());
  REQUIRE(graph.ok());
  tpc::testing::ShardAndPartition(**graph, tpc::testing::TpOptions(n));
  return {std::move(*graph)};
}

}  // namespace

TEST_CASE("WriteRankFiles: an external data file that vanished or shrank", "[plan][bad]") {
  const std::string dir = TempDir("vanish");
  const std::string model = MlpWithExternalData(dir);
  const std::string weights = dir + "/mlp.weights";
  tpc::plan::PlanOptions po;
  po.tp = 2;
  po.source_model = model;

  SECTION("intact: the plan is written") {
    Partitioned p = ImportAndPartition(model, 2);
    const std::string out = TempDir("vanish_ok");
    auto ranks = tpc::plan::WriteRankFiles(*p.graph, out, po);
    INFO(ranks.status().ToString());
    REQUIRE(ranks.ok());
    CHECK(ranks->size() == 2);
  }
  SECTION("deleted after import") {
    Partitioned p = ImportAndPartition(model, 2);
    fs::remove(weights);
    auto ranks = tpc::plan::WriteRankFiles(*p.graph, TempDir("vanish_gone"), po);
    REQUIRE_FALSE(ranks.ok());
    CHECK(ranks.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(ranks.status().message()), Catch::Contains(weights));
    CHECK_THAT(std::string(ranks.status().message()), Catch::Contains("vanished"));
  }
  SECTION("truncated after import") {
    Partitioned p = ImportAndPartition(model, 2);
    fs::resize_file(weights, 16);
    auto ranks = tpc::plan::WriteRankFiles(*p.graph, TempDir("vanish_short"), po);
    REQUIRE_FALSE(ranks.ok());
    CHECK(ranks.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(ranks.status().message()), Catch::Contains(weights));
    CHECK_THAT(std::string(ranks.status().message()), Catch::Contains("shrank"));
  }
}
