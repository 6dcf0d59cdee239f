// The operator records: op type → its sharding rule and the hooks the later stages
// need (see op_record.h). Sorted by domain, then op type; one line per operator. An op
// that is not here runs replicated (its inputs gathered first) and is listed in the
// report.
#include <algorithm>
#include <iterator>
#include <string_view>

#include "rules.h"
#include "tpc/shard/op_record.h"

namespace tpc::shard {
namespace {

using namespace rules;  // NOLINT(google-build-using-namespace): the rule functions.

constexpr std::string_view kMicrosoft = "com.microsoft";

constexpr OpRecord kRecords[] = {
    {"", "Abs", Unary},
    {"", "Add", AddSub, {.feature_dim = BiasFeatureDim}},
    {"", "And", Binary},
    {"", "ArgMax", ArgReduce},
    {"", "ArgMin", ArgReduce},
    {"", "Attention", Attention, {.flops = AttentionFlops}},
    {"", "AveragePool", Pool},
    {"", "Cast", Cast, {.passes_values = true}},
    {"", "CastLike", CastLike},
    {"", "Ceil", Unary},
    {"", "Clip", Unary},
    {"", "Concat", Concat, {.block_count = ConcatBlockCount, .join_axis = ConcatAxis}},
    {"", "ConstantOfShape", Generator},
    {"", "Conv", Conv, {.flops = ConvFlops, .feature_dim = ConvFeatureDim}},
    {"",
     "ConvTranspose",
     ConvTranspose,
     {.flops = ConvTransposeFlops, .feature_dim = ConvFeatureDim}},
    {"", "Cos", Unary},
    {"", "CumSum", AxisWhole},
    {"", "DequantizeLinear", QuantizeLinear},
    {"", "Div", Div},
    {"", "Dropout", UnaryLinear},
    {"", "Einsum", Einsum, {.flops = EinsumFlops}},
    {"", "Elu", Unary},
    {"", "Equal", Binary},
    {"", "Erf", Unary},
    {"", "Exp", Unary},
    {"", "Expand", Expand, {.shape_inputs = ExpandShapeInput, .group_counts = ExpandGroupCounts}},
    {"", "Flatten", Reshape, {.folded_blocks = ReshapeFoldedBlocks}},
    {"", "Floor", Unary},
    {"", "Gather", Gather, {.feature_dim = GatherFeatureDim}},
    {"", "GatherElements", GatherElements},
    {"", "GatherND", GatherND},
    {"", "Gelu", Unary},
    {"", "Gemm", Gemm, {.flops = GemmFlops, .feature_dim = GemmFeatureDim}},
    {"", "GlobalAveragePool", GlobalPool},
    {"", "GlobalLpPool", GlobalPool},
    {"", "GlobalMaxPool", GlobalPool},
    {"", "Greater", Binary},
    {"", "GreaterOrEqual", Binary},
    {"", "HardSigmoid", Unary},
    {"", "HardSwish", Unary},
    {"", "Identity", UnaryLinear, {.passes_values = true}},
    {"", "IsInf", Unary},
    {"", "IsNaN", Unary},
    {"", "LayerNormalization", LayerNormalization},
    {"", "LeakyRelu", Unary},
    {"", "Less", Binary},
    {"", "LessOrEqual", Binary},
    {"", "Log", Unary},
    {"", "LogSoftmax", Softmax},
    {"", "LpNormalization", AxisWhole},
    {"", "LpPool", Pool},
    {"", "MatMul", MatMul, {.flops = MatMulFlops, .feature_dim = MatMulFeatureDim}},
    {"", "Max", Binary},
    {"", "MaxPool", Pool},
    {"", "Min", Binary},
    {"", "Mish", Unary},
    {"", "Mod", Binary},
    {"", "Mul", Mul},
    {"", "Neg", UnaryLinear},
    {"", "NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss},
    {"", "Not", Unary},
    {"", "OneHot", OneHot},
    {"", "Or", Binary},
    {"", "PRelu", Binary},
    {"", "Pad", Pad},
    {"", "Pow", Binary},
    {"", "QuantizeLinear", QuantizeLinear},
    {"", "RMSNormalization", LayerNormalization},
    {"", "Range", Generator},
    {"", "Reciprocal", Unary},
    {"", "ReduceL1", Reduce},
    {"", "ReduceL2", Reduce},
    {"", "ReduceLogSum", Reduce},
    {"", "ReduceLogSumExp", Reduce},
    {"", "ReduceMax", Reduce},
    {"", "ReduceMean", Reduce},
    {"", "ReduceMin", Reduce},
    {"", "ReduceProd", Reduce},
    {"", "ReduceSum", Reduce},
    {"", "ReduceSumSquare", Reduce},
    {"", "Relu", Unary},
    {"",
     "Reshape",
     Reshape,
     {.shape_inputs = ReshapeShapeInput, .folded_blocks = ReshapeFoldedBlocks}},
    {"", "RotaryEmbedding", RotaryEmbedding},
    {"", "Round", Unary},
    {"", "ScatterElements", ScatterElements},
    {"", "ScatterND", ScatterND},
    {"", "Selu", Unary},
    {"", "Shape", ShapeOf, {.shape_inputs = WholeShape, .reads_shape_only = true}},
    {"", "Sigmoid", Unary},
    {"", "Sign", Unary},
    {"", "SimplifiedLayerNormalization", LayerNormalization},
    {"", "Sin", Unary},
    {"", "Size", ShapeOf, {.shape_inputs = WholeShape, .reads_shape_only = true}},
    {"", "Slice", Slice, {.shape_inputs = SliceBlockBounds, .block_count = SliceBlockCount}},
    {"", "Softmax", Softmax},
    {"", "SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss},
    {"", "Softplus", Unary},
    {"",
     "Split",
     Split,
     {.shape_inputs = BlockedSplitSizes,
      .block_count = SplitBlockCount,
      .block_weights = SplitBlockWeights}},
    {"", "Sqrt", Unary},
    {"", "Squeeze", Reshape},
    {"", "Sub", AddSub},
    {"", "Sum", AddSub},
    {"", "Tan", Unary},
    {"", "Tanh", Unary},
    {"", "Tile", Tile, {.folded_blocks = TileFoldedBlocks}},
    {"", "TopK", AxisWhole},
    {"", "Transpose", Transpose, {.feature_dim = TransposeFeatureDim}},
    {"", "Trilu", Trilu},
    {"", "Unsqueeze", Reshape},
    {"", "Where", Where},
    {"", "Xor", Binary},
    {kMicrosoft,
     "Attention",
     MsAttention,
     {.shape_inputs = MsAttentionHeads,
      .flops = MsAttentionFlops,
      .block_count = QkvBlocks,
      .join_axis = MsAttentionJoinAxis}},
    {kMicrosoft, "BiasGelu", Unary},
    {kMicrosoft, "CausalConvWithState", CausalConvWithState, {.join_axis = CausalConvJoinAxis}},
    {kMicrosoft, "FastGelu", Unary},
    {kMicrosoft, "GatedAdd", GatedAdd},
    {kMicrosoft, "GatedRMSNorm", GatedRMSNorm},
    {kMicrosoft, "GatherBlockQuantized", GatherBlockQuantized},
    {kMicrosoft, "Gelu", Unary},
    {kMicrosoft,
     "GroupQueryAttention",
     GroupQueryAttention,
     {.shape_inputs = GroupQueryAttentionHeads,
      .flops = GroupQueryAttentionFlops,
      .group_counts = GroupQueryAttentionGroupCounts,
      .join_axis = GroupQueryAttentionJoinAxis}},
    {kMicrosoft,
     "LinearAttention",
     LinearAttention,
     {.shape_inputs = LinearAttentionHeads,
      .flops = LinearAttentionFlops,
      .group_counts = LinearAttentionGroupCounts,
      .join_axis = LinearAttentionStateAxis}},
    {kMicrosoft, "LinearAttentionGate", LinearAttentionGate},
    {kMicrosoft, "MRotaryEmbedding", MRotaryEmbedding, {.shape_inputs = MsRotaryHeads}},
    {kMicrosoft,
     "MatMulNBits",
     MatMulNBits,
     {.shape_inputs = MatMulNBitsAttributes,
      .flops = MatMulFlops,
      .feature_dim = MatMulNBitsFeatureDim}},
    {kMicrosoft, "MoE", MoE, {.flops = MoEFlops}},
    {kMicrosoft,
     "MultiHeadAttention",
     MultiHeadAttention,
     {.shape_inputs = MultiHeadAttentionHeads,
      .flops = MultiHeadAttentionFlops,
      .block_count = QkvBlocks,
      .join_axis = GroupQueryAttentionJoinAxis}},
    {kMicrosoft, "QMoE", QMoE, {.flops = MoEFlops}},
    {kMicrosoft, "QuickGelu", Unary},
    {kMicrosoft, "RotaryEmbedding", MsRotaryEmbedding, {.shape_inputs = MsRotaryHeads}},
    {kMicrosoft, "SimplifiedLayerNormalization", LayerNormalization},
    {kMicrosoft, "SkipLayerNormalization", SkipLayerNormalization},
    {kMicrosoft, "SkipSimplifiedLayerNormalization", SkipLayerNormalization},
};

bool Less(const OpRecord& r, std::string_view domain, std::string_view op) {
  return r.domain != domain ? r.domain < domain : r.op_type < op;
}

}  // namespace

const OpRecord* FindOpRecord(std::string_view domain, std::string_view op_type) {
  if (domain == "ai.onnx") domain = "";
  const OpRecord* end = std::end(kRecords);
  const OpRecord* it = std::lower_bound(std::begin(kRecords), end, 0, [&](const OpRecord& r, int) {
    return Less(r, domain, op_type);
  });
  return it != end && it->domain == domain && it->op_type == op_type ? it : nullptr;
}

std::span<const OpRecord> OpRecords() { return kRecords; }

double OpFlops(const RuleContext& ctx) {
  const OpRecord* r = FindOpRecord(ctx.node().domain(), ctx.node().op_type());
  // An operand of unknown rank (a graph input declared without a shape): the hooks read
  // dims, so the count is the output's, estimated (as StrategiesFor gives such a node no
  // rule's strategies).
  bool ranked = true;
  for (const ir::Value* v : ctx.node().inputs())
    ranked = ranked && (v == nullptr || v->type().has_rank());
  if (r != nullptr && r->hooks.flops != nullptr && ranked) return r->hooks.flops(ctx);
  return OutputElements(ctx);
}

}  // namespace tpc::shard
