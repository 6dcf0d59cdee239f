// The α–β model of ring collectives: the numbers, how they scale with the number of
// ranks, and which collective each placement transition needs.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>

#include "tpc/shard/cost_model.h"

namespace {

using tpc::ir::Placement;
using tpc::ir::ReduceOp;
using tpc::shard::CollectiveKind;
using tpc::shard::CollectivePicos;
using tpc::shard::DeviceProfile;
using tpc::shard::TransitionCollective;
using tpc::shard::TransitionPicos;
using tpc::shard::TransitionPossible;

Placement R() { return Placement::Replicate(); }
Placement S(int64_t d, int64_t blocks = 1) { return Placement::Shard(d, blocks); }
Placement P(ReduceOp op = ReduceOp::kSum) { return Placement::Partial(op); }
Placement G(int64_t d, int64_t groups) { return Placement::ShardInGroups(d, groups); }

}  // namespace

TEST_CASE("cost model: an all-reduce costs exactly an all-gather plus a reduce-scatter",
          "[shard][cost_model]") {
  for (const auto& name : DeviceProfile::Names()) {
    const DeviceProfile profile = *DeviceProfile::ByName(name);
    for (int64_t n : {2, 3, 4, 8, 16}) {
      for (double bytes : {0.0, 4.0, 1000.0, 12345.0, 1048576.0, 3.0 * 1073741824.0}) {
        INFO(name << " n=" << n << " bytes=" << bytes);
        const double ar = CollectivePicos(profile, CollectiveKind::kAllReduce, n, bytes);
        const double ag = CollectivePicos(profile, CollectiveKind::kAllGather, n, bytes);
        const double rs = CollectivePicos(profile, CollectiveKind::kReduceScatter, n, bytes);
        CHECK(ar == ag + rs);  // exactly: whole picoseconds
        CHECK(ag == rs);
        CHECK(ar == std::round(ar));
        CHECK(ag == std::round(ag));
      }
    }
  }
}

TEST_CASE("cost model: α–β formula and scaling with N", "[shard][cost_model]") {
  const DeviceProfile h100 = DeviceProfile::H100NvLink();
  const double bytes = 64.0 * 1024 * 1024;
  // One rank: nothing moves.
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                    CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}) {
    CHECK(CollectivePicos(h100, kind, 1, bytes) == 0);
  }
  for (int64_t n : {2, 4, 8}) {
    const double steps = static_cast<double>(n - 1);
    const double frac = steps / static_cast<double>(n);
    const double pass = std::round(
        (steps * h100.latency_s + frac * bytes / h100.link_bandwidth_bytes_per_s) * 1e12);
    CHECK(CollectivePicos(h100, CollectiveKind::kAllGather, n, bytes) == pass);
    CHECK(CollectivePicos(h100, CollectiveKind::kAllReduce, n, bytes) == 2 * pass);
    // All-to-all moves (N−1)/N of the per-rank part (1/N of the tensor).
    const double a2a = std::round((steps * h100.latency_s + frac * bytes / static_cast<double>(n) /
                                                                h100.link_bandwidth_bytes_per_s) *
                                  1e12);
    CHECK(CollectivePicos(h100, CollectiveKind::kAllToAll, n, bytes) == a2a);
  }
  // More ranks: more bytes through each link ((N−1)/N grows) and more latency steps.
  double previous = 0;
  for (int64_t n : {2, 4, 8, 16}) {
    const double t = CollectivePicos(h100, CollectiveKind::kAllReduce, n, bytes);
    CHECK(t > previous);
    previous = t;
  }
  // The bandwidth term approaches 2·bytes/bw for an all-reduce as N grows.
  const double big_n = CollectivePicos(h100, CollectiveKind::kAllReduce, 64, bytes);
  const double limit = 2 * bytes / h100.link_bandwidth_bytes_per_s * 1e12;
  CHECK(big_n > 0.95 * limit);
  // Latency dominates tiny messages: 2(N−1) steps of α.
  CHECK(CollectivePicos(h100, CollectiveKind::kAllReduce, 8, 4.0) ==
        Approx(2 * 7 * h100.latency_s * 1e12).epsilon(1e-3));
  // Costs are linear in bytes beyond latency, and a slower link costs more.
  const DeviceProfile pcie = DeviceProfile::Pcie4();
  CHECK(CollectivePicos(pcie, CollectiveKind::kAllReduce, 4, bytes) >
        CollectivePicos(h100, CollectiveKind::kAllReduce, 4, bytes));
  const double t1 = CollectivePicos(h100, CollectiveKind::kAllGather, 4, bytes);
  const double t2 = CollectivePicos(h100, CollectiveKind::kAllGather, 4, 2 * bytes);
  const double lat = 3 * h100.latency_s * 1e12;
  CHECK(t2 - lat == Approx(2 * (t1 - lat)).margin(2));  // whole picoseconds
}

