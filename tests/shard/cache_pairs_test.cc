// A decoder's KV cache (a graph input joined with the new keys into a graph output) stays
// split on its heads between steps, also when the present reaches the output through an
// op that passes its values (GPT-J's exporter casts the key cache).
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/ir/parser.h"
#include "tpc/shard/shard_pass.h"

namespace {

// K = x·W in 4 heads of 2, joined after the past on the sequence axis; `tail` makes the
// present from %joined.
std::string CacheGraph(const std::string& tail) {
  return R"(graph "g" opsets("": 18) {
  %x: f32[b, s, 8] = placeholder
  %past: f32[b, 4, p, 2] = placeholder
  %w: f32[8, 8] = constant [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  %shape: i64[4] = constant [0, 0, 4, 2]
  %k: f32[b, s, 8] = MatMul(%x, %w)
  %heads: f32[b, s, 4, 2] = Reshape(%k, %shape)
  %kt: f32[b, 4, s, 2] = Transpose(%heads) {perm=[0, 2, 1, 3]}
  %joined: f32[b, 4, p+s, 2] = Concat(%past, %kt) {axis=2}
)" + tail +
         "}\n";
}

std::string PlacementOf(const tpc::ir::Graph& g, const std::string& name) {
  const tpc::ir::Value* v = g.FindValue(name);
  REQUIRE(v != nullptr);
  return v->sharding() ? v->sharding()->ToString() : "-";
}

}  // namespace

TEST_CASE("a KV cache stays split on its heads, through a Cast to the output too",
          "[shard][cache]") {
  for (const std::string& tail :
       {std::string("  output(%joined)\n"),
        std::string(
            "  %present: f32[b, 4, p+s, 2] = Cast(%joined) {to=1}\n  output(%present)\n")}) {
    INFO(tail);
    auto g = tpc::ir::ParseGraph(CacheGraph(tail));
    INFO(g.status().ToString());
    REQUIRE(g.ok());
    auto r = tpc::shard::ShardGraph(**g, tpc::testing::TpOptions(2));
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(PlacementOf(**g, "past") == "S(1)");
    CHECK(PlacementOf(**g, tail.find("Cast") != std::string::npos ? "present" : "joined") ==
          "S(1)");
    CHECK(r->collectives.empty());
  }
}
