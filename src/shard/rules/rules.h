// Sharding rules of the operator families; registry.cc maps op types to them.
#pragma once

#include <vector>

#include "tpc/shard/strategy.h"

namespace tpc::shard::rules {

// Factor spec helpers shared by the families.
// One pass factor per output dim; inputs broadcast numpy-style onto the output.
FactorSpec BroadcastSpec(const RuleContext& ctx, const std::vector<int>& inputs);
// Maps the dims of `in` onto `out` through the factorisation of sizes (reshape):
// in_factors/out_factors get a shared factor for each group whose major dims both
// split N ways. False when the sizes do not factor into groups.
bool ReshapeFactors(const RuleContext& ctx, const std::vector<ir::Dim>& in,
                    const std::vector<ir::Dim>& out, FactorSpec* spec, std::vector<int>* in_factors,
                    std::vector<int>* out_factors);
// Normalises a possibly negative axis; -1 when out of range.
int64_t NormalizeAxis(int64_t axis, int64_t rank);

// elementwise.cc
void Unary(const RuleContext& ctx, std::vector<Strategy>* out);
void UnaryLinear(const RuleContext& ctx, std::vector<Strategy>* out);
void Binary(const RuleContext& ctx, std::vector<Strategy>* out);
void AddSub(const RuleContext& ctx, std::vector<Strategy>* out);
void Mul(const RuleContext& ctx, std::vector<Strategy>* out);
void Div(const RuleContext& ctx, std::vector<Strategy>* out);
void Where(const RuleContext& ctx, std::vector<Strategy>* out);
void Cast(const RuleContext& ctx, std::vector<Strategy>* out);

// linear.cc
void MatMul(const RuleContext& ctx, std::vector<Strategy>* out);
void Gemm(const RuleContext& ctx, std::vector<Strategy>* out);

// embedding.cc
void Gather(const RuleContext& ctx, std::vector<Strategy>* out);

// cross_entropy.cc
void SoftmaxCrossEntropyLoss(const RuleContext& ctx, std::vector<Strategy>* out);
void NegativeLogLikelihoodLoss(const RuleContext& ctx, std::vector<Strategy>* out);

// reduce.cc
void Reduce(const RuleContext& ctx, std::vector<Strategy>* out);
void ArgReduce(const RuleContext& ctx, std::vector<Strategy>* out);

// normalization.cc
void Softmax(const RuleContext& ctx, std::vector<Strategy>* out);
void LayerNormalization(const RuleContext& ctx, std::vector<Strategy>* out);
void AxisWhole(const RuleContext& ctx, std::vector<Strategy>* out);  // TopK, CumSum

// shape_ops.cc
void Reshape(const RuleContext& ctx,
             std::vector<Strategy>* out);  // Reshape, Flatten, Squeeze, Unsqueeze
void Transpose(const RuleContext& ctx, std::vector<Strategy>* out);
void Expand(const RuleContext& ctx, std::vector<Strategy>* out);
void Concat(const RuleContext& ctx, std::vector<Strategy>* out);
void Split(const RuleContext& ctx, std::vector<Strategy>* out);
void Slice(const RuleContext& ctx, std::vector<Strategy>* out);
void ShapeOf(const RuleContext& ctx, std::vector<Strategy>* out);  // Shape, Size

}  // namespace tpc::shard::rules
