#include "tpc/runtime/placement_io.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

// dim `d` of a rank-`rank` tensor, negative counting from the end; -1 when out of range.
int64_t NormalizeDim(int64_t d, int64_t rank) {
  if (d < 0) d += rank;
  return d >= 0 && d < rank ? d : -1;
}

// A shape as [outer, dim, inner] around dim `d`, inner in bytes.
struct Around {
  int64_t outer = 1, dim = 1, inner_bytes = 1;
};

Around AroundDim(const Tensor& t, int64_t d) {
  Around b;
  for (int64_t i = 0; i < d; ++i) b.outer *= t.dim(i);
  b.dim = t.dim(d);
  b.inner_bytes = ir::DTypeSize(t.dtype());
  for (int64_t i = d + 1; i < t.rank(); ++i) b.inner_bytes *= t.dim(i);
  return b;
}

absl::StatusOr<ir::Placement> FromProto(const proto::Placement& p, const std::string& what) {
  switch (p.kind()) {
    case proto::Placement::REPLICATE:
      return ir::Placement::Replicate();
    case proto::Placement::SHARD: {
      if (p.blocks() < 0 || (p.blocks() > 1 && p.groups() != 0)) {
        return absl::InvalidArgumentError(absl::StrCat("plan.json: ", what, ": blocks ", p.blocks(),
                                                       " (0, 1, or more than 1 ",
                                                       "without groups)"));
      }
      if (p.block_weights_size() > 0) {
        const std::vector<int64_t> weights(p.block_weights().begin(), p.block_weights().end());
        const ir::Placement w = ir::Placement::ShardInWeightedBlocks(p.dim(), weights);
        if (p.groups() != 0 || p.blocks() != p.block_weights_size() || w.block_weights != weights ||
            w.BlockUnits() > ir::Placement::kMaxBlockUnits) {
          return absl::InvalidArgumentError(absl::StrCat(
              "plan.json: ", what, ": block_weights [", absl::StrJoin(weights, ", "),
              "] (at least 2, positive, summing to at most 2^31, not all equal, without a ",
              "common factor; blocks their count; never with groups)"));
        }
        return w;
      }
      if (p.groups() == 0) return ir::Placement::Shard(p.dim(), std::max<int64_t>(p.blocks(), 1));
      if (p.groups() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan.json: ", what, ": groups ", p.groups(), " (0, or at least 2)"));
      }
      return ir::Placement::ShardInGroups(p.dim(), p.groups());
    }
    case proto::Placement::PARTIAL: {
      auto op = ir::ReduceOpFromName(p.reduce());
      if (!op) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan.json: ", what, ": reduce '", p.reduce(), "' is not one of sum, max, min, avg"));
      }
      return ir::Placement::Partial(*op);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("plan.json: ", what, ": unknown placement kind ", p.kind()));
  }
}

}  // namespace

absl::StatusOr<IoPlacements> IoPlacementsFromPlan(const proto::Plan& plan) {
  IoPlacements io;
  io.ranks = plan.ranks_size();
  auto read = [&](const google::protobuf::RepeatedPtrField<proto::ValuePlacement>& values,
                  const char* kind, std::map<std::string, ir::Placement>& out) -> absl::Status {
    for (const proto::ValuePlacement& v : values) {
      const std::string what = absl::StrCat(kind, " '", v.value(), "'");
      if (v.placements_size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("plan.json: ", what, " has ",
                                                       v.placements_size(),
                                                       " placements, expected 1 (one mesh axis)"));
      }
      TPC_ASSIGN_OR_RETURN(out[v.value()], FromProto(v.placements(0), what));
    }
    return absl::OkStatus();
  };
  TPC_RETURN_IF_ERROR(read(plan.inputs(), "input", io.inputs));
  TPC_RETURN_IF_ERROR(read(plan.outputs(), "output", io.outputs));
  for (const auto* placements : {&io.inputs, &io.outputs}) {
    for (const auto& [name, p] : *placements) {
      if (p.has_groups() && (p.groups >= io.ranks || io.ranks % p.groups != 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan.json: '", name, "' is placed ", p.ToString(), ": ", p.groups,
                         " groups do not divide the plan's ", io.ranks, " ranks"));
      }
    }
  }
  for (const auto& kv : io.inputs) {
    if (kv.second.kind == ir::Placement::Kind::kPartial) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.json: input '", kv.first,
                       "' is placed P: a full input cannot be given as partial sums"));
    }
  }
  return io;
}

ir::Placement PlacementOf(const std::map<std::string, ir::Placement>& placements,
                          const std::string& name) {
  auto it = placements.find(name);
  return it == placements.end() ? ir::Placement::Replicate() : it->second;
}

ir::TensorType FullType(const ir::TensorType& rank_type, const ir::Placement& p, int ranks) {
  if (p.kind != ir::Placement::Kind::kShard || !rank_type.shape) return rank_type;
  ir::TensorType full = rank_type;
  const int64_t d = NormalizeDim(p.dim, rank_type.rank());
  if (d < 0) return full;
  ir::Dim& dim = (*full.shape)[static_cast<size_t>(d)];
  if (!dim.is_unknown()) dim = dim * ir::Dim(p.Parts(ranks));
  return full;
}

