#include <catch2/catch.hpp>

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
