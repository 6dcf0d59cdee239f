// Sharding rules of the operator families; registry.cc maps op types to them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tpc/shard/factor_spec.h"
#include "tpc/shard/lowering.h"
#include "tpc/shard/shard_pass.h"

#include "tpc/shard/strategy.h"

namespace tpc::shard::rules {

// A factor absent from an operand (FactorSpecBuilder's dims).
inline constexpr int64_t kNone = FactorSpecBuilder::kNone;

// Factor spec helpers shared by the families.
// A group of a reshape: dims [in_begin, in_end) of the input hold the same elements as
// dims [out_begin, out_end) of the output (`[B, H, S] → [B·H, S]`: {0, 2, 0, 1} and
// {2, 3, 1, 2}). Dims of size 1 belong to no group.
struct ReshapeGroup {
  size_t in_begin, in_end, out_begin, out_end;
};
// The groups, nullopt when the sizes do not factor into groups.
std::optional<std::vector<ReshapeGroup>> ReshapeGroups(const std::vector<ir::Dim>& in,
                                                       const std::vector<ir::Dim>& out);
// Maps the dims of `in` onto `out` through the factorisation of sizes (reshape):
// in_factors/out_factors get a shared factor for each group whose major dims both
// split N ways. False when the sizes do not factor into groups.
bool ReshapeFactors(const RuleContext& ctx, const std::vector<ir::Dim>& in,
                    const std::vector<ir::Dim>& out, FactorSpec* spec, std::vector<int>* in_factors,
                    std::vector<int>* out_factors);
// Normalises a possibly negative axis; -1 when out of range.
int64_t NormalizeAxis(int64_t axis, int64_t rank);
// Whether `constraints` (styles, sharding groups) name any of `nodes` or any value they
// read or make: the rewrites before solving leave such nodes alone.
bool Constrains(const Constraints& constraints, const std::vector<const ir::Node*>& nodes);
// Whether every output has a known rank (rules that index output dims need it).
bool OutputsTyped(const RuleContext& ctx);
// Elements of every output (the default FLOP count).
double OutputElements(const RuleContext& ctx);
// A strategy named `name` with every given input replicated and the absent ones unset
// (outputs to be set): the start of the fused operators' hand-written strategies.
Strategy ReplicatedInputs(const RuleContext& ctx, std::string name);

// elementwise.cc
void Unary(const RuleContext& ctx, std::vector<Strategy>* out);
void UnaryLinear(const RuleContext& ctx, std::vector<Strategy>* out);
void Binary(const RuleContext& ctx, std::vector<Strategy>* out);
void AddSub(const RuleContext& ctx, std::vector<Strategy>* out);
void Mul(const RuleContext& ctx, std::vector<Strategy>* out);
void Div(const RuleContext& ctx, std::vector<Strategy>* out);
void Where(const RuleContext& ctx, std::vector<Strategy>* out);
void Cast(const RuleContext& ctx, std::vector<Strategy>* out);
void CastLike(const RuleContext& ctx, std::vector<Strategy>* out);
void GatedAdd(const RuleContext& ctx, std::vector<Strategy>* out);

// linear_attention.cc
void LinearAttention(const RuleContext& ctx, std::vector<Strategy>* out);
double LinearAttentionFlops(const RuleContext& ctx);
std::optional<int64_t> LinearAttentionStateAxis(const ir::Node& node);
std::vector<int64_t> LinearAttentionGroupCounts(const ir::Node& node, int64_t n);
void LinearAttentionGate(const RuleContext& ctx, std::vector<Strategy>* out);
void GatedRMSNorm(const RuleContext& ctx, std::vector<Strategy>* out);

// moe.cc
void MoE(const RuleContext& ctx, std::vector<Strategy>* out);
void QMoE(const RuleContext& ctx, std::vector<Strategy>* out);
double MoEFlops(const RuleContext& ctx);

// linear.cc
void MatMul(const RuleContext& ctx, std::vector<Strategy>* out);
void Gemm(const RuleContext& ctx, std::vector<Strategy>* out);
double MatMulFlops(const RuleContext& ctx);
void MatMulNBits(const RuleContext& ctx, std::vector<Strategy>* out);
void GroupQueryAttention(const RuleContext& ctx, std::vector<Strategy>* out);
void MsRotaryEmbedding(const RuleContext& ctx, std::vector<Strategy>* out);
void MRotaryEmbedding(const RuleContext& ctx, std::vector<Strategy>* out);
double GroupQueryAttentionFlops(const RuleContext& ctx);
std::optional<int64_t> GroupQueryAttentionJoinAxis(const ir::Node& node);
std::vector<int64_t> GroupQueryAttentionGroupCounts(const ir::Node& node, int64_t n);
void MultiHeadAttention(const RuleContext& ctx, std::vector<Strategy>* out);
void MsAttention(const RuleContext& ctx, std::vector<Strategy>* out);
double MsAttentionFlops(const RuleContext& ctx);
std::optional<int64_t> MsAttentionJoinAxis(const ir::Node& node);
int64_t QkvBlocks(const ir::Node& node);
double MultiHeadAttentionFlops(const RuleContext& ctx);
std::optional<int64_t> MatMulNBitsFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>& of_output);
double GemmFlops(const RuleContext& ctx);
std::optional<int64_t> MatMulFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&);
std::optional<int64_t> GemmFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&);
// A rank-1 addend split colwise is a column-parallel bias.
std::optional<int64_t> BiasFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&);

