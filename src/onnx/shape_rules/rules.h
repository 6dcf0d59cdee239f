// Internal to the shape rules: the helpers the operator families share and the rule
// functions that registry.cc puts in its table. Only registry.cc names operators.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tpc/ir/dim.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx::shape_rules {

using Dims = std::vector<ir::Dim>;

// ---- Helpers (common.cc) ----

// Fails unless inputs 0..count-1 are present.
absl::Status RequireInputs(const InferenceContext& ctx, int count);
// Fails unless input i has a known rank; returns its dims.
absl::StatusOr<const Dims*> RankedInput(const InferenceContext& ctx, int i);
// `axis` in [-rank, rank) made non-negative, or an error naming the attribute.
absl::StatusOr<int64_t> NormalizeAxis(const InferenceContext& ctx, int64_t axis, int64_t rank);
// Output i of dtype `t` and unknown rank.
void SetUnknownRank(InferenceContext& ctx, int i, ir::DType t);
// `[batch, seq]` or `[*]`.
std::string ShapeString(const std::optional<Dims>& dims);

// Numpy broadcasting of two dims. Equal dims match; 1 broadcasts; a static dim other
// than 1 wins over a symbolic or unknown one (the other must be 1 or equal at run
// time); two different symbolic dims give unknown. nullopt: two static dims that
// cannot broadcast.
std::optional<ir::Dim> BroadcastDim(const ir::Dim& a, const ir::Dim& b);
absl::StatusOr<Dims> BroadcastShapes(const InferenceContext& ctx, const Dims& a, const Dims& b);
// Broadcast of the shapes of every present input in [first, end) (end -1: all);
// nullopt when a rank is unknown.
absl::StatusOr<std::optional<Dims>> BroadcastInputs(const InferenceContext& ctx, int first = 0,
                                                    int end = -1);

// True for dtypes whose small tensors carry known values (integers and bool).
bool TracksValues(ir::DType t);
// Sets output i's known value when its type admits one: integer or bool, static dims
// whose product is the element count (row-major), at most kMaxKnownValueElements. Rank 0
// and 1 are the usual case; small rank-2 values occur in torch's Pad lowering (InferShapes
// drops values of rank 2 and more when done, as the IR keeps ranks 0 and 1 only).
void MaybeSetValue(InferenceContext& ctx, int i, Dims value);
// The dims as integers when all are static.
std::optional<std::vector<int64_t>> StaticShape(const std::optional<Dims>& shape);
// Row-major strides of a static shape.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape);
// Input i's known value when every element is a static integer (or its constant data).
std::optional<std::vector<int64_t>> StaticInts(const InferenceContext& ctx, int i);
// Input i as a single dim (rank 0 or one element), when known.
std::optional<ir::Dim> ScalarValue(const InferenceContext& ctx, int i);
// Known values of `inputs`, brought to one length (one-element values repeat);
// nullopt when one is unknown or the lengths do not broadcast.
std::optional<std::vector<Dims>> BroadcastValues(const InferenceContext& ctx,
                                                 const std::vector<int>& inputs);
// Integer list from attribute `name` if present, else from input `input` (nullopt when
// neither is there; an error when the input is present but not a known constant list).
absl::StatusOr<std::optional<std::vector<int64_t>>> IntsFromAttrOrInput(const InferenceContext& ctx,
                                                                        const std::string& name,
                                                                        int input);
// True when the list `name` comes from input `input` (no attribute of that name) and
// the input is present but its values are not known (a graph input, a computed value).
bool IntsComputedAtRunTime(const InferenceContext& ctx, const std::string& name, int input);
// The length of input i, a list (rank 1) or a scalar (rank 0: 1), when it is static.
std::optional<int64_t> StaticLength(const InferenceContext& ctx, int i);

// ---- Elementwise (elementwise.cc) ----
absl::Status InferUnary(InferenceContext& ctx);      // same type as input 0
absl::Status InferUnaryBool(InferenceContext& ctx);  // same shape, bool (IsNaN, IsInf)
absl::Status InferNeg(InferenceContext& ctx);
absl::Status InferAbs(InferenceContext& ctx);
absl::Status InferAdd(InferenceContext& ctx);
absl::Status InferSub(InferenceContext& ctx);
absl::Status InferMul(InferenceContext& ctx);
absl::Status InferDiv(InferenceContext& ctx);
absl::Status InferMod(InferenceContext& ctx);
absl::Status InferBinary(InferenceContext& ctx);  // broadcast, type of input 0 (Pow, Mod)
absl::Status InferMax(InferenceContext& ctx);
absl::Status InferMin(InferenceContext& ctx);
absl::Status InferSum(InferenceContext& ctx);
absl::Status InferVariadic(InferenceContext& ctx);  // Mean
absl::Status InferEqual(InferenceContext& ctx);
absl::Status InferLess(InferenceContext& ctx);
absl::Status InferLessOrEqual(InferenceContext& ctx);
absl::Status InferGreater(InferenceContext& ctx);
absl::Status InferGreaterOrEqual(InferenceContext& ctx);
absl::Status InferAnd(InferenceContext& ctx);
absl::Status InferOr(InferenceContext& ctx);
absl::Status InferXor(InferenceContext& ctx);
absl::Status InferNot(InferenceContext& ctx);
absl::Status InferWhere(InferenceContext& ctx);
absl::Status InferCast(InferenceContext& ctx);
absl::Status InferCastLike(InferenceContext& ctx);

