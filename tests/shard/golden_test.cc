// Golden IR text after sharding: every committed model × N ∈ {2, 4} × sequence
// parallelism off/on, in tests/golden/shard/<model>.tp<N>[.sp].ir; and no operator of
// them falls back to replicated for want of a sharding rule. A change in any
// placement shows up as a diff. Set TPC_UPDATE_GOLDENS=1 to rewrite the files (the
// test then passes with a warning); review the diff before committing it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/parser.h"
#include "tpc/ir/printer.h"
#include "tpc/onnx/importer.h"
#include "tpc/shard/shard_pass.h"

TEST_CASE("golden: sharded IR of every committed model", "[shard][golden]") {
  for (const char* model : tpc::testing::kCommittedModels) {
    for (int n : {2, 4}) {
      for (bool sp : {false, true}) {
        const std::string name =
            std::string(model) + ".tp" + std::to_string(n) + (sp ? ".sp" : "") + ".ir";
        DYNAMIC_SECTION(name) {
          auto graph = tpc::testing::ImportCommitted(model);
          const tpc::shard::ShardOptions options = tpc::testing::TpOptions(n, sp);
          auto result = tpc::shard::ShardGraph(*graph, options);
          INFO(result.status().ToString());
          REQUIRE(result.ok());
          // Every operator of every committed model has a rule: none runs replicated
          // because tpc lacks one.
          for (const tpc::ir::Node* n : result->fallback_ops) {
            FAIL_CHECK(n->Describe() << " runs replicated: no sharding rule");
          }
          const std::string text = tpc::ir::PrintGraph(*graph);
          CHECK(text.size() < 200 * 1024);
          bool rewritten = false;
          const std::string diff =
              tpc::testing::CheckGolden("tests/golden/shard/" + name, text, &rewritten);
          if (rewritten) WARN("rewrote tests/golden/shard/" << name);
          INFO(diff);
          CHECK(diff.empty());
          // The text reads back to the same graph: blocked placements (`S(1/3)`,
          // `S(0/batch)`) included.
          auto parsed = tpc::ir::ParseGraph(text);
          INFO(parsed.status().ToString());
          REQUIRE(parsed.ok());
          CHECK(tpc::ir::PrintGraph(**parsed) == text);
        }
      }
    }
  }
}