// embedding.cc
void Gather(const RuleContext& ctx, std::vector<Strategy>* out);
std::optional<int64_t> GatherFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&);

// cross_entropy.cc
void SoftmaxCrossEntropyLoss(const RuleContext& ctx, std::vector<Strategy>* out);
void NegativeLogLikelihoodLoss(const RuleContext& ctx, std::vector<Strategy>* out);

// reduce.cc
void Reduce(const RuleContext& ctx, std::vector<Strategy>* out);
void ArgReduce(const RuleContext& ctx, std::vector<Strategy>* out);

// normalization.cc
void Softmax(const RuleContext& ctx, std::vector<Strategy>* out);
void LayerNormalization(const RuleContext& ctx, std::vector<Strategy>* out);
void SkipLayerNormalization(const RuleContext& ctx, std::vector<Strategy>* out);
void AxisWhole(const RuleContext& ctx, std::vector<Strategy>* out);  // TopK, CumSum

// conv.cc
void Conv(const RuleContext& ctx, std::vector<Strategy>* out);
void ConvTranspose(const RuleContext& ctx, std::vector<Strategy>* out);
double ConvFlops(const RuleContext& ctx);
double ConvTransposeFlops(const RuleContext& ctx);
std::optional<int64_t> ConvFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>&);
void Pool(const RuleContext& ctx, std::vector<Strategy>* out);  // MaxPool, AveragePool, LpPool
void GlobalPool(const RuleContext& ctx, std::vector<Strategy>* out);  // GlobalAveragePool, ...
void CausalConvWithState(const RuleContext& ctx, std::vector<Strategy>* out);
std::optional<int64_t> CausalConvJoinAxis(const ir::Node& node);

// einsum.cc
void Einsum(const RuleContext& ctx, std::vector<Strategy>* out);
double EinsumFlops(const RuleContext& ctx);

// indexing.cc
void GatherElements(const RuleContext& ctx, std::vector<Strategy>* out);
void GatherND(const RuleContext& ctx, std::vector<Strategy>* out);
void ScatterND(const RuleContext& ctx, std::vector<Strategy>* out);
void ScatterElements(const RuleContext& ctx, std::vector<Strategy>* out);
void OneHot(const RuleContext& ctx, std::vector<Strategy>* out);
void Tile(const RuleContext& ctx, std::vector<Strategy>* out);
// QuantizeLinear and DequantizeLinear, GatherBlockQuantized (quantize.cc).
void QuantizeLinear(const RuleContext& ctx, std::vector<Strategy>* out);
void GatherBlockQuantized(const RuleContext& ctx, std::vector<Strategy>* out);
void Pad(const RuleContext& ctx, std::vector<Strategy>* out);
void Trilu(const RuleContext& ctx, std::vector<Strategy>* out);
void Generator(const RuleContext& ctx, std::vector<Strategy>* out);  // Range, ConstantOfShape

// attention.cc
void Attention(const RuleContext& ctx, std::vector<Strategy>* out);
double AttentionFlops(const RuleContext& ctx);
void RotaryEmbedding(const RuleContext& ctx, std::vector<Strategy>* out);

// shape_ops.cc
void Reshape(const RuleContext& ctx,
             std::vector<Strategy>* out);  // Reshape, Flatten, Squeeze, Unsqueeze
