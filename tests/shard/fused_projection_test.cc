// SplitFusedProjections: a projection cut into unequal parts becomes one projection per
// part reading its columns (or, for Gemm with transB, rows) of the weight and bias;
// equal parts and constrained projections stay fused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "tpc/ir/parser.h"
#include "tpc/shard/canonicalize.h"

namespace tpc::shard {
namespace {

std::unique_ptr<ir::Graph> Parse(const std::string& text) {
  auto g = ir::ParseGraph(text);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  return std::move(g).value();
}

// 0, 1, 2, ...: element (r, c) of an [8, 6] matrix is 6r + c.
std::string Iota(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(std::to_string(i) + ".0");
  return "[" + absl::StrJoin(v, ", ") + "]";
}

// 0, 1, 2, ... as integers.
std::string Ints(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(std::to_string(i));
  return "[" + absl::StrJoin(v, ", ") + "]";
}

std::vector<double> Data(const ir::Value* v) {
  const ir::Tensor& t = v->producer()->tensor();
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(t.ElementAsDouble(i));
  return out;
}

int Count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->is_call() && node->op_type() == op ? 1 : 0;
  return n;
}

TEST_CASE("fused projection: unequal Split parts become one MatMul each, bias too",
          "[shard][fused]") {
  auto g = Parse(R"(graph "g" opsets("": 18) {
  %x: f32[b, 8] = placeholder
  %w: f32[8, 6] = constant )" +
                 Iota(48) + R"(
  %bias: f32[6] = constant [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
  %sizes: i64[2] = constant [4, 2]
  %y: f32[b, 6] = MatMul(%x, %w) name="qkv"
  %z: f32[b, 6] = Add(%y, %bias) name="qkv_bias"
  %q: f32[b, 4], %kv: f32[b, 2] = Split(%z, %sizes) {axis=1}
  output(%q, %kv)
}
)");
  std::vector<std::string> notes;
  REQUIRE(SplitFusedProjections(*g, {}, &notes) == 1);
  CHECK(notes == std::vector<std::string>{
                     "'qkv' is cut into unequal parts (4, 2 columns): one projection per part"});
  CHECK(Count(*g, "MatMul") == 2);
  CHECK(Count(*g, "Add") == 2);
  CHECK(Count(*g, "Split") == 0);
  CHECK(g->FindValue("w") == nullptr);  // the fused weight is gone
  // The graph outputs keep their names and come from the part projections.
  const ir::Value* q = g->FindValue("q");
  const ir::Value* kv = g->FindValue("kv");
  REQUIRE(q != nullptr);
  REQUIRE(kv != nullptr);
  CHECK(g->outputs() ==
        std::vector<ir::Value*>{const_cast<ir::Value*>(q), const_cast<ir::Value*>(kv)});
  const ir::Node* q_add = q->producer();
  REQUIRE(q_add->op_type() == "Add");
  const ir::Node* q_mm = q_add->input(0)->producer();
  REQUIRE(q_mm->op_type() == "MatMul");
  CHECK(q_mm->name() == "qkv/part0");
  // Columns 0..3 of w, row by row; the bias's first four.
  std::vector<double> want;
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 4; ++c) want.push_back(6 * r + c);
  }
  CHECK(Data(q_mm->input(1)) == want);
  CHECK(Data(q_add->input(1)) == std::vector<double>{10, 11, 12, 13});
  const ir::Node* kv_mm = kv->producer()->input(0)->producer();
  CHECK(kv_mm->input(1)->type().ToString() == "f32[8, 2]");
  CHECK(Data(kv->producer()->input(1)) == std::vector<double>{14, 15});
}

