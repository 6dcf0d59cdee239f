// The rules whose cases one golden line does not show: Einsum's equations (ellipsis,
// implicit output, diagonals, broadcast 1s), Conv with groups, Attention's grouped
// heads and 3-D form, and the ops whose strategies depend on known inputs (Tile, Pad,
// the scatters' reductions, MaxPool's indices).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "test_util.h"
#include "tpc/ir/parser.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/shard/op_record.h"

namespace tpc::shard {
namespace {

struct Rule {
  std::string text;                     // the rule's text form, as in rules.txt
  std::vector<std::string> strategies;  // `(S(0), R)->(S(1))`, replicate included
};

// The rule of the call producing %y in `body` (IR text lines between `graph {` and
// `}`) at N = n, with b and s divisible.
Rule RuleOf(const std::string& body, int64_t n = 2, std::vector<ir::Dim> symbolic_blocks = {},
            std::set<int64_t> group_counts = {}) {
  const std::string text = absl::StrCat("graph \"t\" opsets(\"\": 18, \"com.microsoft\": 1) {\n",
                                        body, "\n  output(%y)\n}\n");
  auto graph = ir::ParseGraph(text);
  INFO(text);
  INFO(graph.status().ToString());
  REQUIRE(graph.ok());
  const absl::Status inferred = onnx::InferShapes(**graph);
  INFO(inferred.ToString());
  REQUIRE(inferred.ok());
  ShardOptions options = tpc::testing::TpOptions(n);
  options.divisible = {"b", "s"};
  options.symbolic_block_counts = std::move(symbolic_blocks);
  options.group_counts = std::move(group_counts);
  Rule rule;
  for (ir::Node* node : (*graph)->nodes()) {
    if (!node->is_call() || node->output(0)->name() != "y") continue;
    const OpRecord* record = FindOpRecord(node->domain(), node->op_type());
    REQUIRE(record != nullptr);
    std::vector<std::string> notes;
    RuleContext ctx(*node, options);
    ctx.set_text_sink(&notes);
    std::vector<Strategy> ignored;
    record->rule(ctx, &ignored);
    rule.text = absl::StrJoin(notes, " + ");
    bool has_rule = false;
    for (const Strategy& s : StrategiesFor(*node, options, &has_rule)) {
      std::vector<std::string> ins;
      for (const auto& p : s.inputs) ins.push_back(p ? p->ToString() : "_");
      std::vector<std::string> outs;
      for (const auto& p : s.outputs) outs.push_back(p.ToString());
      rule.strategies.push_back(
          absl::StrCat("(", absl::StrJoin(ins, ", "), ")->(", absl::StrJoin(outs, ", "), ")"));
    }
    break;
  }
  return rule;
}

bool Has(const Rule& r, const std::string& strategy) {
  return std::find(r.strategies.begin(), r.strategies.end(), strategy) != r.strategies.end();
}

std::string Einsum(const std::string& a, const std::string& b, const std::string& equation) {
  return absl::StrCat("  %a: ", a, " = placeholder\n  %b: ", b,
                      " = placeholder\n  %y: f32[*] = Einsum(%a, %b) {equation=\"", equation,
                      "\"}");
}

TEST_CASE("einsum rule: the ellipsis dims pass aligned from the right", "[shard][rules]") {
  // `...` is [b, s] in the first operand and [s] in the second.
  const Rule r = RuleOf(Einsum("f32[b, s, 4, 6]", "f32[s, 6, 8]", "...ij,...jk->...ik"));
  INFO(r.text);
  CHECK(r.text ==
        "([i, j, k, l], [j, l, m])->([i, j, k, m]) reduce_sum={l} + partial(0) + "
        "partial(1)");
  CHECK(Has(r, "(S(1), S(0))->(S(1))"));  // the shared broadcast dim s
  CHECK(Has(r, "(S(0), R)->(S(0))"));     // b, which only the first operand has
  CHECK(Has(r, "(S(3), S(1))->(P(sum))"));
}

TEST_CASE("einsum rule: a broadcast 1 under the ellipsis does not carry the factor",
          "[shard][rules]") {
  const Rule r = RuleOf(Einsum("f32[b, 4, 6]", "f32[1, 6, 8]", "...ij,...jk->...ik"));
  INFO(r.text);
  CHECK(r.text == "([i, j, k], [_, k, l])->([i, j, l]) reduce_sum={k} + partial(0) + partial(1)");
  CHECK(Has(r, "(S(0), R)->(S(0))"));
}

// A dim that may be 1 or the result's at run time (unknown, or another symbol) cannot
// tell a broadcast from a match: its factor stays whole. swin's window attention adds
// scores [?, ?, 16, 16] (the heads unknown after a Reshape of a count of windows that is
// unknown too) to a [4, 16, 16] bias; splitting the heads as if the scores broadcast
// added each rank's bias slice to all 4 heads of the scores.
TEST_CASE("broadcasting: a dim that may be 1 or not keeps its factor whole", "[shard][rules]") {
  const Rule add = RuleOf(
      "  %a: f32[?, ?, 16, 16] = placeholder\n  %c: f32[4, 16, 16] = placeholder\n"
      "  %y: f32[?, 4, 16, 16] = Add(%a, %c)");
  INFO(add.text);
  // The unknown window count (i) may differ from... nothing: unknowns never carry.
  CHECK(add.text == "([i, j, k, l], [j, k, l])->([i, j, k, l]) need_whole={i, j} + partial(0, 1)");
  CHECK_FALSE(Has(add, "(R, S(0))->(S(1))"));
  CHECK(Has(add, "(S(2), S(1))->(S(2))"));
  // A static 1 still broadcasts, and a symbol equal to the result's still carries.
  const Rule one = RuleOf(
      "  %a: f32[b, 1, 16] = placeholder\n  %c: f32[4, 16] = placeholder\n"
      "  %y: f32[b, 4, 16] = Add(%a, %c)");
  INFO(one.text);
  CHECK(Has(one, "(R, S(0))->(S(1))"));
  CHECK(Has(one, "(S(0), R)->(S(0))"));
  // MatMul's batch dims and Einsum's `...` alike.
  const Rule mm = RuleOf(
      "  %a: f32[?, 8, 16] = placeholder\n  %c: f32[4, 16, 8] = placeholder\n"
      "  %y: f32[4, 8, 8] = MatMul(%a, %c)");
  INFO(mm.text);
  CHECK_FALSE(Has(mm, "(R, S(0))->(S(0))"));
  CHECK_FALSE(Has(mm, "(S(0), S(0))->(S(0))"));
  CHECK(Has(mm, "(S(1), R)->(S(1))"));
  const Rule es = RuleOf(Einsum("f32[?, 4, 6]", "f32[2, 6, 8]", "...ij,...jk->...ik"));
  INFO(es.text);
  CHECK_FALSE(Has(es, "(R, S(0))->(S(0))"));
  CHECK_FALSE(Has(es, "(S(0), S(0))->(S(0))"));
}

// Gemm's C [4, 8] (static, not 1) carries m even where Y's m is a symbol; a skip of
// lower rank carries the dims it has; an attention bias whose heads may be 1 or not rules
// out the split by heads.
TEST_CASE("broadcasting: Gemm's C, a lower-rank skip, an attention bias", "[shard][rules]") {
  const Rule gemm = RuleOf(
      "  %a: f32[b, 16] = placeholder\n  %w: f32[16, 8] = placeholder\n"
      "  %c: f32[4, 8] = placeholder\n  %y: f32[b, 8] = Gemm(%a, %w, %c)");
  INFO(gemm.text);
  CHECK_FALSE(Has(gemm, "(S(0), R, R)->(S(0))"));  // C stayed whole while m split
  CHECK(Has(gemm, "(S(0), R, S(0))->(S(0))"));
  const Rule skip = RuleOf(
      "  %x: f32[b, s, 8] = placeholder\n  %k: f32[s, 8] = placeholder\n"
      "  %g: f32[8] = placeholder\n"
      "  %y: f32[*] = com.microsoft::SkipSimplifiedLayerNormalization(%x, %k, %g)");
  INFO(skip.text);
  CHECK(Has(skip, "(S(1), S(0), R)->(S(1))"));  // the sequence splits the skip too
  CHECK_FALSE(Has(skip, "(S(1), R, R)->(S(1))"));
  CHECK(Has(skip, "(S(0), R, R)->(S(0))"));  // the batch it broadcasts over
  auto mha = [](const std::string& bias) {
    return absl::StrCat(
        "  %q: f32[b, s, 64] = placeholder\n  %k: f32[b, s, 64] = placeholder\n",
        "  %v: f32[b, s, 64] = placeholder\n  %ab: ", bias,
        " = placeholder\n  %y: f32[*] = com.microsoft::MultiHeadAttention(%q, %k, %v, _, _, %ab)"
        " {num_heads=4}");
  };
  const Rule unsure = RuleOf(mha("f32[1, ?, s, s]"), 2);
  INFO(unsure.text);
  for (const std::string& st : unsure.strategies) CHECK(st.find("S(2)") == std::string::npos);
  const Rule heads = RuleOf(mha("f32[1, 4, s, s]"), 2);
  INFO(heads.text);
  CHECK(Has(heads, "(S(2), S(2), S(2), _, _, S(1))->(S(2))"));
}

// CastLike reads only target_type's element type: its dims, unknown here, neither carry
// nor block a factor, and it may come in any placement.
TEST_CASE("CastLike: the target's dims take no part", "[shard][rules]") {
  const Rule r = RuleOf(
      "  %x: f32[b, s, 8] = placeholder\n  %t: f16[?, ?] = placeholder\n"
      "  %y: f16[b, s, 8] = CastLike(%x, %t)");
  INFO(r.text);
  CHECK(Has(r, "(S(2), _)->(S(2))"));
  CHECK(Has(r, "(S(0), _)->(S(0))"));
  CHECK(Has(r, "(P(sum), _)->(P(sum))"));
}

TEST_CASE("einsum rule: the implicit output is the letters used once in order", "[shard][rules]") {
  // `ji,jk` → output `ik`: j is summed.
  const Rule r = RuleOf(Einsum("f32[6, b]", "f32[6, 8]", "ji,jk"));
  INFO(r.text);
  CHECK(r.text == "([i, j], [i, k])->([j, k]) reduce_sum={i} + partial(0) + partial(1)");
  CHECK(Has(r, "(S(1), R)->(S(0))"));
  CHECK(Has(r, "(S(0), S(0))->(P(sum))"));
}

TEST_CASE("einsum rule: a diagonal letter needs whole", "[shard][rules]") {
  const Rule r = RuleOf(Einsum("f32[b, 4, 4]", "f32[b, 4]", "bii,bi->bi"));
  INFO(r.text);
  // (The builder names one dim per operand: the diagonal's second dim shows as `_`.)
  CHECK(r.text == "([i, j, _], [i, j])->([i, j]) need_whole={j} + partial(0) + partial(1)");
  CHECK_FALSE(Has(r, "(S(1), S(1))->(S(1))"));
  CHECK(Has(r, "(S(0), S(0))->(S(0))"));
}

std::string Conv(int64_t group, const std::string& w) {
  return absl::StrCat("  %x: f32[b, 4, 8, 8] = placeholder\n  %w: ", w,
                      " = placeholder\n  %c: f32[4] = placeholder\n"
                      "  %y: f32[*] = Conv(%x, %w, %c) {group=",
                      group, ", kernel_shape=[2, 2], strides=[2, 2]}");
}

TEST_CASE("conv rule: output channels split with the weight and bias and input channels reduce",
          "[shard][rules]") {
  const Rule r = RuleOf(Conv(1, "f32[4, 4, 2, 2]"));
  INFO(r.text);
  CHECK(Has(r, "(R, S(0), S(0))->(S(1))"));         // column-parallel
  CHECK(Has(r, "(S(1), S(1), P(sum))->(P(sum))"));  // row-parallel, bias added once
  CHECK(Has(r, "(S(0), R, R)->(S(0))"));            // batch
  for (const std::string& s : r.strategies) CHECK(s.find("S(2)") == std::string::npos);
}

TEST_CASE("conv rule: with groups the channels split only by whole groups", "[shard][rules]") {
  // Depthwise: rank r takes groups [r·g/N, (r+1)·g/N) and runs with g/N groups.
  const Rule r = RuleOf(Conv(4, "f32[4, 1, 2, 2]"));
  INFO(r.text);
  CHECK(r.text.find("need_whole={j, k, l, m}") != std::string::npos);
  CHECK(r.text.find("\"split groups\" (S(1), S(0), S(0))->(S(1))") != std::string::npos);
  CHECK_FALSE(Has(r, "(R, S(0), S(0))->(S(1))"));
  CHECK(Has(r, "(S(1), S(0), S(0))->(S(1))"));
  CHECK(Has(r, "(S(0), R, R)->(S(0))"));
  // 2 groups on 4 ranks: a rank would hold half a group.
  const Rule halves = RuleOf(Conv(2, "f32[4, 2, 2, 2]"), 4);
  INFO(halves.text);
  CHECK_FALSE(Has(halves, "(S(1), S(0), S(0))->(S(1))"));
  CHECK(halves.text.find("split groups") == std::string::npos);
}

TEST_CASE("conv feature dims: the weight's output channels are colwise", "[shard][rules]") {
  auto graph = ir::ParseGraph(
      "graph \"t\" opsets(\"\": 18) {\n  %x: f32[b, 4, 8] = placeholder\n"
      "  %w: f32[6, 4, 3] = placeholder\n  %c: f32[6] = placeholder\n"
      "  %y: f32[*] = Conv(%x, %w, %c)\n  output(%y)\n}\n");
  REQUIRE(graph.ok());
  const ir::Node* conv = nullptr;
  for (ir::Node* n : (*graph)->nodes()) {
    if (n->is_call()) conv = n;
  }
  REQUIRE(conv != nullptr);
  const OpRecord* record = FindOpRecord("", "Conv");
  REQUIRE(record->hooks.feature_dim != nullptr);
  auto none = [](const ir::Value*) { return std::optional<int64_t>(); };
  CHECK(record->hooks.feature_dim(*conv, 1, true, none) == 0);
  CHECK(record->hooks.feature_dim(*conv, 1, false, none) == 1);
  CHECK(record->hooks.feature_dim(*conv, 2, true, none) == 0);
  CHECK_FALSE(record->hooks.feature_dim(*conv, 0, true, none).has_value());
}

std::string Attention(const std::string& q, const std::string& kv, const std::string& attrs) {
  return absl::StrCat("  %q: ", q, " = placeholder\n  %k: ", kv, " = placeholder\n  %v: ", kv,
                      " = placeholder\n  %y: f32[*] = Attention(%q, %k, %v)", attrs);
}

TEST_CASE("attention rule: grouped heads split only when both head counts divide N",
          "[shard][rules]") {
  const std::string gqa = Attention("f32[b, 4, s, 8]", "f32[b, 2, s, 8]", "");
  CHECK(Has(RuleOf(gqa, 2), "(S(1), S(1), S(1))->(S(1))"));
  // 4 ranks: each would hold one query head but half a K/V head.
  const Rule r4 = RuleOf(gqa, 4);
  INFO(r4.text);
  CHECK_FALSE(Has(r4, "(S(1), S(1), S(1))->(S(1))"));
  CHECK(Has(r4, "(S(0), S(0), S(0))->(S(0))"));
  CHECK(Has(r4, "(S(2), R, R)->(S(2))"));  // query rows, not causal
}

TEST_CASE("attention rule: causal query rows and 3-D hidden dims need whole", "[shard][rules]") {
  const Rule causal = RuleOf(Attention("f32[b, 4, s, 8]", "f32[b, 4, s, 8]", " {is_causal=1}"), 2);
  CHECK_FALSE(Has(causal, "(S(2), R, R)->(S(2))"));
  CHECK(Has(causal, "(S(1), S(1), S(1))->(S(1))"));
  const Rule flat =
      RuleOf(Attention("f32[b, s, 32]", "f32[b, s, 32]", " {q_num_heads=4, kv_num_heads=4}"), 2);
  INFO(flat.text);
  CHECK_FALSE(Has(flat, "(S(2), S(2), S(2))->(S(2))"));
  CHECK(Has(flat, "(S(0), S(0), S(0))->(S(0))"));
}

TEST_CASE("attention rule: a mask dim that may be 1 or not keeps its factor whole",
          "[shard][rules]") {
  auto with_mask = [](const std::string& mask) {
    return absl::StrCat(
        "  %q: f32[b, 4, s, 8] = placeholder\n  %k: f32[b, 4, s, 8] = placeholder\n",
        "  %v: f32[b, 4, s, 8] = placeholder\n  %m: ", mask,
        " = placeholder\n  %y: f32[*] = Attention(%q, %k, %v, %m)");
  };
  // Batch and heads of the mask unknown: neither splits (the heads could before, the
  // whole mask going to every rank's heads).
  const Rule unsure = RuleOf(with_mask("f32[?, ?, s, s]"), 2);
  INFO(unsure.text);
  CHECK_FALSE(Has(unsure, "(S(1), S(1), S(1), R)->(S(1))"));
  CHECK_FALSE(Has(unsure, "(S(0), S(0), S(0), R)->(S(0))"));
  // A mask broadcast over the heads (1) lets them split, and its batch goes with Q's.
  const Rule shared = RuleOf(with_mask("f32[b, 1, s, s]"), 2);
  INFO(shared.text);
  CHECK(Has(shared, "(S(1), S(1), S(1), R)->(S(1))"));
  CHECK(Has(shared, "(S(0), S(0), S(0), S(0))->(S(0))"));
}

TEST_CASE("tile rule: only dims repeated once pass", "[shard][rules]") {
  const Rule known = RuleOf(
      "  %x: f32[b, 4, 6] = placeholder\n  %r: i64[3] = constant [1, 2, 1]\n"
      "  %y: f32[*] = Tile(%x, %r)");
  CHECK(Has(known, "(S(0), R)->(S(0))"));
  CHECK(Has(known, "(S(2), R)->(S(2))"));
  CHECK_FALSE(Has(known, "(S(1), R)->(S(1))"));
  CHECK(Has(known, "(P(sum), R)->(P(sum))"));
}

// torch.flip(x, [-1]) exports as Slice(x, -1, -INT64_MAX, axis -1, step -1): the dim keeps
// its size but reverses, so it may not stay split (rank r's block would be reversed in
// place, not moved: a wrong answer at N = 2 until 2026-12-08).
TEST_CASE("slice rule: a reversing slice keeps the reversed dim whole", "[shard][rules]") {
  const std::string head =
      "  %x: f32[b, 4, 6] = placeholder\n  %st: i64[1] = constant [-1]\n"
      "  %en: i64[1] = constant [-9223372036854775807]\n  %ax: i64[1] = constant [2]\n";
  const Rule flip =
      RuleOf(head + "  %sp: i64[1] = constant [-1]\n  %y: f32[*] = Slice(%x, %st, %en, %ax, %sp)");
  CHECK(Has(flip, "(S(0), R, R, R, R)->(S(0))"));
  CHECK_FALSE(Has(flip, "(S(2), R, R, R, R)->(S(2))"));
  // Steps known only at run time: every sliced dim whole.
  const Rule unknown = RuleOf(head +
                              "  %sp: i64[1] = placeholder\n"
                              "  %y: f32[*] = Slice(%x, %st, %en, %ax, %sp)");
  CHECK_FALSE(Has(unknown, "(S(2), R, R, R, R)->(S(2))"));
  // Step 1 over the whole dim is the dim itself: it may stay split.
  const Rule whole = RuleOf(
      "  %x: f32[b, 4, 6] = placeholder\n  %st: i64[1] = constant [0]\n"
      "  %en: i64[1] = constant [9223372036854775807]\n  %ax: i64[1] = constant [2]\n"
      "  %sp: i64[1] = constant [1]\n  %y: f32[*] = Slice(%x, %st, %en, %ax, %sp)");
  CHECK(Has(whole, "(S(2), R, R, R, R)->(S(2))"));
}

// ALiBi's per-head bias repeated over the batch (BLOOM): `[heads, 1, s]` tiled
// `[batch, 1, 1]` times; rank r's heads, repeated, are its part of each copy.
TEST_CASE("tile rule: a split dim repeated a symbolic number of times folds into blocks",
          "[shard][rules]") {
  const Rule r = RuleOf(
      "  %ids: i64[b, s] = placeholder\n  %a: f32[4, 1, s] = placeholder\n"
      "  %shape: i64[2] = Shape(%ids)\n  %i0: i64[1] = constant [0]\n"
      "  %batch: i64[1] = Gather(%shape, %i0) {axis=0}\n  %ones: i64[2] = constant [1, 1]\n"
      "  %rep: i64[3] = Concat(%batch, %ones) {axis=0}\n  %y: f32[*] = Tile(%a, %rep)");
  CHECK(Has(r, "(S(0), R)->(S(0/b))"));
  CHECK(Has(r, "(S(2), R)->(S(2))"));
  CHECK(Has(r, "(R, R)->(R)"));
}

// Heads folded into the batch and back (BLOOM's `[batch·heads, s, d]` attention).
TEST_CASE("reshape rule: a split of heads folds into batch blocks and back", "[shard][rules]") {
  const Rule fold =
      RuleOf("  %x: f32[b, 4, s, 8] = placeholder\n  %y: f32[*] = Flatten(%x) {axis=2}");
  CHECK(Has(fold, "(S(1))->(S(0/b))"));
  CHECK(Has(fold, "(S(0))->(S(0))"));
  const Rule unfold = RuleOf(
      "  %x: f32[b, 4, 8] = placeholder\n  %f: f32[*] = Flatten(%x) {axis=2}\n"
      "  %t: i64[3] = constant [-1, 4, 8]\n  %y: f32[*] = Reshape(%f, %t)");
  CHECK(Has(unfold, "(S(0/b), R)->(S(1))"));
  CHECK(Has(unfold, "(S(0), R)->(S(0))"));
}

// Heads split out of the hidden dim and folded into the sequence in one Reshape, and back:
// `[b, s, H·D] → [b, s·H, D]` (onnxruntime-genai's per-head Q/K norm of Qwen 3), whose
// group has the atoms s, H, D: a split of H·D splits H, which lies inside s·H after s.
TEST_CASE("reshape rule: a split of heads folds across a split dim and a merged one",
          "[shard][rules]") {
  const Rule fold = RuleOf(
      "  %x: f32[b, s, 64] = placeholder\n  %t: i64[3] = constant [0, -1, 16]\n"
      "  %y: f32[*] = Reshape(%x, %t)");
  INFO(fold.text);
  CHECK(Has(fold, "(S(2), R)->(S(1/s))"));
  CHECK(Has(fold, "(S(0), R)->(S(0))"));
  const Rule unfold = RuleOf(
      "  %x: f32[b, s, 64] = placeholder\n  %t: i64[3] = constant [0, -1, 16]\n"
      "  %f: f32[*] = Reshape(%x, %t)\n  %u: i64[3] = constant [0, -1, 64]\n"
      "  %y: f32[*] = Reshape(%f, %u)");
  INFO(unfold.text);
  CHECK(Has(unfold, "(S(1/s), R)->(S(2))"));
  // 8 ranks: the 4 heads do not split 8 ways, though 64 does.
  const Rule eight = RuleOf(
      "  %x: f32[b, s, 64] = placeholder\n  %t: i64[3] = constant [0, -1, 16]\n"
      "  %y: f32[*] = Reshape(%x, %t)",
      8);
  INFO(eight.text);
  CHECK_FALSE(Has(eight, "(S(2), R)->(S(1/s))"));
}

// With `b` a block count (a Reshape folded heads into it), ops that carry a dim keep
// S(d/b); a dim of b itself (`[4·b, 8] → [b, 4, 8]`) holds no b blocks of a size N splits.
TEST_CASE("symbolic block counts pass through batched ops and only onto dims of whole blocks",
          "[shard][rules]") {
  const ir::Dim b = ir::Dim::Symbol("b");
  const Rule matmul = RuleOf(
      "  %a: f32[4*b, s, 8] = placeholder\n  %c: f32[4*b, 8, s] = placeholder\n"
      "  %y: f32[*] = MatMul(%a, %c)",
      2, {b});
  CHECK(Has(matmul, "(S(0/b), S(0/b))->(S(0/b))"));
  const Rule add = RuleOf(
      "  %a: f32[4*b, s, s] = placeholder\n  %c: f32[4*b, 1, s] = placeholder\n"
      "  %y: f32[*] = Add(%a, %c)",
      2, {b});
  CHECK(Has(add, "(S(0/b), S(0/b))->(S(0/b))"));
  const Rule unfold = RuleOf(
      "  %x: f32[b, 4, 8] = placeholder\n  %f: f32[*] = Flatten(%x) {axis=2}\n"
      "  %t: i64[3] = constant [-1, 4, 8]\n  %y: f32[*] = Reshape(%f, %t)",
      2, {b});
  CHECK(Has(unfold, "(S(0/b), R)->(S(1))"));
  CHECK_FALSE(Has(unfold, "(S(0/b), R)->(S(0/b))"));
}

// Grouped-query attention repeats its KV < N K/V heads for the query heads by Expand:
// the Expand tells the solver to try each K/V head on its group of N/KV ranks, S(d@KV).
TEST_CASE("group counts: an Expand repeating KV < N heads offers S(d@KV)", "[shard][rules]") {
  const std::string repeat =
      "  %x: f32[b, 2, 1, s, 8] = placeholder\n  %t: i64[5] = constant [1, 1, 2, 1, 1]\n"
      "  %y: f32[*] = Expand(%x, %t)";
  auto graph = ir::ParseGraph(
      absl::StrCat("graph \"t\" opsets(\"\": 18) {\n", repeat, "\n  output(%y)\n}\n"));
  REQUIRE(graph.ok());
  REQUIRE(onnx::InferShapes(**graph).ok());
  const ir::Node* expand = nullptr;
  for (ir::Node* node : (*graph)->nodes()) {
    if (node->is_call() && node->op_type() == "Expand") expand = node;
  }
  REQUIRE(expand != nullptr);
  const OpRecord* record = FindOpRecord("", "Expand");
  REQUIRE(record->hooks.group_counts != nullptr);
  CHECK(record->hooks.group_counts(*expand, 4) == std::vector<int64_t>{2});
  CHECK(record->hooks.group_counts(*expand, 8) == std::vector<int64_t>{2});
  CHECK(record->hooks.group_counts(*expand, 2).empty());  // KV = N: a plain split
  CHECK(record->hooks.group_counts(*expand, 3).empty());  // 2 does not divide 3

  // At N = 4 with 2 groups: the repeat keeps a K/V head per group, the merge of K/V heads
  // and repeats into the query heads carries it, and the head split of a projection's
  // output lands only on dims that split so ([b, s, 16] → [b, s, 2, 8]: S(2@2), not S(2),
  // since 2 heads do not split 4 ways).
  const std::set<int64_t> groups = {2};
  const Rule expand_rule = RuleOf(repeat, 4, {}, groups);
  CHECK(Has(expand_rule, "(S(1@2), R)->(S(1@2))"));
  const Rule merge = RuleOf(
      "  %x: f32[b, 2, 2, s, 8] = placeholder\n  %t: i64[4] = constant [0, 4, -1, 8]\n"
      "  %y: f32[*] = Reshape(%x, %t)",
      4, {}, groups);
  CHECK(Has(merge, "(S(1@2), R)->(S(1@2))"));
  CHECK_FALSE(Has(merge, "(S(1), R)->(S(1))"));
  const Rule heads = RuleOf(
      "  %x: f32[b, s, 16] = placeholder\n  %t: i64[4] = constant [0, 0, 2, 8]\n"
      "  %y: f32[*] = Reshape(%x, %t)",
      4, {}, groups);
  CHECK(Has(heads, "(S(2@2), R)->(S(2@2))"));
  CHECK_FALSE(Has(heads, "(S(2), R)->(S(2))"));
  // A projection: its output features in groups; never its reduced dim (each group's
  // ranks would hold the same partial sum).
  const Rule proj = RuleOf(
      "  %x: f32[b, s, 8] = placeholder\n  %w: f32[8, 16] = placeholder\n"
      "  %y: f32[*] = MatMul(%x, %w)",
      4, {}, groups);
  CHECK(Has(proj, "(R, S(1@2))->(S(2@2))"));
  CHECK(Has(proj, "(S(2), S(0))->(P(sum))"));
  for (const std::string& st : proj.strategies)
    CHECK(st.find("S(2@2), S(0@2)") == std::string::npos);
  // Without group counts (no such Expand in the graph) nothing is offered in groups.
  for (const std::string& st : RuleOf(repeat, 4).strategies)
    CHECK(st.find('@') == std::string::npos);
}

// onnxruntime's RotaryEmbedding numbers the tokens from position_ids: per token, the
// sequence may split; from a first position ([1]), a rank holding part of the sequence
// would number its tokens from that position again, so the sequence stays whole.
TEST_CASE("contrib rotary rule: a first position keeps the sequence whole", "[shard][rules]") {
  const std::string caches = "  %c: f32[32, 8] = placeholder\n  %sn: f32[32, 8] = placeholder\n";
  const Rule per_token =
      RuleOf("  %x: f32[b, s, 64] = placeholder\n  %p: i64[b, s] = placeholder\n" + caches +
             "  %y: f32[*] = com.microsoft::RotaryEmbedding(%x, %p, %c, %sn)");
  CHECK(Has(per_token, "(S(1), S(1), R, R)->(S(1))"));
  CHECK(Has(per_token, "(S(2), R, R, R)->(S(2))"));  // whole heads: 4 heads of 16 on 2 ranks
  const Rule first =
      RuleOf("  %x: f32[b, s, 64] = placeholder\n  %p: i64[1] = placeholder\n" + caches +
             "  %y: f32[*] = com.microsoft::RotaryEmbedding(%x, %p, %c, %sn)");
  CHECK_FALSE(Has(first, "(S(1), R, R, R)->(S(1))"));
  CHECK(Has(first, "(S(0), R, R, R)->(S(0))"));
}

TEST_CASE("pad rule: only a zero fill is linear", "[shard][rules]") {
  const std::string head =
      "  %x: f32[b, 4, 6] = placeholder\n  %p: i64[6] = constant [0, 0, 1, 0, 0, 1]\n";
  const Rule zero = RuleOf(head + "  %y: f32[*] = Pad(%x, %p)");
  CHECK(Has(zero, "(P(sum), R)->(P(sum))"));
  CHECK(Has(zero, "(S(1), R)->(S(1))"));
  CHECK_FALSE(Has(zero, "(S(2), R)->(S(2))"));
  const Rule one = RuleOf(head + "  %c: f32[] = constant [1.0]\n  %y: f32[*] = Pad(%x, %p, %c)");
  CHECK_FALSE(Has(one, "(P(sum), R, R)->(P(sum))"));
  CHECK(Has(one, "(S(1), R, R)->(S(1))"));
  const Rule reflect = RuleOf(head + "  %y: f32[*] = Pad(%x, %p) {mode=\"reflect\"}");
  CHECK_FALSE(Has(reflect, "(P(sum), R)->(P(sum))"));
}

TEST_CASE("scatter rules: a multiplying reduction is not linear", "[shard][rules]") {
  const std::string head =
      "  %x: f32[b, 4, 6] = placeholder\n  %i: i64[b, 4, 2] = placeholder\n"
      "  %u: f32[b, 4, 2] = placeholder\n";
  const Rule none = RuleOf(head + "  %y: f32[*] = ScatterElements(%x, %i, %u) {axis=2}");
  CHECK(Has(none, "(P(sum), R, P(sum))->(P(sum))"));
  CHECK(Has(none, "(S(1), S(1), S(1))->(S(1))"));
  CHECK_FALSE(Has(none, "(S(2), S(2), S(2))->(S(2))"));
  const Rule mul =
      RuleOf(head + "  %y: f32[*] = ScatterElements(%x, %i, %u) {axis=2, reduction=\"mul\"}");
  CHECK_FALSE(Has(mul, "(P(sum), R, P(sum))->(P(sum))"));
}

// Zeros are a partial sum of zeros: the accumulator that torch's `zeros().index_add_()`
// exports (a mixture of experts summing its experts' rows) can start partial. Any other
// fill, or integers, cannot.
TEST_CASE("generator rules: ConstantOfShape's zeros may be partial sums", "[shard][rules]") {
  const std::string head = "  %shape: i64[2] = constant [4, 6]\n";
  const Rule plain = RuleOf(head + "  %y: f32[*] = ConstantOfShape(%shape)");
  CHECK(Has(plain, "(R)->(P(sum))"));
  CHECK(Has(plain, "(R)->(R)"));
  const Rule zero =
      RuleOf(head + "  %y: f32[*] = ConstantOfShape(%shape) {value=tensor<f32[1]>[0.0]}");
  CHECK(Has(zero, "(R)->(P(sum))"));
  const Rule one =
      RuleOf(head + "  %y: f32[*] = ConstantOfShape(%shape) {value=tensor<f32[1]>[1.0]}");
  CHECK_FALSE(Has(one, "(R)->(P(sum))"));
  const Rule ints =
      RuleOf(head + "  %y: i64[*] = ConstantOfShape(%shape) {value=tensor<i64[1]>[0]}");
  CHECK_FALSE(Has(ints, "(R)->(P(sum))"));
}

// OneHot: the indices' dims pass around the inserted depth dim, which stays whole.
TEST_CASE("one-hot rule: the indices' dims pass, the depth stays whole", "[shard][rules]") {
  const std::string head =
      "  %i: i64[b, 4] = placeholder\n  %d: i64[] = constant [5]\n"
      "  %v: f32[2] = constant [0.0, 1.0]\n";
  const Rule mid = RuleOf(head + "  %y: f32[*] = OneHot(%i, %d, %v) {axis=1}");
  INFO(mid.text);
  CHECK(Has(mid, "(S(0), R, R)->(S(0))"));
  CHECK(Has(mid, "(S(1), R, R)->(S(2))"));
  CHECK_FALSE(Has(mid, "(S(1), R, R)->(S(1))"));
  const Rule last = RuleOf(head + "  %y: f32[*] = OneHot(%i, %d, %v)");
  CHECK(Has(last, "(S(1), R, R)->(S(1))"));
}

// QMoE's inner split takes each rank's FC2 columns as whole bytes and whole blocks: with
// one scale per row ([E, H]) the scales are every rank's; with one block of FC2's columns
// (I = 16 in blocks of 16) no split keeps whole blocks.
TEST_CASE("QMoE rule: FC2's codes split by whole blocks, per-row scales whole", "[shard][rules]") {
  auto qmoe = [](const std::string& s2, const std::string& w2) {
    return RuleOf(
        absl::StrCat("  %x: f32[b, 32] = placeholder\n  %r: f32[b, 4] = placeholder\n"
                     "  %w1: u8[4, 32, 16] = placeholder\n  %s1: f32[4, 32] = placeholder\n"
                     "  %w2: ",
                     w2, " = placeholder\n  %s2: ", s2,
                     " = placeholder\n"
                     "  %y: f32[*] = com.microsoft::QMoE(%x, %r, %w1, %s1, _, %w2, %s2, _) {k=2, "
                     "normalize_routing_weights=1}"));
  };
  const Rule per_row = qmoe("f32[4, 32]", "u8[4, 32, 16]");
  INFO(per_row.text);
  CHECK(Has(per_row, "(R, R, S(1), S(1), _, S(2), R, _)->(P(sum))"));
  const Rule one_block = qmoe("f32[4, 32, 1]", "u8[4, 32, 8]");
  INFO(one_block.text);
  CHECK_FALSE(Has(one_block, "(R, R, S(1), S(1), _, S(2), S(2), _)->(P(sum))"));
  CHECK(Has(one_block, "(S(0), S(0), R, R, _, R, R, _)->(S(0))"));
}

// GeGLU's gate and linear rows are interleaved pairs, as SwiGLU's: the inner split keeps
// whole pairs when they are interleaved (swiglu_fusion = 1), and is not offered otherwise.
TEST_CASE("MoE rule: GeGLU experts split by inner dim only with interleaved pairs",
          "[shard][rules]") {
  auto moe = [](const std::string& fusion) {
    return RuleOf(
        "  %x: f32[b, 16] = placeholder\n  %r: f32[b, 4] = placeholder\n"
        "  %w1: f32[4, 16, 16] = placeholder\n  %w2: f32[4, 16, 8] = placeholder\n"
        "  %y: f32[*] = com.microsoft::MoE(%x, %r, %w1, _, %w2, _) {activation_type=\"geglu\", "
        "k=2" +
        fusion + "}");
  };
  const Rule interleaved = moe(", swiglu_fusion=1");
  INFO(interleaved.text);
  CHECK(Has(interleaved, "(R, R, S(1), _, S(2), _)->(P(sum))"));
  const Rule halves = moe("");
  INFO(halves.text);
  CHECK_FALSE(Has(halves, "(R, R, S(1), _, S(2), _)->(P(sum))"));
  CHECK(Has(halves, "(S(0), S(0), R, _, R, _)->(S(0))"));
}

// GatherBlockQuantized's table splits along K only in whole blocks and whole bytes of
// packed zero points: 4 blocks of 4-bit zero points at N = 2 are one byte each; 2 blocks
// are half a byte each, so the table stays whole (the tokens still split).
TEST_CASE("GatherBlockQuantized rule: K splits in whole blocks and zero-point bytes",
          "[shard][rules]") {
  auto gather = [](int64_t blocks) {
    return RuleOf(absl::StrCat(
        "  %t: u8[32, ", blocks * 16,
        "] = placeholder\n  %i: i64[b, s] = placeholder\n  %s: f32[32, ", blocks,
        "] = placeholder\n  %z: u8[32, ", (blocks + 1) / 2,
        "] = placeholder\n  %y: f32[*] = com.microsoft::GatherBlockQuantized(%t, %i, %s, %z) "
        "{bits=4, block_size=32}"));
  };
  const Rule four = gather(4);
  INFO(four.text);
  CHECK(Has(four, "(S(1), R, S(1), S(1))->(S(2))"));
  CHECK(Has(four, "(R, S(0), R, R)->(S(0))"));
  const Rule two = gather(2);
  INFO(two.text);
  CHECK_FALSE(Has(two, "(S(1), R, S(1), S(1))->(S(2))"));
  CHECK(Has(two, "(R, S(0), R, R)->(S(0))"));
  CHECK(Has(two, "(S(0), R, S(0), S(0))->(P(sum))"));  // the vocab's masked lookup
  // Without zero points, named absent: the masked lookup still offered.
  const Rule absent = RuleOf(
      "  %t: u8[32, 64] = placeholder\n  %i: i64[b, s] = placeholder\n"
      "  %s: f32[32, 4] = placeholder\n"
      "  %y: f32[*] = com.microsoft::GatherBlockQuantized(%t, %i, %s, _) {bits=4, block_size=32}");
  INFO(absent.text);
  CHECK(Has(absent, "(S(0), R, S(0), _)->(P(sum))"));
}

// LinearAttention with fewer query (or value) heads than ranks puts each of those heads
// on its group of ranks; a key of the value's heads (which onnxruntime takes too) splits
// with the value.
TEST_CASE("LinearAttention rule: the fewer heads on groups of ranks", "[shard][rules]") {
  auto linear = [](int64_t hq, int64_t hk, int64_t hv) {
    return RuleOf(
        absl::StrCat("  %q: f32[b, s, ", hq * 8, "] = placeholder\n  %k: f32[b, s, ", hk * 8,
                     "] = placeholder\n  %v: f32[b, s, ", hv * 4, "] = placeholder\n  %p: f32[b, ",
                     hv, ", 8, 4] = placeholder\n  %g: f32[b, s, ", hv,
                     "] = placeholder\n  %r: f32[b, s, ", hv,
                     "] = placeholder\n  %y: f32[*], %z: f32[*] = "
                     "com.microsoft::LinearAttention(%q, %k, %v, %p, %g, %r) {kv_num_heads=",
                     hv, ", q_num_heads=", hq, "}"),
        4, {}, {2});
  };
  const Rule inverse = linear(2, 2, 4);
  INFO(inverse.text);
  CHECK(Has(inverse, "(S(2@2), S(2@2), S(2), S(1), S(2), S(2))->(S(2), S(1))"));
  const Rule value_keys = linear(2, 4, 4);
  INFO(value_keys.text);
  CHECK(Has(value_keys, "(S(2@2), S(2), S(2), S(1), S(2), S(2))->(S(2), S(1))"));
  CHECK_FALSE(Has(value_keys, "(S(2@2), S(2@2), S(2), S(1), S(2), S(2))->(S(2), S(1))"));
  const Rule gqa = linear(4, 2, 2);
  INFO(gqa.text);
  CHECK(Has(gqa, "(S(2), S(2@2), S(2@2), S(1@2), S(2@2), S(2@2))->(S(2), S(1@2))"));
  const Rule even = linear(4, 4, 4);
  CHECK(Has(even, "(S(2), S(2), S(2), S(1), S(2), S(2))->(S(2), S(1))"));
  CHECK(Has(even, "(S(0), S(0), S(0), S(0), S(0), S(0))->(S(0), S(0))"));
}

TEST_CASE("pool rules: MaxPool with indices keeps everything whole", "[shard][rules]") {
  const std::string x = "  %x: f32[b, 4, 8, 8] = placeholder\n";
  CHECK(Has(RuleOf(x + "  %y: f32[*] = MaxPool(%x) {kernel_shape=[2, 2]}"), "(S(1))->(S(1))"));
  const Rule indices = RuleOf(x + "  %y: f32[*], %j: i64[*] = MaxPool(%x) {kernel_shape=[2, 2]}");
  INFO(indices.text);
  CHECK(indices.strategies.size() == 1);  // replicate
}

}  // namespace
}  // namespace tpc::shard