void Transpose(const RuleContext& ctx, std::vector<Strategy>* out);
std::optional<int64_t> TransposeFeatureDim(
    const ir::Node& node, int input, bool colwise,
    const std::function<std::optional<int64_t>(const ir::Value*)>& of_output);
void Expand(const RuleContext& ctx, std::vector<Strategy>* out);
void Concat(const RuleContext& ctx, std::vector<Strategy>* out);
void Split(const RuleContext& ctx, std::vector<Strategy>* out);
void Slice(const RuleContext& ctx, std::vector<Strategy>* out);
void ShapeOf(const RuleContext& ctx, std::vector<Strategy>* out);  // Shape, Size
// A Slice that takes one of k equal blocks of one axis (`qkv[..., 64:128]` of a fused
// projection, the halves of torch's chunk): the axis, its index in the Slice's axes
// input, and k.
struct SliceBlock {
  int64_t axis;
  int64_t index;
  int64_t blocks;
};
std::optional<SliceBlock> FindSliceBlock(const ir::Node& node);
int64_t SliceBlockCount(const ir::Node& node);
int64_t SplitBlockCount(const ir::Node& node);  // k equal outputs
// The sizes of a Split's outputs when known (op_record.h's block_weights).
std::vector<int64_t> SplitBlockWeights(const ir::Node& node);
int64_t ConcatBlockCount(const ir::Node& node);  // k equal inputs
// Symbolic dims a split is folded into as blocks (op_record.h's folded_blocks).
std::vector<ir::Dim> ReshapeFoldedBlocks(const ir::Node& node);
// Part counts an Expand repeats over the ranks (op_record.h's group_counts).
std::vector<int64_t> ExpandGroupCounts(const ir::Node& node, int64_t n);
std::vector<ir::Dim> TileFoldedBlocks(const ir::Node& node);
std::optional<int64_t> ConcatAxis(const ir::Node& node);

// shape_inputs.cc: per-rank values of the inputs that carry a size of a split dim.
absl::Status WholeShape(LocalGraph& g, ir::Node* node, const std::vector<ir::Placement>& outputs,
                        const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status BlockedSplitSizes(LocalGraph& g, ir::Node* node,
                               const std::vector<ir::Placement>& outputs,
                               const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status GroupQueryAttentionHeads(LocalGraph& g, ir::Node* node,
                                      const std::vector<ir::Placement>& outputs,
                                      const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status MsAttentionHeads(LocalGraph& g, ir::Node* node,
                              const std::vector<ir::Placement>& outputs,
                              const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status MultiHeadAttentionHeads(LocalGraph& g, ir::Node* node,
                                     const std::vector<ir::Placement>& outputs,
                                     const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status LinearAttentionHeads(LocalGraph& g, ir::Node* node,
                                  const std::vector<ir::Placement>& outputs,
                                  const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status MsRotaryHeads(LocalGraph& g, ir::Node* node, const std::vector<ir::Placement>& outputs,
                           const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status MatMulNBitsAttributes(LocalGraph& g, ir::Node* node,
                                   const std::vector<ir::Placement>& outputs,
                                   const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status ReshapeShapeInput(LocalGraph& g, ir::Node* node,
                               const std::vector<ir::Placement>& outputs,
                               const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status SliceBlockBounds(LocalGraph& g, ir::Node* node,
                              const std::vector<ir::Placement>& outputs,
                              const std::vector<std::optional<ir::Placement>>& inputs);
absl::Status ExpandShapeInput(LocalGraph& g, ir::Node* node,
                              const std::vector<ir::Placement>& outputs,
                              const std::vector<std::optional<ir::Placement>>& inputs);

// lowering.cc: Megatron's vocab-parallel layers.
absl::StatusOr<LocalGraph::Replacements> LowerMaskedGather(LocalGraph& g, ir::Node* node);
absl::StatusOr<LocalGraph::Replacements> LowerVocabParallelSoftmax(LocalGraph& g, ir::Node* node);
absl::StatusOr<LocalGraph::Replacements> LowerVocabParallelLoss(LocalGraph& g, ir::Node* node);
absl::StatusOr<LocalGraph::Replacements> LowerVocabParallelNll(LocalGraph& g, ir::Node* node);

}  // namespace tpc::shard::rules