TEST_CASE("cost model: device profiles by name", "[shard][cost_model]") {
  for (const auto& name : DeviceProfile::Names()) {
    auto p = DeviceProfile::ByName(name);
    REQUIRE(p.has_value());
    CHECK(p->name == name);
    CHECK(p->link_bandwidth_bytes_per_s > 0);
    CHECK(p->latency_s > 0);
    CHECK(p->flops_per_s > 0);
  }
  CHECK_FALSE(DeviceProfile::ByName("tpu").has_value());
}

TEST_CASE("cost model: the collective of each placement transition", "[shard][cost_model]") {
  struct Row {
    Placement from, to;
    std::optional<CollectiveKind> kind;
    bool possible;
  };
  const Row table[] = {
      // Equal placements: nothing.
      {R(), R(), std::nullopt, true},
      {S(1), S(1), std::nullopt, true},
      {P(), P(), std::nullopt, true},
      // S → R: all-gather.  P → R: all-reduce.  P → S: reduce-scatter.  S → S': all-to-all.
      {S(0), R(), CollectiveKind::kAllGather, true},
      {S(2, 3), R(), CollectiveKind::kAllGather, true},
      {P(), R(), CollectiveKind::kAllReduce, true},
      {P(ReduceOp::kMax), R(), CollectiveKind::kAllReduce, true},
      {P(), S(1), CollectiveKind::kReduceScatter, true},
      {S(0), S(1), CollectiveKind::kAllToAll, true},
      {S(1), S(1, 3), CollectiveKind::kAllToAll, true},
      // Local: R → S (take the own slice), R → P (one rank keeps it, or the value itself
      // for max/min/avg), S → P(sum) (zero-pad the local block).
      {R(), S(0), std::nullopt, true},
      {R(), P(), std::nullopt, true},
      {R(), P(ReduceOp::kMax), std::nullopt, true},
      {S(1), P(), std::nullopt, true},
      // Impossible: a partial of one reduction into another, a shard into P(max).
      {P(ReduceOp::kMax), P(), std::nullopt, false},
      {P(), P(ReduceOp::kMax), std::nullopt, false},
      {S(0), P(ReduceOp::kMax), std::nullopt, false},
      // Splits in groups of ranks (S(d@g)): R → S(d@g) and S(d@g) → S(d) are local
      // slices; the rest goes through the whole value (all-gather, or all-reduce of
      // partial sums); a group's equal parts are no partial sum.
      {R(), G(1, 2), std::nullopt, true},
      {G(1, 2), S(1), std::nullopt, true},
      {G(1, 2), R(), CollectiveKind::kAllGather, true},
      {S(1), G(1, 2), CollectiveKind::kAllGather, true},
      {G(1, 2), S(0), CollectiveKind::kAllGather, true},
      {G(1, 2), S(1, 3), CollectiveKind::kAllGather, true},
      {P(), G(1, 2), CollectiveKind::kAllReduce, true},
      {G(1, 2), P(), std::nullopt, false},
  };
  const DeviceProfile h100 = DeviceProfile::H100NvLink();
  const double bytes = 1 << 20;
  for (const Row& row : table) {
    INFO(row.from.ToString() << " -> " << row.to.ToString());
    CHECK(TransitionPossible(row.from, row.to) == row.possible);
    if (!row.possible) continue;
    CHECK(TransitionCollective(row.from, row.to) == row.kind);
    const double picos = TransitionPicos(h100, row.from, row.to, 4, bytes);
    if (row.kind) {
      // Gathering S(d@2) on 4 ranks moves every rank's copy: twice the bytes.
      const bool copies = row.from.has_groups() && *row.kind == CollectiveKind::kAllGather;
      CHECK(picos == CollectivePicos(h100, *row.kind, 4, copies ? 2 * bytes : bytes));
      CHECK(picos > 0);
    } else {
      CHECK(picos == 0);
    }
  }
  // The P → R path costs exactly P → S then S → R (Megatron's SP trade).
  CHECK(TransitionPicos(h100, P(), R(), 4, bytes) ==
        TransitionPicos(h100, P(), S(1), 4, bytes) + TransitionPicos(h100, S(1), R(), 4, bytes));
}
