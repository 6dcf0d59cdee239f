#include "tpc/partition/partition.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "rewriter.h"
#include "tpc/shard/op_record.h"
#include "tpc/util/status_macros.h"

namespace tpc::partition {

using internal::Rewriter;
using ir::Placement;
using PKind = ir::Placement::Kind;

ir::TensorType LocalType(const ir::TensorType& global, const Placement& p, int64_t n) {
  if (p.kind != PKind::kShard || !global.shape) return global;
  ir::TensorType t = global;
  ir::Dim& d = (*t.shape)[static_cast<size_t>(p.dim)];
  d = d.DivideBy(p.Parts(n));
  return t;
}

namespace {

class Partitioner {
 public:
  Partitioner(ir::Graph& graph, const shard::ShardResult& result,
              const shard::ShardOptions& options, const CollectiveFactory& factory)
      : graph_(graph), result_(result), options_(options), rw_(graph, options.mesh.tp(), factory) {}

  absl::StatusOr<PartitionStats> Run() {
    const std::vector<ir::Node*> nodes = graph_.NodeVector();
    // Remember every value's global type and placement before anything changes.
    for (ir::Node* n : nodes) {
      for (ir::Value* v : n->outputs()) {
        global_[v] = v->type();
        placement_[v] = v->sharding() ? v->sharding()->placements[0] : Placement::Replicate();
      }
    }
    for (const auto& [v, p] : result_.materialized) materialized_[v] = p;
    for (ir::Node* n : nodes) {
      switch (n->kind()) {
        case ir::NodeKind::kPlaceholder:
        case ir::NodeKind::kConstant:
          Localize(n->output(0));
          break;
        case ir::NodeKind::kCall:
          TPC_RETURN_IF_ERROR(HandleCall(n));
          break;
        case ir::NodeKind::kOutput:
          TPC_RETURN_IF_ERROR(HandleOutputs(n));
          break;
      }
    }
    RemoveDeadCode();
    return rw_.stats();
  }

 private:
  int64_t n() const { return options_.mesh.tp(); }

  void Localize(ir::Value* v) {
    v->set_type(LocalType(global_.at(v), placement_.at(v), n()));
    v->set_sharding(ir::Sharding{{placement_.at(v)}});
  }

  absl::Status HandleCall(ir::Node* node) {
    const shard::OpRecord* record = shard::FindOpRecord(node->domain(), node->op_type());
    const shard::ShapeInputsFn shape_inputs =
        record != nullptr ? record->hooks.shape_inputs : nullptr;
    auto it = result_.strategies.find(node);
    if (it == result_.strategies.end()) {
      // Computed from replicated values only, or the shape of a value: runs as it is
      // (Shape and Size of a split value are scaled to the whole shape).
      for (ir::Value* v : node->outputs()) Localize(v);
      return shape_inputs != nullptr ? shape_inputs(rw_, node, {}, {}) : absl::OkStatus();
    }
    const shard::Strategy& s = it->second;
    for (int i = 0; i < node->num_inputs(); ++i) {
      ir::Value* in = node->input(i);
      const auto& want = s.inputs[static_cast<size_t>(i)];
      if (in == nullptr || !want) continue;
      TPC_ASSIGN_OR_RETURN(ir::Value * converted, Convert(in, *want, node));
      node->SetInput(i, converted);
    }
    for (ir::Value* v : node->outputs()) Localize(v);
    if (s.lowering == nullptr) {
      return shape_inputs != nullptr ? shape_inputs(rw_, node, s.outputs, s.inputs)
                                     : absl::OkStatus();
    }
    absl::StatusOr<internal::Replacements> replaced = s.lowering(rw_, node);
    if (!replaced.ok()) return replaced.status();
    ++rw_.stats().lowered_ops;
    // The new values stand for the old ones: later consumers convert them the same way.
    // (The old values are gone; their entries are moved before anything can reuse
    // their addresses.)
    for (const auto& [old_value, new_value] : *replaced) {
      // Copies first: inserting may rehash the maps and move the old entries.
      const ir::TensorType global = global_.at(old_value);
      const Placement placement = placement_.at(old_value);
      global_[new_value] = global;
      placement_[new_value] = placement;
      global_.erase(old_value);
      placement_.erase(old_value);
      if (auto m = materialized_.find(old_value); m != materialized_.end()) {
        const Placement materialized = m->second;
        materialized_[new_value] = materialized;
        materialized_.erase(old_value);
      }
    }
    return absl::OkStatus();
  }

