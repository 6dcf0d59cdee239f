// User constraints override the solver: styles (colwise, rowwise, replicate, sequence,
// explicit placements), sharding groups, and graph input/output placements; each bad
// constraint fails with a message naming where it came from. ExplainValue shows the
// chosen alternative and why a split was refused.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/shard/styles.h"

namespace {

using tpc::ir::Graph;
using tpc::ir::Node;
using tpc::ir::Placement;
using tpc::ir::Value;
using tpc::shard::CollectiveKind;
using tpc::shard::Constraints;
using tpc::shard::ShardOptions;

std::unique_ptr<Graph> Import(const std::string& model) {
  return tpc::testing::ImportCommitted(model);
}

ShardOptions Tp(int n) { return tpc::testing::TpOptions(n); }

std::string PlacementOf(const Graph& g, const std::string& value) {
  const Value* v = g.FindValue(value);
  REQUIRE(v != nullptr);
  REQUIRE(v->sharding().has_value());
  return v->sharding()->placements.at(0).ToString();
}

// The weight input 1 of the MatMul whose name contains `pattern`.
std::string WeightOf(const Graph& g, const std::string& pattern) {
  for (Node* n : g.nodes()) {
    if (n->is_call() && n->op_type() == "MatMul" && n->name().find(pattern) != std::string::npos) {
      return n->input(1)->name();
    }
  }
  FAIL("no MatMul named like " << pattern);
  return "";
}

// Parses `styles` against `g` and shards with them; the status of the first failure.
absl::Status ShardWithStyles(Graph& g, const ShardOptions& options, const std::string& styles,
                             tpc::shard::ShardResult* out = nullptr) {
  auto c = tpc::shard::ParseStyles(styles, "styles.txt", g, options);
  if (!c.ok()) return c.status();
  auto r = tpc::shard::ShardGraph(g, options, *c);
  if (!r.ok()) return r.status();
  if (out != nullptr) *out = std::move(*r);
  return absl::OkStatus();
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("styles: rowwise on llama's embedding makes it vocab-parallel", "[shard][styles]") {
  auto g = Import("llama");
  tpc::shard::ShardResult r;
  REQUIRE(ShardWithStyles(*g, Tp(2), "*embed_tokens.weight: rowwise\n", &r).ok());
  CHECK(PlacementOf(*g, "m.model.embed_tokens.weight") == "S(0)");
  bool vocab_parallel = false;
  for (const auto& [node, s] : r.strategies) {
    if (node->op_type() == "Gather" && node->input(0)->name() == "m.model.embed_tokens.weight") {
      vocab_parallel = s.name.find("vocab-parallel") != std::string::npos;
    }
  }
  CHECK(vocab_parallel);
  // Without the style the solver prefers the column split (see megatron_test).
  auto plain = Import("llama");
  REQUIRE(tpc::shard::ShardGraph(*plain, Tp(2)).ok());
  CHECK(PlacementOf(*plain, "m.model.embed_tokens.weight") == "S(1)");
}

TEST_CASE("styles: replicate, explicit placements, sequence on a value", "[shard][styles]") {
  auto g = Import("llama");
  const std::string down = WeightOf(*g, "layers.0/mlp/down_proj/MatMul");
  const std::string head = WeightOf(*g, "lm_head/MatMul");
  const std::string q = WeightOf(*g, "layers.1/self_attn/q_proj/MatMul");
  ShardOptions options = Tp(2);
  options.divisible.insert("seq");
  const std::string styles = "# a comment line\n" + down + ": replicate\n" + head +
                             ": S(0)   # row-parallel head instead\n" + q + ": S(-2)\n" +
                             "/m/model/layers.0/Add_output_0: sequence\n";
  INFO(styles);
  auto status = ShardWithStyles(*g, options, styles);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(PlacementOf(*g, down) == "R");
  CHECK(PlacementOf(*g, head) == "S(0)");
  CHECK(PlacementOf(*g, q) == "S(0)");  // S(-2) of a rank-2 weight
  CHECK(PlacementOf(*g, "/m/model/layers.0/Add_output_0") == "S(1)");
  // The untouched layer keeps the Megatron layout.
  CHECK(PlacementOf(*g, WeightOf(*g, "layers.1/mlp/down_proj/MatMul")) == "S(0)");
}

TEST_CASE("styles: colwise on a node applies to its weight", "[shard][styles]") {
  auto g = Import("llama");
  // Make the down projection column-parallel (its weight [176, 64] split on dim 1).
  REQUIRE(ShardWithStyles(*g, Tp(2), "/m/model/layers.*/mlp/down_proj/MatMul: colwise\n").ok());
  CHECK(PlacementOf(*g, WeightOf(*g, "layers.0/mlp/down_proj/MatMul")) == "S(1)");
  CHECK(PlacementOf(*g, WeightOf(*g, "layers.1/mlp/down_proj/MatMul")) == "S(1)");
}

TEST_CASE("styles: a module path as DTensor plans write it names the module's nodes",
          "[shard][styles]") {
  auto g = Import("llama");
  // The committed export wraps the model in `m`: `model.layers.*` matches the end of
  // `m.model.layers.0.mlp.down_proj` (from the node '/m/model/layers.0/mlp/down_proj/MatMul').
  REQUIRE(ShardWithStyles(*g, Tp(2),
                          "model.layers.*.mlp.down_proj: colwise\n"
                          "m.model.layers.*.self_attn.q_proj: rowwise\n")
              .ok());
  for (const char* layer : {"layers.0", "layers.1"}) {
    CHECK(PlacementOf(*g, WeightOf(*g, std::string(layer) + "/mlp/down_proj/MatMul")) == "S(1)");
    CHECK(PlacementOf(*g, WeightOf(*g, std::string(layer) + "/self_attn/q_proj/MatMul")) == "S(0)");
  }
  // A typo suggests module paths.
  auto g2 = Import("llama");
  auto s = ShardWithStyles(*g2, Tp(2), "model.layers.*.self_atn.q_proj: colwise\n");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Message(s), Catch::Contains("styles.txt:1: pattern 'model.layers.*.self_atn.q_proj'"));
  CHECK_THAT(Message(s), Catch::Contains("did you mean 'm.model.layers.0.self_attn.q_proj'"));
}

TEST_CASE("styles: constraints no plan meets together name the line without which one does",
          "[shard][styles]") {
  // gpt2's first norm weight split: LayerNormalization normalizes the whole hidden dim.
  auto g = Import("gpt2");
  const absl::Status s = ShardWithStyles(
      *g, Tp(2),
      "m.transformer.h.0.attn.c_attn.weight: colwise\nm.transformer.h.0.ln_1.weight: S(0)\n");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Message(s), Catch::Contains("no placement satisfies every constraint together; "
                                         "without styles.txt:2 one does"));
}

