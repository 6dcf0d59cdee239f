// Golden IR text after partitioning: every committed model × N ∈ {2, 4} × sequence
// parallelism off/on, in tests/golden/partition/<model>.tp<N>[.sp].ir. Any change in
// the inserted collectives, per-rank types, per-rank shape inputs or lowerings shows up
// as a diff. Set TPC_UPDATE_GOLDENS=1 to rewrite the files (the test then passes with
// a warning); review the diff before committing it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/printer.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/shard/shard_pass.h"

namespace {

const char* kModels[] = {"mlp",       "mlp_dynamo", "gpt2",    "gpt2_dynamo",
                         "gpt2_loss", "llama",      "mistral", "bert"};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// "" when equal, else where they first differ.
std::string FirstDifference(const std::string& want, const std::string& got) {
  if (want == got) return "";
  const std::vector<std::string> a = Lines(want);
  const std::vector<std::string> b = Lines(got);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "<end of file>";
    const std::string y = i < b.size() ? b[i] : "<end of output>";
    if (x != y) {
      return "first difference at line " + std::to_string(i + 1) + ":\n  golden: " + x +
             "\n  actual: " + y + "\n(golden " + std::to_string(a.size()) + " lines, actual " +
             std::to_string(b.size()) + " lines)";
    }
  }
  return "the files differ only in their final newline";
}

bool Updating() {
  const char* env = std::getenv("TPC_UPDATE_GOLDENS");
  return env != nullptr && std::string(env) == "1";
}

}  // namespace

TEST_CASE("golden: partitioned IR of every committed model", "[partition][golden]") {
  for (const char* model : kModels) {
    for (int n : {2, 4}) {
      for (bool sp : {false, true}) {
        const std::string name =
            std::string(model) + ".tp" + std::to_string(n) + (sp ? ".sp" : "") + ".ir";
        DYNAMIC_SECTION(name) {
          auto graph = tpc::onnx::ImportModel(
              tpc::testing::SourcePath(std::string("models/") + model + ".onnx"));
          REQUIRE(graph.ok());
          tpc::shard::ShardOptions options;
          options.mesh = tpc::shard::Mesh::Tp(n);
          options.sequence_parallel = sp;
          auto result = tpc::shard::ShardGraph(**graph, options);
          INFO(result.status().ToString());
          REQUIRE(result.ok());
          auto stats = tpc::partition::PartitionGraph(**graph, *result, options);
          INFO(stats.status().ToString());
          REQUIRE(stats.ok());
          const absl::Status verified = tpc::ir::VerifyGraph(**graph);
          INFO(verified.ToString());
          REQUIRE(verified.ok());
          const std::string text = tpc::ir::PrintGraph(**graph);
          CHECK(text.size() < 256 * 1024);
          const std::string path = tpc::testing::SourcePath("tests/golden/partition/" + name);
          if (Updating()) {
            std::filesystem::create_directories(std::filesystem::path(path).parent_path());
            tpc::testing::WriteFile(path, text);
            WARN("rewrote " << path);
            continue;
          }
          REQUIRE(std::filesystem::exists(path));
          const std::string diff = FirstDifference(tpc::testing::ReadFile(path), text);
          INFO(path << ": " << diff
                    << "\n(if the change is intended: TPC_UPDATE_GOLDENS=1 rewrites the goldens)");
          CHECK(diff.empty());
        }
      }
    }
  }
}