  absl::Status HandleOutputs(ir::Node* node) {
    for (int i = 0; i < node->num_inputs(); ++i) {
      ir::Value* v = node->input(i);
      Placement want = Placement::Replicate();
      if (auto it = result_.output_placements.find(v->name());
          it != result_.output_placements.end()) {
        want = it->second;
      } else if (auto o = options_.output_placements.find(v->name());
                 o != options_.output_placements.end()) {
        want = o->second;
      }
      TPC_ASSIGN_OR_RETURN(ir::Value * converted, Convert(v, want, node));
      if (converted != v) {
        // Keep the graph output's name on the converted value.
        const std::string name = v->name();
        graph_.RenameValue(v, graph_.UniqueName(name + "/local"));
        graph_.RenameValue(converted, name);
      }
      node->SetInput(i, converted);
    }
    return absl::OkStatus();
  }

  // `v` (an original value, in its produced placement) in placement `want`.
  absl::StatusOr<ir::Value*> Convert(ir::Value* v, const Placement& want, ir::Node* before) {
    auto pit = placement_.find(v);
    if (pit == placement_.end()) return v;  // created by the rewrite: already right
    const Placement have = pit->second;
    if (have == want) return v;
    const std::string key = absl::StrCat(v->name(), "|", want.ToString());
    auto cached = cache_.find(key);
    if (cached != cache_.end()) return cached->second;
    // A value with several consumers is converted once to its materialized form; the
    // consumers take theirs from there when that is local.
    ir::Value* from = v;
    Placement from_p = have;
    auto m = materialized_.find(v);
    if (m != materialized_.end() && !(m->second == want)) {
      const bool local_from_m = !shard::TransitionCollective(m->second, want);
      if (local_from_m) {
        TPC_ASSIGN_OR_RETURN(from, Convert(v, m->second, before));
        from_p = m->second;
      }
    }
    TPC_ASSIGN_OR_RETURN(ir::Value * out, Transition(v, from, from_p, want, before));
    cache_[key] = out;
    return out;
  }