TEST_CASE("styles: a group makes two values share a placement", "[shard][styles]") {
  auto g = Import("llama");
  const std::string k = WeightOf(*g, "layers.0/self_attn/k_proj/MatMul");  // S(1) alone
  const std::string o = WeightOf(*g, "layers.0/self_attn/o_proj/MatMul");  // S(0) alone
  REQUIRE(tpc::shard::ShardGraph(*g, Tp(2)).ok());
  REQUIRE(PlacementOf(*g, k) != PlacementOf(*g, o));
  auto grouped = Import("llama");
  // The legacy exporter's names contain colons (`onnx::MatMul_614`).
  REQUIRE(k.find("::") != std::string::npos);
  auto st = ShardWithStyles(*grouped, Tp(2), "group: " + k + ", " + o + "\n");
  INFO(st.ToString());
  REQUIRE(st.ok());
  CHECK(PlacementOf(*grouped, k) == PlacementOf(*grouped, o));
  // Groups sharing a member merge transitively.
  const std::string v = WeightOf(*g, "layers.0/self_attn/v_proj/MatMul");
  auto c = tpc::shard::ParseStyles("group: " + k + ", " + o + "\ngroup: " + o + ", " + v + "\n",
                                   "styles.txt", *g, Tp(2));
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  REQUIRE(c->groups.size() == 1);
  CHECK(c->groups[0].size() == 3);
}

