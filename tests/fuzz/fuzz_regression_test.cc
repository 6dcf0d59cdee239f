// Replays every input in fuzz/regressions/<harness>/ through the harness it crashed
// (fuzz/targets.h): once a crash is found and fixed, it stays fixed. The harnesses
// return 0 or crash, so the assertion is "it returned"; the sanitizer pass of the suite
// turns memory errors on these inputs into failures too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "targets.h"
#include "test_util.h"

namespace {

using tpc::testing::ReadFile;
using tpc::testing::SourcePath;

std::vector<std::string> RegressionFiles(const std::string& harness) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(SourcePath("fuzz/regressions/" + harness), ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void Replay(const std::string& harness, int (*fuzz)(const uint8_t*, size_t)) {
  const std::vector<std::string> files = RegressionFiles(harness);
  // An empty (or missing) folder would make this test pass without running anything.
  REQUIRE_FALSE(files.empty());
  for (const std::string& file : files) {
    INFO("fuzz/regressions/" << harness << "/" << std::filesystem::path(file).filename().string());
    const std::string text = ReadFile(file);
    // A buffer of exactly the file's size, as libFuzzer passes it, so that a read one
    // past the end is an ASan error here too (std::string has a NUL there).
    const std::vector<uint8_t> bytes(text.begin(), text.end());
    REQUIRE(fuzz(bytes.data(), bytes.size()) == 0);
  }
}

}  // namespace

TEST_CASE("fuzz regressions: import_model", "[fuzz]") {
  Replay("import_model", tpc::fuzz::FuzzImportModel);
}

TEST_CASE("fuzz regressions: external_data", "[fuzz]") {
  Replay("external_data", tpc::fuzz::FuzzExternalData);
}

TEST_CASE("fuzz regressions: ir_parser", "[fuzz]") {
  const int before = tpc::fuzz::IrRoundTripFailures();
  Replay("ir_parser", tpc::fuzz::FuzzIrParser);
  // Printed text that does not parse back is a bug even though nothing crashed.
  CHECK(tpc::fuzz::IrRoundTripFailures() == before);
}

TEST_CASE("fuzz regressions: plan_loader", "[fuzz]") {
  Replay("plan_loader", tpc::fuzz::FuzzPlanLoader);
}