  // One transition of DESIGN §6, from `x` (placed `from`) to `to`.
  absl::StatusOr<ir::Value*> Transition(ir::Value* original, ir::Value* x, const Placement& from,
                                        const Placement& to, ir::Node* before) {
    const ir::TensorType& global = global_.at(original);
    const CollectiveFactory& f = rw_.factory();
    ir::Value* out = nullptr;
    if (from.has_groups() || to.has_groups()) return GroupTransition(original, x, from, to, before);
    if (from.has_weighted_blocks() || to.has_weighted_blocks()) {
      // No collective or local slice knows unequal blocks (the shard stage's
      // TransitionPossible allows none).
      return absl::InternalError(absl::StrCat("partition: no transition from ", from.ToString(),
                                              " to ", to.ToString(), " for ", original->name(),
                                              " (unequal blocks)"));
    }
    const bool collective = shard::TransitionCollective(from, to).has_value();
    if (from.kind == PKind::kShard && to.kind == PKind::kReplicate) {
      out = f.all_gather(graph_, before, x, from.dim, from.blocks, n());
    } else if (from.kind == PKind::kPartial && to.kind == PKind::kReplicate) {
      out = f.all_reduce(graph_, before, x, from.reduce);
    } else if (from.kind == PKind::kPartial && to.kind == PKind::kShard) {
      out = f.reduce_scatter(graph_, before, x, to.dim, to.blocks, from.reduce);
    } else if (from.kind == PKind::kShard && to.kind == PKind::kShard) {
      if (from.blocks == 1 && to.blocks == 1 && from.dim != to.dim) {
        out = f.all_to_all(graph_, before, x, to.dim, from.dim);
      } else {
        // Different block layouts: gather, then take this rank's part.
        TPC_ASSIGN_OR_RETURN(ir::Value * whole,
                             Transition(original, x, from, Placement::Replicate(), before));
        return Transition(original, whole, Placement::Replicate(), to, before);
      }
    } else if (from.kind == PKind::kReplicate && to.kind == PKind::kShard) {
      out = f.shard(graph_, before, x, to.dim, to.blocks, n(), 1);
      ++rw_.stats().local_shards;
    } else if (from.kind == PKind::kReplicate && to.kind == PKind::kPartial) {
      if (to.reduce != ir::ReduceOp::kSum) return x;  // max/min/avg of equal terms
      return KeepOnRankZero(original, x, before);
    } else if (from.kind == PKind::kShard && to.kind == PKind::kPartial &&
               to.reduce == ir::ReduceOp::kSum) {
      return ZeroPad(original, x, from, before);
    } else {
      return absl::InternalError(absl::StrCat("partition: no transition from ", from.ToString(),
                                              " to ", to.ToString(), " for ", original->name()));
    }
    if (collective) ++rw_.stats().collectives;
    rw_.UseTpcDomain();
    out->set_type(LocalType(global, to, n()));
    out->set_sharding(ir::Sharding{{to}});
    return out;
  }

  // Transitions from or to a split in groups, S(d@g): the two local slices (R → S(d@g)
  // and S(d@g) → S(d)) and the gather of the g parts (S(d@g) → R, an AllGather keeping
  // one copy of each part: dim d need not split N ways); anything else through R.
  absl::StatusOr<ir::Value*> GroupTransition(ir::Value* original, ir::Value* x,
                                             const Placement& from, const Placement& to,
                                             ir::Node* before) {
    const CollectiveFactory& f = rw_.factory();
    ir::Value* out = nullptr;
    if (shard::GroupSlice(from, to)) {
      out = f.shard(graph_, before, x, to.dim, 1, n() / from.groups, 1);
      ++rw_.stats().local_shards;
    } else if (from.kind == PKind::kReplicate && to.has_groups()) {
      out = f.shard(graph_, before, x, to.dim, 1, to.groups, n() / to.groups);
      ++rw_.stats().local_shards;
    } else if (from.has_groups() && to.kind == PKind::kReplicate) {
      out = f.all_gather(graph_, before, x, from.dim, 1, from.groups);
      ++rw_.stats().collectives;
    } else {
      TPC_ASSIGN_OR_RETURN(ir::Value * whole,
                           Transition(original, x, from, Placement::Replicate(), before));
      return Transition(original, whole, Placement::Replicate(), to, before);
    }
    rw_.UseTpcDomain();
    out->set_type(LocalType(global_.at(original), to, n()));
    out->set_sharding(ir::Sharding{{to}});
    return out;
  }

  // R → P(sum): rank 0 keeps the value, the others hold zeros (x · [1, 0, ..., 0][r]).
  ir::Value* KeepOnRankZero(ir::Value* original, ir::Value* x, ir::Node* before) {
    const ir::TensorType& t = global_.at(original);
    const int64_t rank = t.rank();
    std::vector<int64_t> shape(static_cast<size_t>(std::max<int64_t>(rank, 1)), 1);
    shape[0] = n();
    std::vector<double> mask(static_cast<size_t>(n()), 0.0);
    mask[0] = 1.0;
    ir::Value* m = rw_.PerRank("tp/rank0_mask", ir::Tensor::FromDoubles(t.dtype, shape, mask));
    const Placement partial = Placement::Partial(ir::ReduceOp::kSum);
    ir::TensorType out_type = rank == 0 ? ir::TensorType(t.dtype, {ir::Dim(1)}) : t;
    ir::Value* y = rw_.Op(before, "Mul", {x, m}, out_type, partial);
    if (rank == 0)
      y = rw_.Op(before, "Reshape", {y, rw_.Int64s("tp/scalar_shape", {})}, t, partial);
    return y;
  }

