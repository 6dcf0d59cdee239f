// The one table of sharding rules: op type → rule, alphabetical. An op that is not
// here runs replicated (its inputs gathered first) and is listed in the report.
#include <map>
#include <string>

#include "rules.h"

namespace tpc::shard {
namespace {

using namespace rules;  // NOLINT: the table reads better unqualified

const std::map<std::string, RuleFn>& DefaultDomain() {
  static const auto* table = new std::map<std::string, RuleFn>{
      {"Abs", Unary},
      {"Add", AddSub},
      {"And", Binary},
      {"ArgMax", ArgReduce},
      {"ArgMin", ArgReduce},
      {"Cast", Cast},
      {"CastLike", Cast},
      {"Ceil", Unary},
      {"Clip", Unary},
      {"Concat", Concat},
      {"Cos", Unary},
      {"CumSum", AxisWhole},
      {"Div", Div},
      {"Dropout", UnaryLinear},
      {"Elu", Unary},
      {"Equal", Binary},
      {"Erf", Unary},
      {"Exp", Unary},
      {"Expand", Expand},
      {"Flatten", Reshape},
      {"Floor", Unary},
      {"Gather", Gather},
      {"Gelu", Unary},
      {"Gemm", Gemm},
      {"Greater", Binary},
      {"GreaterOrEqual", Binary},
      {"HardSigmoid", Unary},
      {"HardSwish", Unary},
      {"Identity", UnaryLinear},
      {"IsInf", Unary},
      {"IsNaN", Unary},
      {"LayerNormalization", LayerNormalization},
      {"LeakyRelu", Unary},
      {"Less", Binary},
      {"LessOrEqual", Binary},
      {"Log", Unary},
      {"LogSoftmax", Softmax},
      {"MatMul", MatMul},
      {"Max", Binary},
      {"Min", Binary},
      {"Mish", Unary},
      {"Mod", Binary},
      {"Mul", Mul},
      {"Neg", UnaryLinear},
      {"NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss},
      {"Not", Unary},
      {"Or", Binary},
      {"Pow", Binary},
      {"PRelu", Binary},
      {"Reciprocal", Unary},
      {"ReduceL1", Reduce},
      {"ReduceL2", Reduce},
      {"ReduceLogSum", Reduce},
      {"ReduceLogSumExp", Reduce},
      {"ReduceMax", Reduce},
      {"ReduceMean", Reduce},
      {"ReduceMin", Reduce},
      {"ReduceProd", Reduce},
      {"ReduceSum", Reduce},
      {"ReduceSumSquare", Reduce},
      {"Relu", Unary},
      {"Reshape", Reshape},
      {"RMSNormalization", LayerNormalization},
      {"Round", Unary},
      {"Selu", Unary},
      {"Shape", ShapeOf},
      {"Sigmoid", Unary},
      {"Sign", Unary},
      {"SimplifiedLayerNormalization", LayerNormalization},
      {"Sin", Unary},
      {"Size", ShapeOf},
      {"Slice", Slice},
      {"Softmax", Softmax},
      {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss},
      {"Softplus", Unary},
      {"Split", Split},
      {"Sqrt", Unary},
      {"Squeeze", Reshape},
      {"Sub", AddSub},
      {"Sum", AddSub},
      {"Tan", Unary},
      {"Tanh", Unary},
      {"TopK", AxisWhole},
      {"Transpose", Transpose},
      {"Unsqueeze", Reshape},
      {"Where", Where},
      {"Xor", Binary},
  };
  return *table;
}

const std::map<std::string, RuleFn>& Microsoft() {
  static const auto* table = new std::map<std::string, RuleFn>{
      {"Gelu", Unary},
      {"SimplifiedLayerNormalization", LayerNormalization},
  };
  return *table;
}

}  // namespace

RuleFn FindShardRule(const std::string& domain, const std::string& op_type) {
  const std::map<std::string, RuleFn>* table = nullptr;
  if (domain.empty() || domain == "ai.onnx") table = &DefaultDomain();
  if (domain == "com.microsoft") table = &Microsoft();
  if (table == nullptr) return nullptr;
  auto it = table->find(op_type);
  return it == table->end() ? nullptr : it->second;
}

}  // namespace tpc::shard
