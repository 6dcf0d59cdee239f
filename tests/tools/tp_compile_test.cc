// tp-compile as a user runs it: exit codes, messages, and an output folder that is
// written whole or not at all.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "onnx/onnx_pb.h"
#include "test_util.h"

namespace {

using tpc::testing::CommandResult;
using tpc::testing::NoTemporaries;
using tpc::testing::RunTpCompile;

namespace fs = std::filesystem;

}  // namespace

TEST_CASE("tp-compile --help", "[tools]") {
  CommandResult r = RunTpCompile("--help");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("usage: tp-compile"));
  CHECK_THAT(r.output, Catch::Contains("--tp N"));
  CHECK_THAT(r.output, Catch::Contains("--dump-ir FILE"));
}

TEST_CASE("tp-compile writes rank0.onnx and its weights", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_ok");
  std::string out = dir + "/plan";
  CommandResult r = RunTpCompile(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + out +
                                 " --dump-ir " + dir + "/mlp.ir");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::file_size(out + "/rank0.onnx") > 0);
  // mlp's two weight matrices (64x256 and 256x64 floats) go to the weights file.
  CHECK(fs::file_size(out + "/rank0.weights") >= 2 * 64 * 256 * 4);
  std::string ir = tpc::testing::ReadFile(dir + "/mlp.ir");
  CHECK_THAT(ir, Catch::StartsWith("graph "));
  CHECK_THAT(ir, Catch::Contains("= MatMul("));
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile --dump-ir - prints to stdout", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_dump");
  CommandResult r = RunTpCompile(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + dir +
                                 "/p --quiet --dump-ir -");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("graph "));
  CHECK_THAT(r.output, Catch::Contains("output(%"));
}

TEST_CASE("tp-compile bad usage exits 2", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_usage");
  std::string model = tpc::testing::SourcePath("models/mlp.onnx");
  CommandResult none = RunTpCompile("");
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("expected exactly one MODEL.onnx"));
  CommandResult no_out = RunTpCompile(model);
  CHECK(no_out.exit_code == 2);
  CHECK_THAT(no_out.output, Catch::Contains("missing -o DIR"));
  CommandResult unknown = RunTpCompile(model + " -o " + dir + "/p --frobnicate");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("unknown option '--frobnicate'"));
  CommandResult bad_tp = RunTpCompile(model + " -o " + dir + "/p --tp zero");
  CHECK(bad_tp.exit_code == 2);
  CHECK_THAT(bad_tp.output, Catch::Contains("--tp must be a positive integer"));
  // An option given twice with two values is a mistake (the same value twice is not).
  CommandResult twice = RunTpCompile(model + " -o " + dir + "/p --tp 2 --tp 4");
  CHECK(twice.exit_code == 2);
  CHECK_THAT(twice.output,
             Catch::Contains("option --tp is given twice ('2' and '4'): give it once"));
  twice = RunTpCompile(model + " -o " + dir + "/p -o " + dir + "/q");
  CHECK(twice.exit_code == 2);
  CHECK_FALSE(fs::exists(dir + "/p"));
  CHECK_FALSE(fs::exists(dir + "/q"));
  CHECK(RunTpCompile(model + " -o " + dir + "/same --tp 2 --tp 2 --quiet --quiet").exit_code == 0);
  // Options that do nothing where they are given.
  CommandResult seq = RunTpCompile(model + " -o " + dir + "/p --seq-dim seq");
  CHECK(seq.exit_code == 2);
  CHECK_THAT(seq.output, Catch::Contains("it goes with one of them"));
  CommandResult folder = RunTpCompile(model + " -o " + dir + "/p --styles " + dir);
  CHECK(folder.exit_code == 2);
  CHECK_THAT(folder.output, Catch::Contains("a folder, not a file"));
  CHECK_FALSE(fs::exists(dir + "/p"));
  CommandResult version = RunTpCompile("--version");
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::StartsWith("tp-compile (tpc) "));
}

TEST_CASE("tp-compile --explain: a dim known only at run time, and two alternatives of one name",
          "[tools][explain]") {
  // mlp.onnx with its input's seq dim unnamed (neither a size nor a name).
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(tpc::testing::ReadFile(tpc::testing::SourcePath("models/mlp.onnx"))));
  for (auto* vi : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)}) {
    vi->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->clear_dim_param();
  }
  const std::string dir = tpc::testing::TempDir("explain_unnamed");
  tpc::testing::WriteFile(dir + "/m.onnx", m.SerializeAsString());
  CommandResult r =
      RunTpCompile(dir + "/m.onnx --tp 2 --quiet -o " + dir + "/p --explain /0/MatMul_output_0");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("S(1) is not a candidate: dim 1 = ?, a size known only at "
                                       "run time"));
  CHECK_THAT(r.output, Catch::Contains("partial → P(sum) (from P(sum), R)") &&
                           Catch::Contains("partial → P(sum) (from R, P(sum))"));
}

TEST_CASE("tp-compile bad model: exit 2, message, no output folder", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_bad");
  tpc::testing::WriteFile(dir + "/bad.onnx", "not a model");
  CommandResult r = RunTpCompile(dir + "/bad.onnx -o " + dir + "/plan");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("tp-compile: error: " + dir + "/bad.onnx"));
  CHECK_FALSE(fs::exists(dir + "/plan"));
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile refuses a non-empty output folder unless --force", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_exists");
  std::string out = dir + "/plan";
  fs::create_directories(out);
  tpc::testing::WriteFile(out + "/keep.txt", "precious");
  std::string model = tpc::testing::SourcePath("models/mlp.onnx");
  // A folder of other files: refused, --force or not.
  for (const char* force : {"", " --force"}) {
    CommandResult r = RunTpCompile(model + " -o " + out + force);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("is not empty and is not a plan"));
    CHECK(tpc::testing::ReadFile(out + "/keep.txt") == "precious");
  }
  // A plan: refused without --force, replaced with it.
  fs::remove(out + "/keep.txt");
  REQUIRE(RunTpCompile(model + " -o " + out + " --quiet").exit_code == 0);
  CommandResult r = RunTpCompile(model + " -o " + out);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not empty (use --force"));
  CommandResult forced = RunTpCompile(model + " -o " + out + " --force --quiet");
  CHECK(forced.exit_code == 0);
  CHECK(fs::exists(out + "/rank0.onnx"));
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile into a folder that cannot be created", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_parent");
  CommandResult r =
      RunTpCompile(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + dir + "/no/such/plan");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("does not exist"));
}