  // S(d) → P(sum): each rank pads its block with zeros to the whole size, r blocks before
  // it and n - 1 - r after. A split dim known only at run time multiplies the block's
  // size (Shape) by those counts. A blocked split S(d/b) is never zero-padded (the shard
  // stage's TransitionPossible).
  absl::StatusOr<ir::Value*> ZeroPad(ir::Value* original, ir::Value* x, const Placement& from,
                                     ir::Node* before) {
    const ir::TensorType& t = global_.at(original);
    if (from.blocks != 1) {
      return absl::InternalError(absl::StrCat("partition: zero-padding ", original->name(),
                                              ", split in blocks (", from.ToString(), ")"));
    }
    const ir::Dim& size = (*t.shape)[static_cast<size_t>(from.dim)];
    const int64_t rank = t.rank();
    const int64_t part = size.is_static() ? size.value() / n() : 1;
    std::vector<int64_t> pads;
    for (int64_t r = 0; r < n(); ++r) {
      for (int64_t side = 0; side < 2; ++side) {
        for (int64_t d = 0; d < rank; ++d) {
          int64_t p = 0;
          if (d == from.dim) p = side == 0 ? r * part : (n() - 1 - r) * part;
          pads.push_back(p);
        }
      }
    }
    ir::Value* per_rank = rw_.PerRank("tp/pads", ir::Tensor::FromInt64({n() * 2 * rank}, pads));
    if (!size.is_static()) {
      const Placement r = Placement::Replicate();
      ir::Value* shape =
          rw_.Op(before, "Shape", {x}, ir::TensorType(ir::DType::kI64, {ir::Dim(rank)}), r);
      ir::Value* block = rw_.Op(
          before, "Slice",
          {shape, rw_.Int64s("tp/dim_start", {from.dim}), rw_.Int64s("tp/dim_end", {from.dim + 1})},
          ir::TensorType(ir::DType::kI64, {ir::Dim(1)}), r);
      per_rank = rw_.Op(before, "Mul", {block, per_rank},
                        ir::TensorType(ir::DType::kI64, {ir::Dim(2 * rank)}), r);
    }
    return rw_.Op(before, "Pad", {x, per_rank}, t, Placement::Partial(ir::ReduceOp::kSum),
                  {{"mode", std::string("constant")}});
  }

  // Conversions nobody used, and ops whose results the lowering replaced.
  void RemoveDeadCode() {
    bool changed = true;
    while (changed) {
      changed = false;
      std::vector<ir::Node*> nodes = graph_.NodeVector();
      for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
        ir::Node* n = *it;
        if (n->kind() != ir::NodeKind::kCall && n->kind() != ir::NodeKind::kConstant) continue;
        bool used = false;
        for (ir::Value* v : n->outputs()) used = used || v->has_uses();
        if (used) continue;
        graph_.Erase(n);
        ++rw_.stats().removed_nodes;
        changed = true;
      }
    }
  }

  ir::Graph& graph_;
  const shard::ShardResult& result_;
  const shard::ShardOptions& options_;
  Rewriter rw_;
  absl::flat_hash_map<const ir::Value*, ir::TensorType> global_;
  absl::flat_hash_map<const ir::Value*, Placement> placement_;
  absl::flat_hash_map<const ir::Value*, Placement> materialized_;
  std::map<std::string, ir::Value*> cache_;
};

}  // namespace

absl::StatusOr<PartitionStats> PartitionGraph(ir::Graph& graph, const shard::ShardResult& result,
                                              const shard::ShardOptions& options,
                                              const CollectiveFactory* factory) {
  const CollectiveFactory defaults = TpcCollectives(options.mesh.tp());
  Partitioner p(graph, result, options, factory != nullptr ? *factory : defaults);
  return p.Run();
}

}  // namespace tpc::partition
