#include <algorithm>
#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "tpc/ir/dim.h"
#include "tpc/ir/parser.h"
#include "tpc/ir/sharding.h"
#include "tpc/ir/tensor_type.h"

namespace tpc::ir {
namespace {

TEST_CASE("Dim: static, symbolic and unknown", "[ir]") {
  Dim a(64);
  CHECK(a.is_static());
  CHECK(a.value() == 64);
  CHECK(a.ToString() == "64");
  CHECK(Dim(0).is_static());
  CHECK(Dim(0).value() == 0);
  CHECK(Dim(0).ToString() == "0");
  CHECK(Dim(-1).ToString() == "-1");

  Dim b = Dim::Symbol("batch");
  CHECK(b.is_symbol());
  CHECK_FALSE(b.is_static());
  CHECK(b.ToString() == "batch");

  Dim u;
  CHECK(u.is_unknown());
  CHECK(u.ToString() == "?");
  CHECK(Dim::Unknown() == u);
  CHECK((u + a).is_unknown());
  CHECK((b * u).is_unknown());
}

// A count the data decides stays unknown (equal to any unknown, printed `?`) and marks
// what is computed from it, for the cost model to price as rows (a plain unknown, one dim).
TEST_CASE("Dim: sized by the data", "[ir]") {
  const Dim n = Dim::SizedByData();
  const Dim h(64), b = Dim::Symbol("batch"), u = Dim::Unknown();
  CHECK(n.is_unknown());
  CHECK(n.is_sized_by_data());
  CHECK(n.ToString() == "?");
  CHECK(n == u);
  CHECK_FALSE(u.is_sized_by_data());
  CHECK_FALSE(h.is_sized_by_data());
  CHECK((n * h).is_sized_by_data());
  CHECK((b + n).is_sized_by_data());
  CHECK((n - u).is_sized_by_data());
  CHECK(n.DivideBy(2).is_sized_by_data());
  CHECK(Dim::UnknownFrom(n * h, h).is_sized_by_data());
  CHECK_FALSE((u * h).is_sized_by_data());
  CHECK_FALSE(Dim::UnknownFrom(u, h).is_sized_by_data());
  CHECK_FALSE(n.DivExact(h).has_value());  // no structure from an unknown
  CHECK_FALSE(Product({b, n}).is_static());
  CHECK(Product({b, n, h}).is_sized_by_data());
}

TEST_CASE("Dim: canonical polynomial form", "[ir]") {
  Dim batch = Dim::Symbol("batch"), seq = Dim::Symbol("seq");
  CHECK((batch * seq).ToString() == "batch*seq");
  CHECK((seq * batch) == (batch * seq));
  CHECK((Dim(2) * seq + 1).ToString() == "2*seq+1");
  CHECK((1 + seq * 2).ToString() == "2*seq+1");
  CHECK((seq - 1).ToString() == "seq-1");
  CHECK((Dim(-1) * seq).ToString() == "-seq");
  CHECK((Dim(0) - seq * 3).ToString() == "-3*seq");
  CHECK((seq * seq).ToString() == "seq*seq");
  CHECK((batch * seq + seq + 1).ToString() == "batch*seq+seq+1");
  CHECK((seq + seq).ToString() == "2*seq");
  CHECK((seq - seq).is_static());
  CHECK((seq - seq).value() == 0);
  CHECK(((seq + 1) * (seq - 1)).ToString() == "seq*seq-1");
  CHECK((Dim(3) * 4).value() == 12);
}

TEST_CASE("Dim: exact division", "[ir]") {
  Dim seq = Dim::Symbol("seq"), batch = Dim::Symbol("batch");
  CHECK(Dim(768).DivExact(12) == Dim(64));
  CHECK_FALSE(Dim(10).DivExact(3).has_value());
  CHECK_FALSE(Dim(10).DivExact(0).has_value());
  CHECK((batch * seq * 64).DivExact(seq) == batch * 64);
  CHECK((seq * 64).DivExact(16) == seq * 4);
  CHECK_FALSE((seq * 6).DivExact(4).has_value());
  CHECK_FALSE(seq.DivExact(batch).has_value());
  CHECK_FALSE((seq + 1).DivExact(seq + 1).has_value());  // not a monomial
  CHECK_FALSE(Dim().DivExact(1).has_value());
}

TEST_CASE("Dim: quoted symbols and helpers", "[ir]") {
  CHECK(Dim::Symbol("past seq").ToString() == "\"past seq\"");
  CHECK((Dim::Symbol("a.b") * 2).ToString() == "2*\"a.b\"");
  CHECK(DimsToString({Dim::Symbol("batch"), Dim(), 64}) == "[batch, ?, 64]");
  CHECK(DimsToString({}) == "[]");
  CHECK(Product({}).value() == 1);
  CHECK(Product({Dim::Symbol("b"), 2, 3}).ToString() == "6*b");
  CHECK(IsPlainIdentifier("batch_1"));
  CHECK_FALSE(IsPlainIdentifier("1batch"));
  CHECK_FALSE(IsPlainIdentifier(""));
  CHECK_FALSE(IsPlainIdentifier("a.b"));
}

TEST_CASE("TensorType: text and known-ness", "[ir]") {
  TensorType t(DType::kF32, {Dim::Symbol("batch"), Dim::Symbol("seq"), 64});
  CHECK(t.ToString() == "f32[batch, seq, 64]");
  CHECK(t.is_fully_known());
  CHECK(t.rank() == 3);
  CHECK(TensorType(DType::kI64, {}).ToString() == "i64[]");
  CHECK(TensorType(DType::kI64, {}).is_fully_known());
  TensorType unranked;
  unranked.dtype = DType::kBF16;
  CHECK(unranked.ToString() == "bf16[*]");
  CHECK_FALSE(unranked.is_fully_known());
  CHECK(unranked.rank() == -1);
  CHECK_FALSE(TensorType(DType::kF16, {Dim(), 2}).is_fully_known());
  CHECK(TensorType(DType::kF16, {Dim(), 2}).ToString() == "f16[?, 2]");
}

TEST_CASE("Placement and Sharding text", "[ir]") {
  CHECK(Placement::Replicate().ToString() == "R");
  CHECK(Placement::Shard(2).ToString() == "S(2)");
  CHECK(Placement::Partial(ReduceOp::kSum).ToString() == "P(sum)");
  CHECK(Placement::Partial(ReduceOp::kMax).ToString() == "P(max)");
  CHECK(Placement::Partial(ReduceOp::kMin).ToString() == "P(min)");
  CHECK(Placement::Partial(ReduceOp::kAvg).ToString() == "P(avg)");
  for (const Placement& p :
       {Placement::Replicate(), Placement::Shard(0), Placement::Shard(13),
        Placement::Partial(ReduceOp::kSum), Placement::Partial(ReduceOp::kMax),
        Placement::Partial(ReduceOp::kMin), Placement::Partial(ReduceOp::kAvg)}) {
    CHECK(Placement::Parse(p.ToString()) == p);
  }
  CHECK_FALSE(Placement::Parse("").has_value());
  CHECK_FALSE(Placement::Parse("S()").has_value());
  CHECK_FALSE(Placement::Parse("S(x)").has_value());
  CHECK_FALSE(Placement::Parse("P(prod)").has_value());
  CHECK_FALSE(Placement::Parse("Q(1)").has_value());
  CHECK_FALSE(Placement::Parse("R(1)").has_value());
  // Split in groups of ranks: S(1@2) is dim 1 in 2 parts, each on N/2 ranks.
  const Placement grouped = Placement::ShardInGroups(1, 2);
  CHECK(grouped.ToString() == "S(1@2)");
  CHECK(Placement::Parse("S(1@2)") == grouped);
  CHECK_FALSE(Placement::Parse("S(1@1)").has_value());
  CHECK_FALSE(Placement::Parse("S(1@)").has_value());
  CHECK_FALSE(Placement::Parse("S(1@2x)").has_value());
  // Unequal blocks: S(2/1:1:2) is dim 2 in blocks of relative sizes 1, 1, 2, each split.
  const Placement unequal = Placement::ShardInWeightedBlocks(2, {32, 32, 64});
  CHECK(unequal.ToString() == "S(2/1:1:2)");
  CHECK(unequal.blocks == 3);
  CHECK(unequal.BlockUnits() == 4);
  CHECK(Placement::Parse("S(2/1:1:2)") == unequal);
  CHECK(Placement::ShardInWeightedBlocks(2, {5, 5}) == Placement::Shard(2, 2));
  CHECK(Placement::ShardInWeightedBlocks(2, {7}) == Placement::Shard(2));
  CHECK_FALSE(Placement::Parse("S(2/2:2:4)").has_value());  // only the reduced form
  CHECK_FALSE(Placement::Parse("S(2/1:1)").has_value());    // equal: S(2/2)
  CHECK_FALSE(Placement::Parse("S(2/1:0)").has_value());
  CHECK_FALSE(Placement::Parse("S(2/1:)").has_value());
  CHECK_FALSE(Placement::Parse("S(2/1)").has_value());
  // Parts and which part a rank holds: 8 ranks in 2 groups of 4.
  CHECK(grouped.Parts(8) == 2);
  CHECK(Placement::Shard(1).Parts(8) == 8);
  CHECK(Placement::Replicate().Parts(8) == 1);
  CHECK(grouped.PartOf(0, 8) == 0);
  CHECK(grouped.PartOf(3, 8) == 0);
  CHECK(grouped.PartOf(4, 8) == 1);
  CHECK(grouped.PartOf(7, 8) == 1);
  CHECK(Placement::Shard(1).PartOf(5, 8) == 5);
  Sharding s{{Placement::Shard(2), Placement::Replicate()}};
  CHECK(s.ToString() == "S(2), R");
  CHECK(Sharding{{Placement::Partial(ReduceOp::kSum)}}.ToString() == "P(sum)");
}

}  // namespace
}  // namespace tpc::ir

