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

TEST_CASE("golden: partitioned IR of every committed model", "[partition][golden]") {
  for (const char* model : tpc::testing::kCommittedModels) {
    for (int n : {2, 4}) {
      for (bool sp : {false, true}) {
        const std::string name =
            std::string(model) + ".tp" + std::to_string(n) + (sp ? ".sp" : "") + ".ir";
        DYNAMIC_SECTION(name) {
          auto graph = tpc::testing::ImportCommitted(model);
          const tpc::shard::ShardOptions options = tpc::testing::TpOptions(n, sp);
          tpc::testing::ShardAndPartition(*graph, options);
          const absl::Status verified = tpc::ir::VerifyGraph(*graph);
          INFO(verified.ToString());
          REQUIRE(verified.ok());
          const std::string text = tpc::ir::PrintGraph(*graph);
          CHECK(text.size() < 256 * 1024);
          bool rewritten = false;
          const std::string diff =
              tpc::testing::CheckGolden("tests/golden/partition/" + name, text, &rewritten);
          if (rewritten) WARN("rewrote tests/golden/partition/" << name);
          INFO(diff);
          CHECK(diff.empty());
        }
      }
    }
  }
}