TEST_CASE("styles: an output placement S(-1) on GPT-2's logits drops the final all-gather",
          "[shard][styles]") {
  auto g = Import("gpt2");
  tpc::shard::ShardOptions options = Tp(4);
  auto before = tpc::shard::ShardGraph(*g, options);
  REQUIRE(before.ok());
  // The logits, or the head's GEMM output they are reshaped from ("logits/gemm": the
  // tied head reads the table transposed through a Gemm).
  auto gathers_of_logits = [](const tpc::shard::ShardResult& r) {
    int count = 0;
    for (const auto& c : r.collectives) {
      const bool logits = c.value != nullptr &&
                          (c.value->name() == "logits" || c.value->name().starts_with("logits/"));
      count += logits && c.kind == CollectiveKind::kAllGather;
    }
    return count;
  };
  CHECK(gathers_of_logits(*before) == 1);
  auto g2 = Import("gpt2");
  auto named = tpc::shard::ParseNamedPlacement("logits=S(-1)", *g2, /*input=*/false);
  REQUIRE(named.ok());
  REQUIRE(named->size() == 1);
  CHECK(named->at(0).first == "logits");
  CHECK(named->at(0).second == Placement::Shard(2));
  options.output_placements[named->at(0).first] = named->at(0).second;
  auto after = tpc::shard::ShardGraph(*g2, options);
  REQUIRE(after.ok());
  CHECK(gathers_of_logits(*after) == 0);
  CHECK(PlacementOf(*g2, "logits") == "S(2)");
  CHECK(after->collectives.size() == before->collectives.size() - 1);
}