TEST_CASE("ParseDim reads the text form of a dim, and only that", "[ir][dim]") {
  using tpc::ir::Dim;
  using tpc::ir::ParseDim;
  REQUIRE(ParseDim("seq/2").ok());
  CHECK(*ParseDim("seq/2") == Dim::Symbol("seq").DivideBy(2));
  CHECK(*ParseDim("seq/2") * Dim(2) == Dim::Symbol("seq"));
  CHECK(*ParseDim("past_sequence_length + sequence_length") ==
        Dim::Symbol("past_sequence_length") + Dim::Symbol("sequence_length"));
  CHECK(*ParseDim("2*batch*seq") == Dim(2) * Dim::Symbol("batch") * Dim::Symbol("seq"));
  CHECK(ParseDim("\"odd name\"")->ToString() == "\"odd name\"");
  CHECK_FALSE(ParseDim("seq seq").ok());
  CHECK_FALSE(ParseDim("seq/0").ok());
  CHECK_FALSE(ParseDim("").ok());
}

// The runs of a split dim a part holds: one for a plain split or a group's part, one
// per block (equal or not), each that block's part-th of `parts`.
TEST_CASE("PartRuns: the runs of a split dim each part holds", "[ir]") {
  using tpc::ir::Placement;
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  auto runs = [](const Placement& p, int64_t size, int64_t part, int64_t parts) {
    Runs out;
    for (const tpc::ir::DimRun& r : tpc::ir::PartRuns(p, size, part, parts)) {
      out.emplace_back(r.begin, r.length);
    }
    return out;
  };
  CHECK(runs(Placement::Shard(0), 12, 1, 3) == Runs{{4, 4}});
  CHECK(runs(Placement::Shard(0, 3), 12, 1, 2) == Runs{{2, 2}, {6, 2}, {10, 2}});
  // [q 32 | k 32 | v 64] over 2 ranks: rank 1 holds q 16-31, k 48-63, v 96-127.
  const Placement unequal = Placement::ShardInWeightedBlocks(1, {1, 1, 2});
  CHECK(runs(unequal, 128, 1, 2) == Runs{{16, 16}, {48, 16}, {96, 32}});
  CHECK(runs(unequal, 128, 0, 4) == Runs{{0, 8}, {32, 8}, {64, 16}});
  // Every part's runs together cover the dim once.
  for (int64_t parts : {1, 2, 4}) {
    std::vector<int> seen(128, 0);
    for (int64_t part = 0; part < parts; ++part) {
      int64_t total = 0;
      for (auto [begin, length] : runs(unequal, 128, part, parts)) {
        for (int64_t i = begin; i < begin + length; ++i) ++seen[static_cast<size_t>(i)];
        total += length;
      }
      CHECK(total == 128 / parts);
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
  CHECK(runs(unequal, 120, 0, 4).empty());  // 120 is not 4 units of a multiple of 4
  CHECK(runs(Placement::Replicate(), 8, 0, 2).empty());
  CHECK(runs(Placement::Shard(0), 8, 2, 2).empty());
}
