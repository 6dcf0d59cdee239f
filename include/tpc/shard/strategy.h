// Sharding rules: for each operator, the ways it can run on the tensor-parallel axis.
//
// A strategy names the placement every input must arrive in and the placement of every
// output. Rules are mostly written as einsum-like factor specs (factor_spec.h); ops
// that are linear in an operand also run on partial values (P(sum) in, P(sum) out);
// a few strategies are the rule's own (the vocab-parallel loss).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpc/ir/graph.h"
#include "tpc/shard/cost_model.h"
#include "tpc/shard/lowering.h"
#include "tpc/shard/options.h"

namespace tpc::shard {

// A collective a strategy runs inside the op itself (the vocab-parallel softmax and
// loss: all-reduces of per-row max, sum of exponentials and target logit).
struct InternalCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  ir::ReduceOp reduce = ir::ReduceOp::kSum;
  double bytes = 0;  // whole-tensor size
};

struct Strategy {
  // For --explain and the report: "replicate", "shard dim 2", "column", "vocab-parallel".
  std::string name;
  // Required placement of each input; nullopt: the op only reads the input's shape
  // (Shape, Size) or the input is absent, so any placement will do.
  std::vector<std::optional<ir::Placement>> inputs;
  std::vector<ir::Placement> outputs;
  // Share of the op's work one rank does (1/N when split, 1 when replicated).
  double compute_fraction = 1.0;
  std::vector<InternalCollective> internal;
  // How the op runs under this strategy when its local form is not enough (the
  // vocab-parallel lookup, softmax and loss); null: the op itself, on its local shards.
  LoweringFn lowering = nullptr;
};

// Known integer values of `v`: a constant's data or an evaluated shape computation whose
// elements are all static; nullopt otherwise (or for null).
std::optional<std::vector<int64_t>> KnownInts(const ir::Value* v);

// What a rule sees: the node, the mesh, and the sizes the cost model assumes.
class RuleContext {
 public:
  RuleContext(const ir::Node& node, const ShardOptions& options) : node_(node), options_(options) {}

  const ir::Node& node() const { return node_; }
  const ShardOptions& options() const { return options_; }
  int64_t n() const { return options_.mesh.tp(); }

  int num_inputs() const { return node_.num_inputs(); }
  bool has_input(int i) const { return node_.optional_input(i) != nullptr; }
  const ir::TensorType& input_type(int i) const { return node_.input(i)->type(); }
  int64_t input_rank(int i) const { return node_.input(i)->type().rank(); }
  const std::vector<ir::Dim>& input_dims(int i) const { return *node_.input(i)->type().shape; }
  const std::vector<ir::Dim>& output_dims(int o) const { return *node_.output(o)->type().shape; }
  // Known integer values of input i (constant or evaluated shape computation).
  std::optional<std::vector<int64_t>> input_ints(int i) const;

  // Whether `d` splits into N equal parts (static and divisible, or symbolic in a
  // symbol the user declared divisible).
  bool Divisible(const ir::Dim& d) const;
  // Whether `d` splits into `blocks` equal blocks each split N ways (static dims only).
  bool DivisibleInBlocks(const ir::Dim& d, int64_t blocks) const;
  // Whether `d` splits into `blocks` (a symbolic dim: `batch`) equal blocks, each of a
  // static size split N ways (`4*batch` in `batch` blocks, N dividing 4).
  bool DivisibleInBlocks(const ir::Dim& d, const ir::Dim& blocks) const;
  // Whether `d` splits into `groups` equal parts (S(d@g)): static and divisible, or
  // divisible by N (which g divides).
  bool DivisibleInGroups(const ir::Dim& d, int64_t groups) const;
  // The blocked splits of dim `dim` (of size `d`) worth trying: S(dim/k) for the
  // options' equal block counts and S(dim/1:1:2) for their unequal blocks, those `d`
  // splits into.
  std::vector<ir::Placement> BlockedSplits(int64_t dim, const ir::Dim& d) const;
  // Whether `d` splits N ways or into one of the options' group counts.
  bool Splittable(const ir::Dim& d) const;
  // Modelled size of `d` (symbols take their --dim size).
  double Size(const ir::Dim& d) const;
  double Bytes(const ir::Value& v) const;

  // The rule's text form: when a sink is set, the strategy helpers append what they
  // add (a factor spec, `partial(0)`, a named strategy), for the per-rule golden test
  // and --explain.
  void set_text_sink(std::vector<std::string>* sink) { sink_ = sink; }
  // Whether anyone reads the text: the helpers build it only then (the solver calls
  // every rule many times and never reads it).
  bool noting() const { return sink_ != nullptr; }
  void Note(std::string text) const {
    if (sink_ != nullptr) sink_->push_back(std::move(text));
  }

 private:
  const ir::Node& node_;
  const ShardOptions& options_;
  std::vector<std::string>* sink_ = nullptr;
};

// All inputs in `partial_inputs` P(sum), the others R, every output P(sum): for ops
// linear in those inputs (Add of partials, Mul by a replicated value, reshapes).
void AddPartialStrategy(const RuleContext& ctx, const std::vector<int>& partial_inputs,
                        std::vector<Strategy>* out);
// A strategy of the rule's own (the vocab-parallel ones, blocked splits), noted by name.
void AddNamedStrategy(const RuleContext& ctx, Strategy s, std::vector<Strategy>* out);
// Every input and output R.
Strategy ReplicateStrategy(const ir::Node& node);

using RuleFn = void (*)(const RuleContext&, std::vector<Strategy>*);

// All strategies of a node: its rule's (deduplicated, each checked against the types),
// always including replicate first. `has_rule` tells whether a rule was found.
std::vector<Strategy> StrategiesFor(const ir::Node& node, const ShardOptions& options,
                                    bool* has_rule);

}  // namespace tpc::shard
