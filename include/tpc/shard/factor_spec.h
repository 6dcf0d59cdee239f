// Factor specs: how the dims of an op's operands correspond, einsum-style.
//
// Every dim of every operand carries a factor (or none, e.g. a broadcast 1). Sharding
// a factor shards every dim that carries it: MatMul is `([i, j], [j, k])->([i, k])
// reduce_sum={j}`, so splitting i splits A's rows and the result's rows, and splitting
// j splits A's columns and B's rows and leaves partial sums. A factor the op needs
// whole (softmax's axis, a norm's hidden dim) is never sharded.
//
// Rules build their spec with FactorSpecBuilder, one declarative call per factor or
// per family (pointwise, along an input's dims), as Shardy's OpShardingRuleBuilder
// does. The text form above is what tests/golden/rules.txt holds, one line per op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpc/ir/dim.h"
#include "tpc/shard/strategy.h"

namespace tpc::shard {

struct FactorSpec {
  enum class Kind {
    kPass,       // appears in the result: sharding it shards the result there
    kReduceSum,  // reduced over (MatMul's k, ReduceSum's axes): result P(sum)
    kReduceMax,  // ReduceMax: P(max)
    kReduceMin,  // ReduceMin: P(min)
    kReduceAvg,  // ReduceMean: P(avg)
    kNeedWhole,  // the op needs the dim whole (softmax axis, norm dims, concat axis)
  };
  struct Factor {
    Kind kind = Kind::kPass;
    ir::Dim size;
    std::string name;  // "m", "k (row)", "d2": for --explain
  };
  std::vector<Factor> factors;
  // Factor index of each dim of each input (-1: the dim carries no factor, e.g. a
  // broadcast 1); an input with no entry (shorter vector) must be R.
  std::vector<std::vector<int>> inputs;
  std::vector<std::vector<int>> outputs;

  int AddFactor(Kind kind, ir::Dim size, std::string name);

  // `([i, j], [j, k])->([i, k]) reduce_sum={j} need_whole={..}`: factors lettered in
  // order, `_` for a dim with no factor (`[]`: the operand must be replicated).
  std::string ToString() const;
};

// How an operand's dim `in` meets the result dim `out` it broadcasts to (numpy style):
// kCarries when they are equal (an unknown never is), or when `in` is static and not 1
// (then they are equal at run time); kBroadcast for a static 1; kUnsure otherwise (an
// unknown or another symbol: 1 or `out` at run time, no telling which), where the factor
// must stay whole, since
// splitting it would split the operand if it is `out` long and not if it is 1 (swin's
// window attention adds a [?, 4, 16, 16] score to a [4, 16, 16] bias: split as a
// broadcast, each rank added its heads' bias to all 4 heads).
enum class BroadcastFit { kCarries, kBroadcast, kUnsure };
BroadcastFit FitOf(const ir::Dim& in, const ir::Dim& out);

// Builds a FactorSpec for the node of `ctx`.
class FactorSpecBuilder {
 public:
  using Kind = FactorSpec::Kind;
  static constexpr int64_t kNone = -1;

  explicit FactorSpecBuilder(const RuleContext& ctx);

  // One factor: dim input_dims[i] of input i and output_dims[o] of output o carry it
  // (kNone, or a missing trailing entry: the operand does not; an entry for an optional
  // operand the node lacks is ignored). Its size is that of the first dim that carries
  // it. Returns the factor's index.
  int Add(Kind kind, const std::vector<int64_t>& input_dims,
          const std::vector<int64_t>& output_dims, std::string name = "");

  // Elementwise: a pass factor per dim of output 0; each of `inputs` carries it where
  // its dim (aligned numpy-style from the right) carries the output's (FitOf), and every
  // output of the same rank carries it where its dim has the same size. A dim some input may or may
  // not broadcast along (kUnsure) is needed whole.
  FactorSpecBuilder& Pointwise(const std::vector<int>& inputs);

  // Along the dims of input `inputs[0]`: dim d gets a factor of kind `kinds[d]`, carried
  // by the same dim of every input in `inputs` (the others must be replicated) and by
  // every output whose dim at that position has the same size. `drop`: the outputs
  // lose the dims that are not kPass (a reduction without keepdims), so the later
  // dims move up.
  FactorSpecBuilder& Along(const std::vector<int>& inputs, const std::vector<Kind>& kinds,
                           bool drop = false);

  // The spec (moved out: the builder is spent).
  FactorSpec Build() { return std::move(spec_); }
  const FactorSpec& spec() const { return spec_; }

 private:
  const RuleContext& ctx_;
  FactorSpec spec_;
};

// Strategies of a factor spec: one per factor that can be sharded (and one per block
// count for the pass factors whose size splits in blocks). Notes the spec's text.
void AddFactorStrategies(const RuleContext& ctx, const FactorSpec& spec,
                         std::vector<Strategy>* out);

}  // namespace tpc::shard