// ---- Linear algebra (linear.cc) ----
absl::Status InferMatMul(InferenceContext& ctx);
absl::Status InferMatMulNBits(InferenceContext& ctx);
absl::Status InferMoE(InferenceContext& ctx);
absl::Status InferQMoE(InferenceContext& ctx);
absl::Status InferGemm(InferenceContext& ctx);
absl::Status InferEinsum(InferenceContext& ctx);

// ---- Attention (attention.cc) ----
absl::Status InferAttention(InferenceContext& ctx);
absl::Status InferGroupQueryAttention(InferenceContext& ctx);
absl::Status InferMultiHeadAttention(InferenceContext& ctx);
absl::Status InferMsAttention(InferenceContext& ctx);
absl::Status InferLinearAttention(InferenceContext& ctx);
absl::Status InferLinearAttentionGate(InferenceContext& ctx);

// ---- Convolutions and pools (conv.cc) ----
absl::Status InferConv(InferenceContext& ctx);
absl::Status InferCausalConvWithState(InferenceContext& ctx);
absl::Status InferPool(InferenceContext& ctx);  // MaxPool (and Indices), AveragePool, LpPool
absl::Status InferCol2Im(InferenceContext& ctx);

// ---- Reductions (reduce.cc) ----
absl::Status InferReduce(InferenceContext& ctx);  // axes attribute or input
absl::Status InferArgReduce(InferenceContext& ctx);
absl::Status InferTopK(InferenceContext& ctx);

// ---- Shape manipulation (shape_ops.cc) ----
absl::Status InferShape(InferenceContext& ctx);
absl::Status InferSize(InferenceContext& ctx);
absl::Status InferIdentity(InferenceContext& ctx);
absl::Status InferReshape(InferenceContext& ctx);
absl::Status InferFlatten(InferenceContext& ctx);
absl::Status InferSqueeze(InferenceContext& ctx);
absl::Status InferUnsqueeze(InferenceContext& ctx);
absl::Status InferTranspose(InferenceContext& ctx);
absl::Status InferExpand(InferenceContext& ctx);

// ---- Indexing, joining, splitting (indexing.cc) ----
absl::Status InferSlice(InferenceContext& ctx);
absl::Status InferGather(InferenceContext& ctx);
absl::Status InferGatherElements(InferenceContext& ctx);
absl::Status InferGatherND(InferenceContext& ctx);
absl::Status InferOneHot(InferenceContext& ctx);
absl::Status InferNonZero(InferenceContext& ctx);
absl::Status InferCompress(InferenceContext& ctx);
absl::Status InferScatter(InferenceContext& ctx);  // ScatterND, ScatterElements: data type
absl::Status InferConcat(InferenceContext& ctx);
absl::Status InferSplit(InferenceContext& ctx);
absl::Status InferTile(InferenceContext& ctx);
absl::Status InferPad(InferenceContext& ctx);
absl::Status InferCenterCropPad(InferenceContext& ctx);

// ---- Tensor generators (generators.cc) ----
absl::Status InferConstant(InferenceContext& ctx);
absl::Status InferConstantOfShape(InferenceContext& ctx);
absl::Status InferRange(InferenceContext& ctx);

// ---- Neural-network layers (nn.cc) ----
absl::Status InferSoftmax(InferenceContext& ctx);    // also LogSoftmax
absl::Status InferLayerNorm(InferenceContext& ctx);  // also Simplified / RMS
absl::Status InferSkipLayerNorm(InferenceContext& ctx);
absl::Status InferDropout(InferenceContext& ctx);

// ---- Quantization (quantize.cc) ----
absl::Status InferDequantizeLinear(InferenceContext& ctx);
absl::Status InferQuantizeLinear(InferenceContext& ctx);
absl::Status InferGatherBlockQuantized(InferenceContext& ctx);

// ---- Losses (loss.cc) ----
absl::Status InferSoftmaxCrossEntropyLoss(InferenceContext& ctx);
absl::Status InferNegativeLogLikelihoodLoss(InferenceContext& ctx);

// ---- Sampling at computed coordinates (sampling.cc) ----
absl::Status InferAffineGrid(InferenceContext& ctx);
absl::Status InferDeformConv(InferenceContext& ctx);
absl::Status InferGridSample(InferenceContext& ctx);

// ---- Collectives of the `tpc` domain (collectives.cc) ----
absl::Status InferAllGather(InferenceContext& ctx);
absl::Status InferAllReduce(InferenceContext& ctx);
absl::Status InferAllToAll(InferenceContext& ctx);
absl::Status InferRank(InferenceContext& ctx);
absl::Status InferCheckIndices(InferenceContext& ctx);
absl::Status InferShard(InferenceContext& ctx);
absl::Status InferReduceScatter(InferenceContext& ctx);

}  // namespace tpc::onnx::shape_rules
