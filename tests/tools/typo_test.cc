// A mistyped name on the command line is an error that says what was meant, never a
// silent no-op: --dim, --divisible and --seq-dim of tp-compile, --dim of tp-run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>
#include <string>

#include "test_util.h"

namespace {

using tpc::testing::CommandResult;
using tpc::testing::RunTpCompile;
using tpc::testing::RunTpRun;
using tpc::testing::SourcePath;
using tpc::testing::TempDir;

}  // namespace

TEST_CASE("tp-compile refuses a dim the model does not have, suggesting one", "[tools][typo]") {
  const std::string dir = TempDir("typo_compile");
  const std::string model = SourcePath("models/gpt2.onnx") + " --tp 2 --quiet ";
  struct Case {
    std::string flags, want;
  };
  for (const Case& c : {Case{"--dim sq=8",
                             "--dim 'sq': the model has no such symbolic input dim "
                             "(its symbolic input dims: batch, seq); did you mean "
                             "'seq'?"},
                        Case{"--divisible bacth", "did you mean 'batch'?"},
                        Case{"--sequence-parallel --seq-dim sequence", "did you mean 'seq'?"}}) {
    CommandResult r = RunTpCompile(model + c.flags + " -o " + dir + "/plan");
    INFO(c.flags << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.want));
    CHECK_FALSE(std::filesystem::exists(dir + "/plan"));
  }
  // The right names still work.
  CommandResult ok = RunTpCompile(model + "--dim seq=8 --divisible batch -o " + dir + "/plan");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("tp-run refuses a --dim the inputs do not have, suggesting one", "[tools][typo]") {
  const std::string dir = TempDir("typo_run");
  CommandResult plan = RunTpCompile(SourcePath("models/gpt2.onnx") + " --tp 2 --quiet -o " + dir);
  REQUIRE(plan.exit_code == 0);
  for (const char* mode : {"processes", "threads"}) {
    CommandResult r = RunTpRun(dir + " --ranks " + mode + " --quiet --dim sq=8");
    INFO(mode << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--dim 'sq'") && Catch::Contains("did you mean 'seq'?"));
  }
}

TEST_CASE("explain names and style patterns that match nothing suggest the closest names",
          "[tools][typo]") {
  const std::string dir = TempDir("typo_names");
  const std::string model = SourcePath("models/gpt2.onnx") + " --tp 2 --quiet ";
  CommandResult explain =
      RunTpCompile(model + "--explain /m/transformer/h.0/attn/MatMul_outpt -o " + dir + "/a");
  INFO(explain.output);
  CHECK(explain.exit_code == 2);
  CHECK_THAT(explain.output,
             Catch::Contains("did you mean '/m/transformer/h.0/attn/MatMul_output_0'"));
  tpc::testing::WriteFile(dir + "/styles.txt", "transformer.h.0.attn.c_atn.weight: colwise\n");
  CommandResult style = RunTpCompile(model + "--styles " + dir + "/styles.txt -o " + dir + "/b");
  INFO(style.output);
  CHECK(style.exit_code == 2);
  CHECK_THAT(style.output, Catch::Contains("matches no initializer, node or value; did you mean "
                                           "'m.transformer.h.0.attn.c_attn.weight'"));
}

TEST_CASE("the memory budget takes byte units", "[tools][typo]") {
  const std::string dir = TempDir("budget_units");
  const std::string model =
      SourcePath("models/gpt2.onnx") + " --tp 2 --quiet --objective time --memory-budget ";
  CommandResult mib = RunTpCompile(model + "1MiB -o " + dir + "/a");
  INFO(mib.output);
  CHECK(mib.exit_code == 0);
  for (const char* bad : {"1ZB", "0", "-5MB", "MiB", "1.5.2GB"}) {
    CommandResult r = RunTpCompile(model + bad + " -o " + dir + "/b");
    INFO(bad << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("expected a positive byte count like 123456, 512MiB"));
  }
}

TEST_CASE("tp-run's --gpu-memory takes byte units and needs the CUDA backend", "[tools][typo]") {
  const std::string dir = TempDir("gpu_memory");
  REQUIRE(RunTpCompile(SourcePath("models/mlp.onnx") + " --tp 1 --quiet -o " + dir).exit_code == 0);
  CommandResult cpu = RunTpRun(dir + " --gpu-memory 1GiB");
  INFO(cpu.output);
  CHECK(cpu.exit_code == 2);
  CHECK_THAT(cpu.output, Catch::Contains("--gpu-memory needs --backend cuda"));
  // Checked before anything looks for a GPU.
  for (const char* bad : {"1ZB", "0", "GiB"}) {
    CommandResult r = RunTpRun(dir + " --backend cuda --gpu-memory " + bad);
    INFO(bad << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--gpu-memory") &&
                             Catch::Contains("expected a positive byte count like 123456"));
  }
}

TEST_CASE("the tools' help fits 80 columns", "[tools][help]") {
  for (const char* tool : {"tp-compile", "tp-run"}) {
    CommandResult r = std::string(tool) == "tp-run" ? RunTpRun("--help") : RunTpCompile("--help");
    REQUIRE(r.exit_code == 0);
    std::istringstream lines(r.output);
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
      ++n;
      INFO(tool << " line " << n << ": " << line);
      CHECK(line.size() <= 80);
      // Aligned: an option's text starts at column 26 after at least two spaces, or the
      // flag stands alone (its text starts the next line there).
      if (line.rfind("  -", 0) == 0) {
        const size_t gap = line.find("  ", 2);
        if (gap != std::string::npos) CHECK(line.find_first_not_of(' ', gap) == 26);
      }
    }
    CHECK(n > 20);
  }
}

TEST_CASE("the summary says which dim sizes its collective bytes are for", "[tools][report]") {
  const std::string dir = TempDir("summary_dims");
  const std::string model = SourcePath("models/gpt2.onnx") + " --tp 2 ";
  CommandResult plain = RunTpCompile(model + "-o " + dir + "/a");
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(plain.output, Catch::Contains("collectives per forward, at every symbolic dim = 512 "
                                           "(set them with --dim):"));
  CommandResult sized = RunTpCompile(model + "--dim seq=128 --dim batch=1 -o " + dir + "/b");
  INFO(sized.output);
  REQUIRE(sized.exit_code == 0);
  CHECK_THAT(sized.output, Catch::Contains("collectives per forward, at batch=1, seq=128 and any "
                                           "other symbolic dim = 512:"));
}
