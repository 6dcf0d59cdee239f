// The table of shape rules: the one place that names operators.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx {
namespace {

using namespace shape_rules;  // NOLINT(google-build-using-namespace): the rule functions.

constexpr std::string_view kMicrosoft = "com.microsoft";
constexpr std::string_view kTpc = "tpc";

struct Entry {
  std::string_view domain;  // "" (ai.onnx), com.microsoft or tpc (collectives)
  std::string_view op_type;
  ShapeRule rule;
};

// Sorted by domain, then op type; one line per operator.
constexpr Entry kRules[] = {
    {"", "Abs", InferAbs},
    {"", "Add", InferAdd},
    {"", "AffineGrid", InferAffineGrid},
    {"", "And", InferAnd},
    {"", "ArgMax", InferArgReduce},
    {"", "ArgMin", InferArgReduce},
    {"", "Attention", InferAttention},
    {"", "AveragePool", InferPool},
    {"", "BitwiseAnd", InferBinary},
    {"", "BitwiseNot", InferUnary},
    {"", "BitwiseOr", InferBinary},
    {"", "BitwiseXor", InferBinary},
    {"", "Cast", InferCast},
    {"", "CastLike", InferCastLike},
    {"", "Ceil", InferUnary},
    {"", "CenterCropPad", InferCenterCropPad},
    {"", "Clip", InferUnary},
    {"", "Col2Im", InferCol2Im},
    {"", "Compress", InferCompress},
    {"", "Concat", InferConcat},
    {"", "Constant", InferConstant},
    {"", "ConstantOfShape", InferConstantOfShape},
    {"", "Conv", InferConv},
    {"", "Cos", InferUnary},
    {"", "CumSum", InferUnary},
    {"", "DeformConv", InferDeformConv},
    {"", "DequantizeLinear", InferDequantizeLinear},
    {"", "Div", InferDiv},
    {"", "Dropout", InferDropout},
    {"", "Einsum", InferEinsum},
    {"", "Elu", InferUnary},
    {"", "Equal", InferEqual},
    {"", "Erf", InferUnary},
    {"", "Exp", InferUnary},
    {"", "Expand", InferExpand},
    {"", "Flatten", InferFlatten},
    {"", "Floor", InferUnary},
    {"", "Gather", InferGather},
    {"", "GatherElements", InferGatherElements},
    {"", "GatherND", InferGatherND},
    {"", "Gelu", InferUnary},
    {"", "Gemm", InferGemm},
    {"", "Greater", InferGreater},
    {"", "GreaterOrEqual", InferGreaterOrEqual},
    {"", "GridSample", InferGridSample},
    {"", "GroupNormalization", InferUnary},
    {"", "HardSigmoid", InferUnary},
    {"", "HardSwish", InferUnary},
    {"", "Identity", InferIdentity},
    {"", "IsInf", InferUnaryBool},
    {"", "IsNaN", InferUnaryBool},
    {"", "LayerNormalization", InferLayerNorm},
    {"", "LeakyRelu", InferUnary},
    {"", "Less", InferLess},
    {"", "LessOrEqual", InferLessOrEqual},
    {"", "Log", InferUnary},
    {"", "LogSoftmax", InferSoftmax},
    {"", "LpNormalization", InferUnary},
    {"", "LpPool", InferPool},
    {"", "MatMul", InferMatMul},
    {"", "Max", InferMax},
    {"", "MaxPool", InferPool},
    {"", "Mean", InferVariadic},
    {"", "MeanVarianceNormalization", InferUnary},
    {"", "Min", InferMin},
    {"", "Mish", InferUnary},
    {"", "Mod", InferMod},
    {"", "Mul", InferMul},
    {"", "Neg", InferNeg},
    {"", "NegativeLogLikelihoodLoss", InferNegativeLogLikelihoodLoss},
    {"", "NonZero", InferNonZero},
    {"", "Not", InferNot},
    {"", "OneHot", InferOneHot},
    {"", "Or", InferOr},
    {"", "Pad", InferPad},
    {"", "Pow", InferBinary},
    {"", "PRelu", InferBinary},
    {"", "QuantizeLinear", InferQuantizeLinear},
    {"", "RMSNormalization", InferLayerNorm},
    {"", "Range", InferRange},
    {"", "Reciprocal", InferUnary},
    {"", "ReduceL1", InferReduce},
    {"", "ReduceL2", InferReduce},
    {"", "ReduceLogSum", InferReduce},
    {"", "ReduceLogSumExp", InferReduce},
    {"", "ReduceMax", InferReduce},
    {"", "ReduceMean", InferReduce},
    {"", "ReduceMin", InferReduce},
    {"", "ReduceProd", InferReduce},
    {"", "ReduceSum", InferReduce},
    {"", "ReduceSumSquare", InferReduce},
    {"", "Relu", InferUnary},
    {"", "Reshape", InferReshape},
    {"", "RotaryEmbedding", InferUnary},
    {"", "Round", InferUnary},
    {"", "ScatterElements", InferScatter},
    {"", "ScatterND", InferScatter},
    {"", "Selu", InferUnary},
    {"", "Shape", InferShape},
    {"", "Sigmoid", InferUnary},
    {"", "Sign", InferUnary},
    {"", "SimplifiedLayerNormalization", InferLayerNorm},
    {"", "Sin", InferUnary},
    {"", "Size", InferSize},
    {"", "Slice", InferSlice},
    {"", "Softmax", InferSoftmax},
    {"", "SoftmaxCrossEntropyLoss", InferSoftmaxCrossEntropyLoss},
    {"", "Softplus", InferUnary},
    {"", "Split", InferSplit},
    {"", "Sqrt", InferUnary},
    {"", "Squeeze", InferSqueeze},
    {"", "Sub", InferSub},
    {"", "Sum", InferSum},
    {"", "Tan", InferUnary},
    {"", "Tanh", InferUnary},
    {"", "Tile", InferTile},
    {"", "TopK", InferTopK},
    {"", "Transpose", InferTranspose},
    {"", "Trilu", InferUnary},
    {"", "Unsqueeze", InferUnsqueeze},
    {"", "Where", InferWhere},
    {"", "Xor", InferXor},
    {kMicrosoft, "Attention", InferMsAttention},
    {kMicrosoft, "BiasGelu", InferUnary},
    {kMicrosoft, "CausalConvWithState", InferCausalConvWithState},
    {kMicrosoft, "FastGelu", InferUnary},
    {kMicrosoft, "GatedAdd", InferUnary},
    {kMicrosoft, "GatedRMSNorm", InferUnary},
    {kMicrosoft, "GatherBlockQuantized", InferGatherBlockQuantized},
    {kMicrosoft, "Gelu", InferUnary},
    {kMicrosoft, "GroupQueryAttention", InferGroupQueryAttention},
    {kMicrosoft, "LinearAttention", InferLinearAttention},
    {kMicrosoft, "LinearAttentionGate", InferLinearAttentionGate},
    {kMicrosoft, "MRotaryEmbedding", InferUnary},
    {kMicrosoft, "MatMulNBits", InferMatMulNBits},
    {kMicrosoft, "MoE", InferMoE},
    {kMicrosoft, "MultiHeadAttention", InferMultiHeadAttention},
    {kMicrosoft, "QMoE", InferQMoE},
    {kMicrosoft, "QuickGelu", InferUnary},
    {kMicrosoft, "RotaryEmbedding", InferUnary},
    {kMicrosoft, "SimplifiedLayerNormalization", InferLayerNorm},
    {kMicrosoft, "SkipLayerNormalization", InferSkipLayerNorm},
    {kMicrosoft, "SkipSimplifiedLayerNormalization", InferSkipLayerNorm},
    {kTpc, "AllGather", InferAllGather},
    {kTpc, "AllReduce", InferAllReduce},
    {kTpc, "AllToAll", InferAllToAll},
    {kTpc, "CheckIndices", InferCheckIndices},
    {kTpc, "Rank", InferRank},
    {kTpc, "ReduceScatter", InferReduceScatter},
    {kTpc, "Shard", InferShard},
};

}  // namespace

ShapeRule FindShapeRule(std::string_view domain, std::string_view op_type) {
  if (domain == "ai.onnx") domain = "";
  for (const Entry& e : kRules) {
    if (e.domain == domain && e.op_type == op_type) return e.rule;
  }
  return nullptr;
}

std::vector<std::string> SupportedOps() {
  std::vector<std::string> out;
  for (const Entry& e : kRules) {
    out.push_back(e.domain.empty()
                      ? std::string(e.op_type)
                      : absl::StrCat(std::string(e.domain), "::", std::string(e.op_type)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tpc::onnx
