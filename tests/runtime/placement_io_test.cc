// Inputs sliced by placement and outputs assembled back: slicing a full tensor for every
// rank and assembling the parts through a communicator gives the tensor back, for every
// dim and rank count; P outputs are reduced; dims that do not divide are refused.
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/runtime/placement_io.h"

namespace {

using tpc::ir::DType;
using tpc::ir::Placement;
namespace rt = tpc::runtime;

rt::Tensor Iota(std::vector<int64_t> shape) {
  rt::Tensor t = rt::Tensor::Allocate(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

bool SameBytes(const rt::Tensor& a, const rt::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::equal(a.raw(), a.raw() + a.nbytes(), b.raw());
}

// Each rank's part of `full` assembled back through an in-process group of `n`.
std::vector<rt::Tensor> RoundTrip(const rt::Tensor& full, const Placement& p, int n) {
  auto comms = rt::MakeInProcessGroup(n, std::chrono::seconds(10));
  std::vector<rt::Tensor> out(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto part = rt::SliceForRank("x", full, p, r, n);
      if (!part.ok()) {
        errors[static_cast<size_t>(r)] = std::string(part.status().message());
        comms[static_cast<size_t>(r)]->Abort(part.status());
        return;
      }
      auto whole = rt::AssembleOutput("x", *part, p, *comms[static_cast<size_t>(r)]);
      if (whole.ok())
        out[static_cast<size_t>(r)] = *whole;
      else
        errors[static_cast<size_t>(r)] = std::string(whole.status().message());
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) CHECK(e == "");
  return out;
}

}  // namespace

TEST_CASE("a full tensor sliced by S(d) and gathered back is itself", "[runtime][placement_io]") {
  const rt::Tensor full = Iota({4, 6, 8});
  for (int n : {1, 2}) {
    for (int64_t d : {0, 1, 2, -1}) {
      INFO("n=" << n << " dim " << d);
      for (const rt::Tensor& t : RoundTrip(full, Placement::Shard(d), n)) CHECK(SameBytes(t, full));
    }
  }
  // Three ranks split dim 1 (6) into blocks of 2: rank 1 holds columns 2 and 3.
  auto part = rt::SliceForRank("x", full, Placement::Shard(1), 1, 3);
  REQUIRE(part.ok());
  CHECK(part->shape() == std::vector<int64_t>{4, 2, 8});
  CHECK(part->data<float>()[0] == 16.0f);        // [0, 2, 0]
  CHECK(part->data<float>()[16] == 48.0f + 16);  // [1, 2, 0]
  for (const rt::Tensor& t : RoundTrip(full, Placement::Shard(1), 3)) CHECK(SameBytes(t, full));
}

TEST_CASE("a tensor split in groups of ranks: each group's ranks hold its part",
          "[runtime][placement_io]") {
  // 4 ranks, S(1@2): dim 1 (6) in 2 parts of 3; ranks 0 and 1 hold columns 0-2, ranks 2
  // and 3 columns 3-5.
  const rt::Tensor full = Iota({2, 6, 5});
  const Placement grouped = Placement::ShardInGroups(1, 2);
  for (int r = 0; r < 4; ++r) {
    auto part = rt::SliceForRank("x", full, grouped, r, 4);
    REQUIRE(part.ok());
    CHECK(part->shape() == std::vector<int64_t>{2, 3, 5});
    const float first = r < 2 ? 0.0f : 15.0f;  // [0, 0, 0] or [0, 3, 0]
    CHECK(part->data<float>()[0] == first);
    CHECK(part->data<float>()[15] == first + 30.0f);  // the same column of row 1
  }
  for (const rt::Tensor& t : RoundTrip(full, grouped, 4)) CHECK(SameBytes(t, full));
  // 8 ranks in 4 groups of 2, on the last dim.
  const rt::Tensor wide = Iota({3, 8});
  for (const rt::Tensor& t : RoundTrip(wide, Placement::ShardInGroups(1, 4), 8)) {
    CHECK(SameBytes(t, wide));
  }
  rt::IoSpec spec{"x", tpc::ir::TensorType(DType::kF32, {tpc::ir::Dim(2), tpc::ir::Dim(3)})};
  const auto full_specs = rt::FullSpecs({spec}, {{"x", grouped}}, 4);
  CHECK((*full_specs[0].type.shape)[1] == tpc::ir::Dim(6));
  auto odd = rt::SliceForRank("past", Iota({2, 5}), grouped, 0, 4);
  REQUIRE_FALSE(odd.ok());
  CHECK_THAT(std::string(odd.status().message()),
             Catch::Contains("past") && Catch::Contains("multiple of 2"));
}

// S(d/b), as a fused projection's output is split: the dim is b blocks side by side and
// each rank holds its part of every block (plan.json kept no blocks before, and tp-run
// sliced and assembled such values as plain S(d): wrong values, exit 0).
TEST_CASE("a tensor split in blocks: each rank holds its part of every block",
          "[runtime][placement_io]") {
  // 2 ranks, S(1/2): dim 1 (8) is 2 blocks of 4; rank 1 holds columns 2, 3 and 6, 7.
  const rt::Tensor full = Iota({3, 8});
  const Placement blocked = Placement::Shard(1, 2);
  auto part = rt::SliceForRank("qkv", full, blocked, 1, 2);
  REQUIRE(part.ok());
  REQUIRE(part->shape() == std::vector<int64_t>{3, 4});
  CHECK(std::vector<float>(part->data<float>(), part->data<float>() + 4) ==
        std::vector<float>{2, 3, 6, 7});
  CHECK(part->data<float>()[4] == 10.0f);  // row 1, column 2
  for (int n : {1, 2, 4}) {
    for (int64_t blocks : {2, 3}) {
      for (int64_t d : {0, 1, -1}) {
        INFO("n=" << n << " S(" << d << "/" << blocks << ")");
        const rt::Tensor t = Iota({24, 48, 24});  // every dim a multiple of 2·3·4
        for (const rt::Tensor& back : RoundTrip(t, Placement::Shard(d, blocks), n)) {
          CHECK(SameBytes(back, t));
        }
      }
    }
  }
  // 6 columns in 2 blocks do not split over 2 ranks (each block's 3 does not), though 6
  // would.
  auto odd = rt::SliceForRank("qkv", Iota({2, 6}), Placement::Shard(1, 2), 0, 2);
  REQUIRE_FALSE(odd.ok());
  CHECK_THAT(std::string(odd.status().message()), Catch::Contains("qkv") &&
                                                      Catch::Contains("multiple of 4") &&
                                                      Catch::Contains("in each of 2 blocks"));
}

// S(d/1:1:2), a fused [q | k | v] of unequal parts (Qwen 3.5's convolution state):
// each rank holds its part of each part.
TEST_CASE("a tensor split in unequal blocks: each rank holds its part of each",
          "[runtime][placement_io]") {
  // 2 ranks, dim 1 (8) as blocks of 2, 2 and 4: rank 1 holds columns 1, 3 and 6, 7.
  const rt::Tensor full = Iota({3, 8});
  const Placement unequal = Placement::ShardInWeightedBlocks(1, {1, 1, 2});
  auto part = rt::SliceForRank("conv", full, unequal, 1, 2);
  REQUIRE(part.ok());
  REQUIRE(part->shape() == std::vector<int64_t>{3, 4});
  CHECK(std::vector<float>(part->data<float>(), part->data<float>() + 8) ==
        std::vector<float>{1, 3, 6, 7, 9, 11, 14, 15});
  for (int n : {1, 2, 4}) {
    for (const std::vector<int64_t>& weights :
         std::vector<std::vector<int64_t>>{{1, 1, 2}, {3, 1}, {1, 2, 3}}) {
      for (int64_t d : {0, 1, -1}) {
        const Placement p = Placement::ShardInWeightedBlocks(d, weights);
        INFO("n=" << n << " " << p.ToString());
        const rt::Tensor t = Iota({48, 48, 48});  // every dim a multiple of 6·4 and 4·4
        for (const rt::Tensor& back : RoundTrip(t, p, n)) CHECK(SameBytes(back, t));
      }
    }
  }
  auto odd = rt::SliceForRank("conv", Iota({2, 12}), unequal, 0, 4);
  REQUIRE_FALSE(odd.ok());
  CHECK_THAT(std::string(odd.status().message()),
             Catch::Contains("conv") && Catch::Contains("multiple of 16"));
}

TEST_CASE("plan.json's unequal blocks are read back in their reduced form",
          "[runtime][placement_io]") {
  tpc::proto::Plan plan;
  for (int r = 0; r < 2; ++r) plan.add_ranks();
  auto* in = plan.add_inputs();
  in->set_value("past.0.conv");
  auto* p = in->add_placements();
  p->set_kind(tpc::proto::Placement::SHARD);
  p->set_dim(1);
  p->set_blocks(3);
  for (int64_t w : {1, 1, 2}) p->add_block_weights(w);
  auto io = rt::IoPlacementsFromPlan(plan);
  REQUIRE(io.ok());
  CHECK(io->inputs.at("past.0.conv") == Placement::ShardInWeightedBlocks(1, {1, 1, 2}));
  p->set_blocks(2);  // not their count
  CHECK_FALSE(rt::IoPlacementsFromPlan(plan).ok());
  p->set_blocks(3);
  p->set_block_weights(2, 4);  // 1:1:4 is fine
  CHECK(rt::IoPlacementsFromPlan(plan).ok());
  p->clear_block_weights();
  for (int64_t w : {2, 2, 4}) p->add_block_weights(w);  // not reduced
  io = rt::IoPlacementsFromPlan(plan);
  REQUIRE_FALSE(io.ok());
  CHECK_THAT(std::string(io.status().message()), Catch::Contains("past.0.conv"));
  p->clear_block_weights();
  for (int64_t w : {1, 1, 1}) p->add_block_weights(w);  // equal: written as blocks alone
  CHECK_FALSE(rt::IoPlacementsFromPlan(plan).ok());
  // Weights below 1 or summing past 2^31 (a file's, not tpc's) would place runs outside
  // the dim: refused.
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{
           {3, -1}, {-1, 2}, {0, 1}, {1, int64_t{1} << 31}, {int64_t{1} << 62, 1}}) {
    p->clear_block_weights();
    for (int64_t w : bad) p->add_block_weights(w);
    p->set_blocks(static_cast<int64_t>(bad.size()));
    INFO(bad[0] << ", " << bad[1]);
    CHECK_FALSE(rt::IoPlacementsFromPlan(plan).ok());
  }
  // Nor does a placement built by hand with such weights place any run.
  Placement by_hand = Placement::Shard(1);
  by_hand.blocks = 2;
  by_hand.block_weights = {3, -1};
  CHECK(tpc::ir::PartRuns(by_hand, 4, 1, 2).empty());
  by_hand.block_weights = {int64_t{1} << 62, int64_t{1} << 62, 2};
  by_hand.blocks = 3;
  CHECK(tpc::ir::PartRuns(by_hand, 4, 0, 2).empty());
}

TEST_CASE("plan.json's blocks are read back, never with groups", "[runtime][placement_io]") {
  tpc::proto::Plan plan;
  for (int r = 0; r < 4; ++r) plan.add_ranks();
  auto* out = plan.add_outputs();
  out->set_value("qkv");
  auto* p = out->add_placements();
  p->set_kind(tpc::proto::Placement::SHARD);
  p->set_dim(2);
  p->set_blocks(3);
  auto io = rt::IoPlacementsFromPlan(plan);
  REQUIRE(io.ok());
  CHECK(io->outputs.at("qkv") == Placement::Shard(2, 3));
  p->set_blocks(0);  // absent: a plain split
  io = rt::IoPlacementsFromPlan(plan);
  REQUIRE(io.ok());
  CHECK(io->outputs.at("qkv") == Placement::Shard(2));
  p->set_blocks(2);
  p->set_groups(2);
  io = rt::IoPlacementsFromPlan(plan);
  REQUIRE_FALSE(io.ok());
  CHECK_THAT(std::string(io.status().message()), Catch::Contains("qkv"));
}

TEST_CASE("plan.json's groups must divide its ranks", "[runtime][placement_io]") {
  tpc::proto::Plan plan;
  for (int r = 0; r < 8; ++r) plan.add_ranks();
  auto* in = plan.add_inputs();
  in->set_value("past");
  auto* p = in->add_placements();
  p->set_kind(tpc::proto::Placement::SHARD);
  p->set_dim(1);
  for (int64_t groups : {2, 4}) {
    p->set_groups(groups);
    auto io = rt::IoPlacementsFromPlan(plan);
    REQUIRE(io.ok());
    CHECK(io->inputs.at("past") == Placement::ShardInGroups(1, groups));
  }
  for (int64_t groups : {1, 3, 8, 16}) {
    INFO("groups " << groups);
    p->set_groups(groups);
    auto io = rt::IoPlacementsFromPlan(plan);
    REQUIRE_FALSE(io.ok());
    CHECK_THAT(std::string(io.status().message()), Catch::Contains("past"));
  }
}

TEST_CASE("a dim that does not divide by the ranks is refused, naming it",
          "[runtime][placement_io]") {
  const rt::Tensor full = Iota({2, 7});
  auto part = rt::SliceForRank("past_key_0", full, Placement::Shard(1), 0, 2);
  REQUIRE_FALSE(part.ok());
  const std::string m(part.status().message());
  CHECK_THAT(m, Catch::Contains("past_key_0") && Catch::Contains("dim 1 is 7") &&
                    Catch::Contains("multiple of 2"));
  CHECK_FALSE(rt::SliceForRank("x", full, Placement::Shard(2), 0, 2).ok());
}

TEST_CASE("R outputs are kept, P outputs are reduced", "[runtime][placement_io]") {
  const int n = 3;
  auto comms = rt::MakeInProcessGroup(n, std::chrono::seconds(10));
  std::vector<rt::Tensor> sums(n), maxes(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      rt::Tensor mine = Iota({5});
      for (int64_t i = 0; i < 5; ++i) mine.data<float>()[i] *= static_cast<float>(r + 1);
      auto s = rt::AssembleOutput("y", mine, Placement::Partial(tpc::ir::ReduceOp::kSum),
                                  *comms[static_cast<size_t>(r)]);
      auto m = rt::AssembleOutput("y", mine, Placement::Partial(tpc::ir::ReduceOp::kMax),
                                  *comms[static_cast<size_t>(r)]);
      if (s.ok()) sums[static_cast<size_t>(r)] = *s;
      if (m.ok()) maxes[static_cast<size_t>(r)] = *m;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    REQUIRE(sums[static_cast<size_t>(r)].num_elements() == 5);
    for (int64_t i = 0; i < 5; ++i) {
      CHECK(sums[static_cast<size_t>(r)].data<float>()[i] == static_cast<float>(6 * i));
      CHECK(maxes[static_cast<size_t>(r)].data<float>()[i] == static_cast<float>(3 * i));
    }
  }
}

TEST_CASE("the full type of a sharded value multiplies its split dim", "[runtime][placement_io]") {
  using tpc::ir::Dim;
  tpc::ir::TensorType t(DType::kF32, {Dim::Symbol("batch"), Dim(1), Dim::Symbol("past"), Dim(16)});
  CHECK(rt::FullType(t, Placement::Shard(1), 2).ToString() == "f32[batch, 2, past, 16]");
  CHECK(rt::FullType(t, Placement::Replicate(), 2) == t);
  tpc::ir::TensorType split(DType::kF32, {Dim::Symbol("seq").DivideBy(2), Dim(8)});
  CHECK(rt::FullType(split, Placement::Shard(0), 2).ToString() == "f32[seq, 8]");
  CHECK(rt::FullType(split, Placement::Shard(-2), 2).ToString() == "f32[seq, 8]");
}
