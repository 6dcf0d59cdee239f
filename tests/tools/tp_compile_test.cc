// tp-compile as a user runs it: exit codes, messages, and an output folder that is
// written whole or not at all.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

std::string TpCompile() {
  const char* env = std::getenv("TPC_TP_COMPILE");
  return env != nullptr ? env : std::string(TPC_BINARY_DIR) + "/tp-compile";
}

Result Run(const std::string& args) {
  std::string cmd = TpCompile() + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// True when `dir` holds no leftover temporary folder of tp-compile.
bool NoTemporaries(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("tp-compile --help", "[tools]") {
  Result r = Run("--help");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("usage: tp-compile"));
  CHECK_THAT(r.output, Catch::Contains("--tp N"));
  CHECK_THAT(r.output, Catch::Contains("--dump-ir FILE"));
}

TEST_CASE("tp-compile writes rank0.onnx and its weights", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_ok");
  std::string out = dir + "/plan";
  Result r = Run(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + out + " --dump-ir " + dir +
                 "/mlp.ir");
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
  Result r =
      Run(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + dir + "/p --quiet --dump-ir -");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("graph "));
  CHECK_THAT(r.output, Catch::Contains("output(%"));
}

TEST_CASE("tp-compile bad usage exits 2", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_usage");
  std::string model = tpc::testing::SourcePath("models/mlp.onnx");
  Result none = Run("");
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("expected exactly one MODEL.onnx"));
  Result no_out = Run(model);
  CHECK(no_out.exit_code == 2);
  CHECK_THAT(no_out.output, Catch::Contains("missing -o DIR"));
  Result unknown = Run(model + " -o " + dir + "/p --frobnicate");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("unknown option '--frobnicate'"));
  Result bad_tp = Run(model + " -o " + dir + "/p --tp zero");
  CHECK(bad_tp.exit_code == 2);
  CHECK_THAT(bad_tp.output, Catch::Contains("--tp must be a positive integer"));
  CHECK_FALSE(fs::exists(dir + "/p"));
}

TEST_CASE("tp-compile bad model: exit 2, message, no output folder", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_bad");
  tpc::testing::WriteFile(dir + "/bad.onnx", "not a model");
  Result r = Run(dir + "/bad.onnx -o " + dir + "/plan");
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
  Result r = Run(model + " -o " + out);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not empty (use --force"));
  CHECK(tpc::testing::ReadFile(out + "/keep.txt") == "precious");

  Result forced = Run(model + " -o " + out + " --force --quiet");
  CHECK(forced.exit_code == 0);
  CHECK(fs::exists(out + "/rank0.onnx"));
  CHECK_FALSE(fs::exists(out + "/keep.txt"));
  CHECK(NoTemporaries(dir));
}

TEST_CASE("tp-compile into a folder that cannot be created", "[tools]") {
  std::string dir = tpc::testing::TempDir("tpc_parent");
  Result r = Run(tpc::testing::SourcePath("models/mlp.onnx") + " -o " + dir + "/no/such/plan");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("does not exist"));
}
