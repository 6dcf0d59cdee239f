// The per-rank program is self-consistent: running tpc's shape inference over the
// partitioned graph gives every value the per-rank type the partition stage assigned
// (so every Reshape target, Split size and collective was rewritten right). Where
// inference cannot know a dim (a Pad whose pads are per-rank constants, which differ by
// rank) it says `?`; every dim it does know must agree.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "test_util.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/partition/partition.h"
#include "tpc/shard/shard_pass.h"

TEST_CASE("partition: shape inference agrees with every per-rank type", "[partition]") {
  for (const char* model : tpc::testing::kCommittedModels) {
    for (int n : {2, 4}) {
      for (bool sp : {false, true}) {
        DYNAMIC_SECTION(model << " tp" << n << (sp ? " sp" : "")) {
          auto graph = tpc::testing::ImportCommitted(model);
          const tpc::shard::ShardOptions options = tpc::testing::TpOptions(n, sp);
          tpc::testing::ShardAndPartition(*graph, options);
          std::map<std::string, tpc::ir::TensorType> assigned;
          for (tpc::ir::Node* node : graph->nodes()) {
            for (const tpc::ir::Value* v : node->outputs()) assigned[v->name()] = v->type();
          }
          const absl::Status inferred = tpc::onnx::InferShapes(*graph);
          INFO(inferred.ToString());
          REQUIRE(inferred.ok());
          int checked = 0;
          for (tpc::ir::Node* node : graph->nodes()) {
            for (const tpc::ir::Value* v : node->outputs()) {
              const tpc::ir::TensorType& want = assigned[v->name()];
              const tpc::ir::TensorType& got = v->type();
              INFO(v->name() << ": inferred " << got.ToString() << ", assigned "
                             << want.ToString());
              REQUIRE(got.dtype == want.dtype);
              if (!got.shape) continue;
              REQUIRE(want.shape);
              REQUIRE(got.shape->size() == want.shape->size());
              for (size_t d = 0; d < got.shape->size(); ++d) {
                if ((*got.shape)[d].is_unknown()) continue;
                CHECK((*got.shape)[d] == (*want.shape)[d]);
                ++checked;
              }
            }
          }
          CHECK(checked > 30);
        }
      }
    }
  }
}
