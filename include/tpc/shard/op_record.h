// One record per operator: everything the shard and partition stages know about it.
//
// The drivers (problem builder, solver, styles, partition) never name an operator: they
// ask the operator's record. Adding an operator is one line in src/shard/rules/registry.cc
// (its rule function, and the hooks it needs), plus one line in the per-rule golden
// (tests/golden/rules.txt). An operator without a record runs replicated and the
// report lists it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tpc/ir/graph.h"
#include "tpc/shard/lowering.h"
#include "tpc/shard/strategy.h"

namespace tpc::shard {

// Modelled work of one op in FLOPs (whole op, before splitting), with symbols sized as
// `ctx` says.
using FlopsFn = double (*)(const RuleContext& ctx);

// How many equal blocks the op's split axis naturally has (Split into k equal parts,
// Concat of k equal parts): the solver then also considers the blocked split S(d/k) of
// the values around it. 0 when none.
using BlockCountFn = int64_t (*)(const ir::Node& node);

// The sizes of the parts the op cuts its split axis into (a Split of a fused Q/K/V into
// 32, 32 and 64 columns): when they differ, the solver also considers the split of the
// values before it in blocks of those relative sizes, S(d/1:1:2). Empty when unknown.
using BlockWeightsFn = std::vector<int64_t> (*)(const ir::Node& node);

// DTensor's colwise / rowwise styles: the dim of the value the op reads at `input` that
// holds the op's output features (colwise) or input features (rowwise); nullopt when the
// op does not tell. `of_output(v)` answers the same question for a value the op
// produces (a Transpose passes the question on).
using FeatureDimFn = std::optional<int64_t> (*)(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>& of_output);

// The axis along which the op joins its inputs whole (Concat), normalized; nullopt
// when it does not (a KV cache is the past concatenated with the new keys). An op whose
// outputs include such joins (GroupQueryAttention's presents: past and new keys on axis
// 2) gives their axis too: each output is paired with the input of its shape. A state
// carried between steps whole (CausalConvWithState's, LinearAttention's: the present has
// the past's shape) gives an axis it is never split along, and is paired the same way.
using JoinAxisFn = std::optional<int64_t> (*)(const ir::Node& node);

// The symbolic dims the op folds a split dim into as blocks: a Reshape
// `[batch, heads, s, d] → [batch·heads, s, d]` gives `batch`.
using FoldedBlocksFn = std::vector<ir::Dim> (*)(const ir::Node& node);

// Part counts the op repeats over the ranks: an Expand `[b, KV, 1, s, d] →
// [b, KV, r, s, d]` (K/V heads repeated for grouped-query attention) gives KV when
// 1 < KV < n and KV divides n, so that each K/V head can live on its group of n/KV
// ranks (`S(1@KV)`).
using GroupCountsFn = std::vector<int64_t> (*)(const ir::Node& node, int64_t n);

struct OpHooks {
  // Inputs holding a size of a split dim (Reshape's shape, Expand's shape, a blocked
  // Split's sizes) get their per-rank value.
  ShapeInputsFn shape_inputs = nullptr;
  // Null: one FLOP per output element.
  FlopsFn flops = nullptr;
  BlockCountFn block_count = nullptr;
  BlockWeightsFn block_weights = nullptr;
  FoldedBlocksFn folded_blocks = nullptr;
  GroupCountsFn group_counts = nullptr;
  FeatureDimFn feature_dim = nullptr;
  JoinAxisFn join_axis = nullptr;
  // Reads only its input's shape (Shape, Size): its result is replicated whatever the
  // input's placement, so nothing downstream of it is a decision.
  bool reads_shape_only = false;
  // Output 0 is input 0's values one by one, of its shape (Cast, Identity): a KV cache's
  // present may reach the graph output through it (GPT-J's exporter casts the key).
  bool passes_values = false;
};

struct OpRecord {
  std::string_view domain;  // "" for ai.onnx
  std::string_view op_type;
  RuleFn rule = nullptr;  // its strategies; null: the op always runs replicated
  OpHooks hooks = {};
};

// The record of an op, or null.
const OpRecord* FindOpRecord(std::string_view domain, std::string_view op_type);
// Every record, sorted by domain then op type.
std::span<const OpRecord> OpRecords();

// FLOPs of `node` under its record (one per output element without a FlopsFn).
double OpFlops(const RuleContext& ctx);

}  // namespace tpc::shard