// onnxruntime-genai's int4 projection of Qwen 3 (Q, K, V cut apart to normalize each):
// a MatMulNBits cut by a Split becomes one MatMulNBits per part, with its rows of the
// packed weight [N, blocks, blob] and of the scales [N · blocks].
TEST_CASE("fused projection: a MatMulNBits cut by a Split takes rows of its constants",
          "[shard][fused]") {
  auto g = Parse(R"(graph "g" opsets("": 18, "com.microsoft": 1) {
  %x: f32[b, 16] = placeholder
  %w: u8[6, 1, 8] = constant )" +
                 Ints(48) + R"(
  %scales: f32[6] = constant [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %sizes: i64[2] = constant [4, 2]
  %y: f32[b, 6] = com.microsoft::MatMulNBits(%x, %w, %scales) {K=16, N=6, bits=4, block_size=16} name="qkv"
  %q: f32[b, 4], %kv: f32[b, 2] = Split(%y, %sizes) {axis=1}
  output(%q, %kv)
}
)");
  std::vector<std::string> notes;
  REQUIRE(SplitFusedProjections(*g, {}, &notes) == 1);
  CHECK(Count(*g, "MatMulNBits") == 2);
  CHECK(Count(*g, "Split") == 0);
  const ir::Value* q = g->FindValue("q");
  const ir::Value* kv = g->FindValue("kv");
  REQUIRE(q != nullptr);
  REQUIRE(kv != nullptr);
  const ir::Node* q_mm = q->producer();
  REQUIRE(q_mm->op_type() == "MatMulNBits");
  CHECK(q_mm->attr_int("N", 0) == 4);
  CHECK(kv->producer()->attr_int("N", 0) == 2);
  CHECK(q_mm->input(1)->type().ToString() == "u8[4, 1, 8]");
  std::vector<double> rows;
  for (int i = 32; i < 48; ++i) rows.push_back(i);
  CHECK(Data(kv->producer()->input(1)) == rows);  // rows 4 and 5 of the weight
  CHECK(Data(kv->producer()->input(2)) == std::vector<double>{5, 6});
}

TEST_CASE("fused projection: Gemm with transB cut by Slices takes rows", "[shard][fused]") {
  auto g = Parse(R"(graph "g" opsets("": 18) {
  %x: f32[b, 6] = placeholder
  %w: f32[8, 6] = constant )" +
                 Iota(48) + R"(
  %c: f32[8] = constant [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
  %s0: i64[1] = constant [0]
  %e0: i64[1] = constant [6]
  %s1: i64[1] = constant [6]
  %e1: i64[1] = constant [9223372036854775807]
  %ax: i64[1] = constant [-1]
  %y: f32[b, 8] = Gemm(%x, %w, %c) {transB=1}
  %a: f32[b, 6] = Slice(%y, %s0, %e0, %ax)
  %r: f32[b, 2] = Slice(%y, %s1, %e1, %ax)
  output(%a, %r)
}
)");
  REQUIRE(SplitFusedProjections(*g, {}) == 1);
  CHECK(Count(*g, "Gemm") == 2);
  CHECK(Count(*g, "Slice") == 0);
  const ir::Node* r = g->FindValue("r")->producer();
  REQUIRE(r->op_type() == "Gemm");
  CHECK(r->attr_int("transB", 0) == 1);
  // Rows 6 and 7 of w, and of c.
  std::vector<double> want;
  for (int row = 6; row < 8; ++row) {
    for (int c = 0; c < 6; ++c) want.push_back(6 * row + c);
  }
  CHECK(Data(r->input(1)) == want);
  CHECK(Data(r->input(2)) == std::vector<double>{6, 7});
}

TEST_CASE("fused projection: equal parts and constrained weights stay fused", "[shard][fused]") {
  const std::string text = R"(graph "g" opsets("": 18) {
  %x: f32[b, 8] = placeholder
  %w: f32[8, 6] = constant )" +
                           Iota(48) + R"(
  %sizes: i64[2] = constant SIZES
  %y: f32[b, 6] = MatMul(%x, %w)
  %p: f32[b, A], %q: f32[b, B] = Split(%y, %sizes) {axis=1}
  output(%p, %q)
}
)";
  auto with = [&](const std::string& sizes, const std::string& a, const std::string& b) {
    std::string t = text;
    t.replace(t.find("SIZES"), 5, sizes);
    t.replace(t.find(", A]"), 4, ", " + a + "]");
    t.replace(t.find(", B]"), 4, ", " + b + "]");
    return Parse(t);
  };
  auto equal = with("[3, 3]", "3", "3");
  CHECK(SplitFusedProjections(*equal, {}) == 0);
  CHECK(Count(*equal, "Split") == 1);
  auto constrained = with("[4, 2]", "4", "2");
  Constraints c;
  c.allowed[constrained->FindValue("w")] = {{ir::Placement::Replicate()}, "styles.txt:1"};
  CHECK(SplitFusedProjections(*constrained, c) == 0);
  CHECK(Count(*constrained, "MatMul") == 1);
  // The same graph unconstrained is split.
  auto free = with("[4, 2]", "4", "2");
  CHECK(SplitFusedProjections(*free, {}) == 1);
}

}  // namespace
}  // namespace tpc::shard
