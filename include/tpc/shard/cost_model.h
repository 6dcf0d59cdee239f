// The α–β cost model of ring collectives, with device profiles.
//
// A ring all-reduce over N ranks moves 2(N−1)/N of the bytes through every link in
// 2(N−1) steps; all-gather and reduce-scatter move (N−1)/N in N−1 steps; all-to-all
// moves (N−1)/N of the per-rank part. Each step pays the latency α; each byte on a
// link pays 1/bandwidth. An all-reduce costs exactly a reduce-scatter plus an
// all-gather (it is one); the solver prefers fewer collectives only on ties. Times are
// whole picoseconds, so equal plans have equal sums whatever the order of addition.
// Compute runs at the profile's dense rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpc/ir/sharding.h"

namespace tpc::shard {

struct DeviceProfile {
  std::string name;
  double link_bandwidth_bytes_per_s = 0;  // per direction, per link of the ring
  double latency_s = 0;                   // per ring step
  double flops_per_s = 0;                 // dense fp32/bf16 compute the model assumes

  static DeviceProfile H100NvLink();
  static DeviceProfile A100NvLink();
  static DeviceProfile Pcie4();
  // By name: h100-nvlink, a100-nvlink, pcie4.
  static std::optional<DeviceProfile> ByName(const std::string& name);
  static std::vector<std::string> Names();
};

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
const char* CollectiveName(CollectiveKind kind);

// Modelled picoseconds of one collective over `n` ranks; `bytes` is the size of the
// whole (unsharded) tensor.
double CollectivePicos(const DeviceProfile& profile, CollectiveKind kind, int64_t n, double bytes);

// Whether `to` is each rank's part of its group's part `from`: S(d@g) → S(d), a local
// slice.
bool GroupSlice(const ir::Placement& from, const ir::Placement& to);

// The collective that turns placement `from` into `to` (nullopt when the transition
// is local: equal placements, R → S, R → P, S → P, S(d@g) → S(d)).
std::optional<CollectiveKind> TransitionCollective(const ir::Placement& from,
                                                   const ir::Placement& to);
// Whether a transition is possible at all (P(max) → P(sum) is not, for example).
bool TransitionPossible(const ir::Placement& from, const ir::Placement& to);

// Modelled picoseconds of the transition for a tensor of `bytes` (whole-tensor size).
double TransitionPicos(const DeviceProfile& profile, const ir::Placement& from,
                       const ir::Placement& to, int64_t n, double bytes);

}  // namespace tpc::shard