std::vector<IoSpec> FullSpecs(const std::vector<IoSpec>& rank_specs,
                              const std::map<std::string, ir::Placement>& placements, int ranks) {
  std::vector<IoSpec> out;
  for (const IoSpec& s : rank_specs)
    out.push_back({s.name, FullType(s.type, PlacementOf(placements, s.name), ranks)});
  return out;
}

absl::StatusOr<Tensor> SliceForRank(const std::string& name, const Tensor& full,
                                    const ir::Placement& p, int rank, int ranks) {
  if (p.kind != ir::Placement::Kind::kShard || ranks == 1) return full;
  const int64_t d = NormalizeDim(p.dim, full.rank());
  if (d < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': the plan splits dim ", p.dim, " (", p.ToString(),
        ") but the tensor given has ", full.rank(), " dims (", full.TypeString(), ")"));
  }
  const int64_t parts = p.Parts(ranks);
  const int64_t units = p.BlockUnits();
  const std::vector<ir::DimRun> runs = ir::PartRuns(p, full.dim(d), p.PartOf(rank, ranks), parts);
  if (runs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': dim ", d, " is ", full.dim(d), ", not a multiple of ", parts * units,
        ": the plan splits it in ", parts, " parts over ", ranks, " ranks",
        p.blocks > 1 ? absl::StrCat(", in each of ", p.blocks, " blocks") : "", " (", p.ToString(),
        "; given ", full.TypeString(), ")"));
  }
  const Around b = AroundDim(full, d);
  std::vector<int64_t> shape = full.shape();
  shape[static_cast<size_t>(d)] = full.dim(d) / parts;
  Tensor out = Tensor::Allocate(full.dtype(), shape);
  uint8_t* dst = out.raw();
  ir::ForEachPartRun(runs, b.outer, b.dim, [&](int64_t at, int64_t length) {
    const size_t bytes = static_cast<size_t>(length * b.inner_bytes);
    if (bytes > 0) std::memcpy(dst, full.raw() + at * b.inner_bytes, bytes);
    dst += bytes;
  });
  return out;
}

absl::StatusOr<std::map<std::string, Tensor>> InputsForRank(
    const std::map<std::string, Tensor>& full, const IoPlacements& io, int rank) {
  std::map<std::string, Tensor> out;
  for (const auto& kv : full) {
    TPC_ASSIGN_OR_RETURN(
        out[kv.first],
        SliceForRank(kv.first, kv.second, PlacementOf(io.inputs, kv.first), rank, io.ranks));
  }
  return out;
}

absl::StatusOr<Tensor> AssembleOutput(const std::string& name, const Tensor& local,
                                      const ir::Placement& p, Communicator& comm) {
  const int n = comm.size();
  if (n == 1 || p.kind == ir::Placement::Kind::kReplicate) return local;
  if (p.kind == ir::Placement::Kind::kPartial) {
    Tensor out = Tensor::Allocate(local.dtype(), local.shape());
    absl::Status s =
        comm.AllReduce(local.raw(), out.raw(), local.num_elements(), local.dtype(), p.reduce);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("assembling output '", name, "' (", p.ToString(),
                                                 "): ", std::string(s.message())));
    }
    return out;
  }
  const int64_t d = NormalizeDim(p.dim, local.rank());
  if (d < 0) {
    return absl::InternalError(absl::StrCat("output '", name, "' is placed ", p.ToString(),
                                            " but has ", local.rank(), " dims"));
  }
  Tensor gathered = Tensor::Allocate(local.dtype(), {n * local.num_elements()});
  absl::Status s = comm.AllGather(local.raw(), gathered.raw(), local.num_elements(), local.dtype());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("assembling output '", name, "' (", p.ToString(),
                                               "): ", std::string(s.message())));
  }
  // Block k of `gathered` is rank k's part; its runs go to part k's runs of dim d (one
  // per block of it, S(d/b)). In groups (S(d@g)) part k is held by ranks k·n/g, ...,
  // (k+1)·n/g - 1: the first one's.
  const int64_t parts = p.Parts(n);
  std::vector<int64_t> shape = local.shape();
  shape[static_cast<size_t>(d)] *= parts;
  if (ir::PartRuns(p, shape[static_cast<size_t>(d)], 0, parts).empty()) {
    return absl::InternalError(absl::StrCat("output '", name, "' is placed ", p.ToString(),
                                            " but its dim ", d, " is ", local.dim(d)));
  }
  Tensor out = Tensor::Allocate(local.dtype(), shape);
  const Around b = AroundDim(out, d);
  for (int64_t k = 0; k < parts; ++k) {
    const uint8_t* src =
        gathered.raw() + static_cast<size_t>(k * (n / parts)) * static_cast<size_t>(local.nbytes());
    ir::ForEachPartRun(ir::PartRuns(p, b.dim, k, parts), b.outer, b.dim,
                       [&](int64_t at, int64_t length) {
                         const size_t bytes = static_cast<size_t>(length * b.inner_bytes);
                         if (bytes > 0) std::memcpy(out.raw() + at * b.inner_bytes, src, bytes);
                         src += bytes;
                       });
  }
  return out;
}

}  // namespace tpc::runtime