TEST_CASE("styles: every bad constraint names its origin", "[shard][styles]") {
  auto llama = Import("llama");
  auto bert = Import("bert");
  const ShardOptions tp2 = Tp(2);

  SECTION("a pattern matching nothing names the line") {
    auto c = tpc::shard::ParseStyles("# header\n\nno.such.weight*: colwise\n", "styles.txt", *llama,
                                     tp2);
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(Message(c.status()), Catch::StartsWith("styles.txt:3: "));
    CHECK_THAT(Message(c.status()), Catch::Contains("matches no initializer, node or value"));
  }
  SECTION("an unknown style") {
    auto c = tpc::shard::ParseStyles("*embed_tokens.weight: sideways\n", "styles.txt", *llama, tp2);
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(Message(c.status()), Catch::StartsWith("styles.txt:1: unknown style 'sideways'"));
  }
  SECTION("a line without a style") {
    auto c = tpc::shard::ParseStyles("just-a-name\n", "styles.txt", *llama, tp2);
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(Message(c.status()), Catch::Contains("expected 'PATTERN: STYLE'"));
  }
  SECTION("a split whose dim does not divide") {
    // BERT's token-type table is [2, 64]: 2 rows do not split 4 ways.
    auto s = ShardWithStyles(*bert, Tp(4), "\n*token_type_embeddings.weight: S(0)\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::StartsWith("styles.txt:2: "));
    CHECK_THAT(Message(s), Catch::Contains("cannot be S(0)"));
    CHECK_THAT(Message(s), Catch::Contains("its candidates are"));
  }
  SECTION("a split of a value every rank computes whole") {
    // BERT's Shape(input_ids): every rank computes it from the replicated input.
    auto s = ShardWithStyles(*bert, tp2, "/m/embeddings/Shape_output_0: S(0)\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::StartsWith("styles.txt:1: "));
    CHECK_THAT(Message(s), Catch::Contains("computed replicated as R"));
  }
  SECTION("a placement beyond the rank") {
    auto s = ShardWithStyles(*llama, tp2, "*embed_tokens.weight: S(5)\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::Contains("does not fit m.model.embed_tokens.weight"));
  }
  SECTION("'sequence' on a weight") {
    auto s = ShardWithStyles(*llama, tp2, "*embed_tokens.weight: sequence\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::Contains("'sequence' applies to activations"));
  }
  SECTION("'sequence' on a value with no seq dim") {
    auto s = ShardWithStyles(*llama, tp2, "/m/model/rotary_emb/Concat_output_0: sequence\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::StartsWith("styles.txt:1: "));
  }
  SECTION("a group member matching nothing") {
    auto s = ShardWithStyles(*llama, tp2, "group: m.model.embed_tokens.weight, nothing.here\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s),
               Catch::Contains("styles.txt:1: group member 'nothing.here' matches no value"));
  }
  SECTION("two styles disagreeing on one weight") {
    auto s = ShardWithStyles(*llama, tp2,
                             "*embed_tokens.weight: S(0)\nm.model.embed_tokens.weight: S(1)\n");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::Contains("styles.txt:2: "));
    CHECK_THAT(Message(s), Catch::Contains("already constrained to S(0) by styles.txt:1"));
  }
  SECTION("--input-placement with an unknown name") {
    auto p = tpc::shard::ParseNamedPlacement("tokens=S(0)", *llama, /*input=*/true);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(Message(p.status()), Catch::Contains("--input-placement tokens=S(0)"));
    CHECK_THAT(Message(p.status()), Catch::Contains("no graph input 'tokens'"));
    auto partial = tpc::shard::ParseNamedPlacement("input_ids=P(sum)", *llama, /*input=*/true);
    REQUIRE_FALSE(partial.ok());
    auto glob = tpc::shard::ParseNamedPlacement("past_*=S(1)", *llama, /*input=*/true);
    REQUIRE_FALSE(glob.ok());
    CHECK_THAT(Message(glob.status()), Catch::Contains("no graph input matching 'past_*'"));
  }
  SECTION("--input-placement / --output-placement with a glob") {
    auto kv = Import("gpt2_kv");
    auto past = tpc::shard::ParseNamedPlacement("past_*=S(-3)", *kv, /*input=*/true);
    REQUIRE(past.ok());
    std::vector<std::string> names;
    for (const auto& [name, placement] : *past) {
      names.push_back(name);
      CHECK(placement == Placement::Shard(1));
    }
    CHECK(names ==
          std::vector<std::string>{"past_key_0", "past_value_0", "past_key_1", "past_value_1"});
    auto keys = tpc::shard::ParseNamedPlacement("present_key_?=R", *kv, /*input=*/false);
    REQUIRE(keys.ok());
    CHECK(keys->size() == 2);
    // A placement that does not fit one of the matched values names it.
    auto bad = tpc::shard::ParseNamedPlacement("*=S(3)", *kv, /*input=*/true);
    REQUIRE_FALSE(bad.ok());
    CHECK_THAT(Message(bad.status()),
               Catch::Contains("'S(3)' splits a dim input_ids") &&
                   Catch::Contains("does not have (its dims are 0 to 1, or -1 and below)"));
    auto partial = tpc::shard::ParseNamedPlacement("input_ids=P(sum)", *kv, /*input=*/true);
    REQUIRE_FALSE(partial.ok());
    CHECK_THAT(Message(partial.status()),
               Catch::Contains("is not a placement of a graph input (R, S(d), S(d/b) or S(d@g))"));
  }
  SECTION("--input-placement on a dim that does not split") {
    auto p = tpc::shard::ParseNamedPlacement("input_ids=S(1)", *llama, /*input=*/true);
    REQUIRE(p.ok());
    REQUIRE(p->size() == 1);
    ShardOptions options = Tp(4);
    options.input_placements[p->at(0).first] = p->at(0).second;
    auto r = tpc::shard::ShardGraph(*llama, options);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(Message(r.status()), Catch::StartsWith("--input-placement input_ids"));
    CHECK_THAT(Message(r.status()), Catch::Contains("does not split into 4 equal parts"));
    // Declared divisible, the same placement holds.
    options.divisible.insert("seq");
    auto llama2 = Import("llama");
    CHECK(tpc::shard::ShardGraph(*llama2, options).ok());
  }
  SECTION("--output-placement on a dim that does not split") {
    // Was accepted, and the plan failed at run time in its reduce-scatter.
    ShardOptions options = Tp(4);
    options.output_placements["logits"] = Placement::Shard(1);  // seq, not divisible
    auto r = tpc::shard::ShardGraph(*llama, options);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(Message(r.status()), Catch::StartsWith("--output-placement logits"));
    CHECK_THAT(Message(r.status()), Catch::Contains("does not split into 4 equal parts"));
    options.output_placements["logits"] = Placement::Shard(2);  // vocab 512
    auto llama2 = Import("llama");
    CHECK(tpc::shard::ShardGraph(*llama2, options).ok());
  }
}

TEST_CASE("styles: ExplainValue of a value rewritten before solving says so", "[shard][styles]") {
  // GPT-2's transposed copy of the table: the head reads the table through a Gemm.
  auto g = Import("gpt2");
  auto text = tpc::shard::ExplainValue(*g, Tp(2), {}, "onnx::MatMul_538");
  INFO(text.status().ToString());
  REQUIRE(text.ok());
  CHECK_THAT(*text, Catch::StartsWith("onnx::MatMul_538: not in the plan, rewritten") &&
                        Catch::Contains("transposed through a Gemm"));
  // The explanation of the table is of the plan ShardGraph makes.
  auto table = tpc::shard::ExplainValue(*g, Tp(2), {}, "m.transformer.wte.weight");
  REQUIRE(table.ok());
  CHECK_THAT(*table, Catch::Contains("m.transformer.wte.weight: f32[512, 64] → S(0)"));
}

TEST_CASE("styles: ExplainValue shows the choice and the refused splits", "[shard][styles]") {
  SECTION("a weight: the chosen split is starred") {
    auto g = Import("llama");
    const std::string q = WeightOf(*g, "layers.0/self_attn/q_proj/MatMul");
    auto text = tpc::shard::ExplainValue(*g, Tp(2), {}, q);
    REQUIRE(text.ok());
    INFO(*text);
    CHECK_THAT(*text, Catch::Contains("→ S(1)"));
    CHECK_THAT(*text, Catch::Contains("  * S(1): "));
    CHECK_THAT(*text, Catch::Contains("    R: "));
    // Its consumer, and the placement the consumer takes it in.
    CHECK_THAT(*text, Catch::Contains("used by node '/m/model/layers.0/self_attn/q_proj/MatMul' "
                                      "(MatMul) input 1: takes it as S(1)"));
  }
  SECTION("a value read in another placement than it is produced in says so") {
    auto g = Import("llama");
    // The residual stream after attention: produced partial (row-parallel o_proj), read
    // whole by the next norm.
    auto text = tpc::shard::ExplainValue(*g, Tp(2), {},
                                         "/m/model/layers.0/self_attn/o_proj/MatMul_output_0");
    REQUIRE(text.ok());
    INFO(*text);
    CHECK_THAT(*text, Catch::Contains("→ P(sum)"));
    CHECK_THAT(*text, Catch::Contains("converted from P(sum)"));
  }
  SECTION("an activation: symbolic dims not declared divisible") {
    auto g = Import("llama");
    auto text = tpc::shard::ExplainValue(*g, Tp(2), {},
                                         "/m/model/layers.0/self_attn/q_proj/MatMul_output_0");
    REQUIRE(text.ok());
    INFO(*text);
    CHECK_THAT(*text, Catch::Contains("S(0) is not a candidate"));
    CHECK_THAT(*text, Catch::Contains("not declared divisible"));
    // A product of symbols: each symbol is named, not the product.
    CHECK_THAT(*text, Catch::Contains("--divisible batch or --dim batch=K"));
    CHECK_THAT(*text, Catch::Contains("--divisible seq or --dim seq=K"));
    CHECK_THAT(*text, Catch::Contains("  * "));
  }
  SECTION("a static dim that does not divide") {
    auto g = Import("bert");
    auto text =
        tpc::shard::ExplainValue(*g, Tp(4), {}, "m.embeddings.token_type_embeddings.weight");
    REQUIRE(text.ok());
    INFO(*text);
    CHECK_THAT(*text, Catch::Contains("dim 0 = 2 is not divisible by 4"));
    CHECK_THAT(*text, Catch::Contains("  * "));
  }
  SECTION("an alternative a constraint rules out says which constraint") {
    auto g = Import("gpt2");
    const std::string w = "m.transformer.h.0.mlp.c_fc.weight";
    auto c = tpc::shard::ParseStyles(w + ": S(1)\n", "styles.txt", *g, Tp(2));
    REQUIRE(c.ok());
    auto text = tpc::shard::ExplainValue(*g, Tp(2), *c, w);
    REQUIRE(text.ok());
    INFO(*text);
    CHECK_THAT(*text,
               Catch::Contains("    R: impossible: styles.txt:1 allows '" + w + "' only S(1)"));
    // Its consumer's output: the strategies that need the weight otherwise.
    auto out = tpc::shard::ExplainValue(*g, Tp(2), *c, "/m/transformer/h.0/mlp/c_fc/Gemm_output_0");
    REQUIRE(out.ok());
    INFO(*out);
    CHECK_THAT(*out, Catch::Contains("impossible: it needs input 1 as S(0), but styles.txt:1 "
                                     "allows '" +
                                     w + "' only S(1)"));
  }
  SECTION("an unknown value") {
    auto g = Import("llama");
    auto text = tpc::shard::ExplainValue(*g, Tp(2), {}, "no_such_value");
    REQUIRE_FALSE(text.ok());
    CHECK(text.status().code() == absl::StatusCode::kNotFound);
  }
}
