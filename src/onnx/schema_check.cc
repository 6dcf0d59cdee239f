#include "schema_check.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "onnx/checker.h"
#include "onnx/defs/data_type_utils.h"
#include "onnx/defs/schema.h"

namespace tpc::onnx::internal {

namespace {

const char* AttributeTypeName(::onnx::AttributeProto::AttributeType t) {
  using AP = ::onnx::AttributeProto;
  switch (t) {
    case AP::FLOAT:
      return "float";
    case AP::INT:
      return "int";
    case AP::STRING:
      return "string";
    case AP::TENSOR:
      return "tensor";
    case AP::GRAPH:
      return "graph";
    case AP::FLOATS:
      return "floats";
    case AP::INTS:
      return "ints";
    case AP::STRINGS:
      return "strings";
    case AP::TENSORS:
      return "tensors";
    case AP::GRAPHS:
      return "graphs";
    default:
      return "another type";
  }
}

// Operators of the default domain with a version newer than opset 17, libonnx 1.12's
// newest, and the first opset of that version (ONNX's Changelog, opsets 18 to 23). For any
// other operator the newest schema libonnx has is still the current one at opsets 18+.
int FirstNewVersion(const std::string& op) {
  static const auto* kChanged = new absl::flat_hash_map<std::string, int>{
      // 18
      {"BitwiseAnd", 18},
      {"BitwiseNot", 18},
      {"BitwiseOr", 18},
      {"BitwiseXor", 18},
      {"CenterCropPad", 18},
      {"Col2Im", 18},
      {"GroupNormalization", 18},
      {"LpPool", 18},
      {"Mish", 18},
      {"OptionalGetElement", 18},
      {"OptionalHasElement", 18},
      {"Pad", 18},
      {"ReduceL1", 18},
      {"ReduceL2", 18},
      {"ReduceLogSum", 18},
      {"ReduceLogSumExp", 18},
      {"ReduceMax", 18},
      {"ReduceMean", 18},
      {"ReduceMin", 18},
      {"ReduceProd", 18},
      {"ReduceSumSquare", 18},
      {"Resize", 18},
      {"ScatterElements", 18},
      {"ScatterND", 18},
      {"Split", 18},
      // 19
      {"AveragePool", 19},
      {"Cast", 19},
      {"CastLike", 19},
      {"Constant", 19},
      {"DeformConv", 19},
      {"DequantizeLinear", 19},
      {"Equal", 19},
      {"Identity", 19},
      {"If", 19},
      {"Loop", 19},
      {"QuantizeLinear", 19},
      {"Reshape", 19},
      {"Scan", 19},
      {"Shape", 19},
      {"Size", 19},
      // 20
      {"AffineGrid", 20},
      {"ConstantOfShape", 20},
      {"DFT", 20},
      {"Gelu", 20},
      {"GridSample", 20},
      {"ImageDecoder", 20},
      {"IsInf", 20},
      {"IsNaN", 20},
      {"RegexFullMatch", 20},
      {"StringConcat", 20},
      {"StringSplit", 20},
      // 21
      {"Flatten", 21},
      {"QLinearMatMul", 21},
      {"Squeeze", 21},
      {"Transpose", 21},
      {"Unsqueeze", 21},
      // 22 (mostly bfloat16 added to the type constraints)
      {"Acos", 22},
      {"Acosh", 22},
      {"Asin", 22},
      {"Asinh", 22},
      {"Atan", 22},
      {"Atanh", 22},
      {"Bernoulli", 22},
      {"Conv", 22},
      {"ConvTranspose", 22},
      {"Cos", 22},
      {"Cosh", 22},
      {"Det", 22},
      {"Dropout", 22},
      {"Elu", 22},
      {"EyeLike", 22},
      {"GRU", 22},
      {"GlobalAveragePool", 22},
      {"GlobalLpPool", 22},
      {"GlobalMaxPool", 22},
      {"HardSigmoid", 22},
      {"HardSwish", 22},
      {"InstanceNormalization", 22},
      {"LSTM", 22},
      {"LpNormalization", 22},
      {"MaxPool", 22},
      {"MaxRoiPool", 22},
      {"MaxUnpool", 22},
      {"Multinomial", 22},
      {"NegativeLogLikelihoodLoss", 22},
      {"RNN", 22},
      {"RandomNormal", 22},
      {"RandomNormalLike", 22},
      {"RandomUniform", 22},
      {"RandomUniformLike", 22},
      {"RoiAlign", 22},
      {"Round", 22},
      {"Selu", 22},
      {"Sin", 22},
      {"Sinh", 22},
      {"Softplus", 22},
      {"Softsign", 22},
      {"Tan", 22},
      {"ThresholdedRelu", 22},
      // 23
      {"Attention", 23},
      {"RMSNormalization", 23},
      {"RotaryEmbedding", 23},
  };
  auto it = kChanged->find(op);
  return it == kChanged->end() ? 0 : it->second;
}

// The schema of `op` at `opset` (nullptr when libonnx has none) and, in `*current`, whether
// it is the operator's schema at that opset: libonnx's newest is, when the opset is one it
// knows, or when the operator has no newer version up to the model's opset.
const ::onnx::OpSchema* FindSchema(const std::string& op, const std::string& domain, int64_t opset,
                                   bool* current) {
  const auto& ranges = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = ranges.find(domain);
  if (range == ranges.end()) return nullptr;
  const bool known_opset = opset <= range->second.second;
  const int changed = domain.empty() ? FirstNewVersion(op) : 1;
  *current = known_opset || changed == 0 || changed > opset;
  return known_opset ? ::onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset), domain)
                     : ::onnx::OpSchemaRegistry::Schema(op, domain);
}

}  // namespace

absl::Status CheckAgainstSchema(const ::onnx::NodeProto& node, const std::string& domain,
                                int64_t opset, const std::string& label) {
  // libonnx names the default domain "" (ai.onnx), as tpc does.
  bool current = false;
  const ::onnx::OpSchema* schema = FindSchema(node.op_type(), domain, opset, &current);
  if (schema == nullptr) return absl::OkStatus();  // the shape rules name unsupported ops
  if (current) {
    try {
      schema->Verify(node);
    } catch (const ::onnx::checker::ValidationError& e) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": ", e.what()));
    }
    return absl::OkStatus();
  }
  if (node.input_size() < schema->min_input()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", node.input_size(),
                                                   " inputs, the operator needs at least ",
                                                   schema->min_input()));
  }
  for (const auto& a : node.attribute()) {
    auto it = schema->attributes().find(a.name());
    if (it == schema->attributes().end() || it->second.type == a.type()) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": attribute '", a.name(), "' is ", AttributeTypeName(a.type()),
                     ", the operator's ", "schema wants ", AttributeTypeName(it->second.type)));
  }
  return absl::OkStatus();
}

absl::Status CheckInputTypes(const ir::Node& node, int64_t opset) {
  if (!node.domain().empty()) return absl::OkStatus();
  bool current = false;
  const ::onnx::OpSchema* schema = FindSchema(node.op_type(), "", opset, &current);
  if (schema == nullptr || schema->inputs().empty()) return absl::OkStatus();
  const auto& formal = schema->inputs();
  auto is_param = [&](const std::string& t) {
    for (const auto& c : schema->typeConstraintParams()) {
      if (c.type_param_str == t) return true;
    }
    return false;
  };
  // Type parameter -> (element type, the input that bound it).
  std::map<std::string, std::pair<ir::DType, int>> bound;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const ir::Value* v = node.input(i);
    if (v == nullptr) continue;
    const size_t fi = std::min(static_cast<size_t>(i), formal.size() - 1);
    const ::onnx::OpSchema::FormalParameter& p = formal[fi];
    if (static_cast<size_t>(i) >= formal.size() &&
        p.GetOption() != ::onnx::OpSchema::FormalParameterOption::Variadic) {
      break;  // past the schema's inputs: the arity check reports it
    }
    const ir::DType dtype = v->type().dtype;
    if (dtype == ir::DType::kUndefined) continue;
    const std::string type_str = absl::StrCat(
        "tensor(", ::onnx::Utils::DataTypeUtils::ToDataTypeString(static_cast<int32_t>(dtype)),
        ")");
    if (current && !p.GetTypes().count(::onnx::Utils::DataTypeUtils::ToType(type_str))) {
      return absl::InvalidArgumentError(absl::StrCat(
          node.Describe(), ": input ", i, " ('", v->name(), "') is ", ir::DTypeName(dtype),
          ", a type the operator does not take for its input '", p.GetName(), "'"));
    }
    const bool homogeneous =
        p.GetOption() != ::onnx::OpSchema::FormalParameterOption::Variadic || p.GetIsHomogeneous();
    if (!homogeneous || !is_param(p.GetTypeStr())) continue;
    auto [it, fresh] = bound.emplace(p.GetTypeStr(), std::make_pair(dtype, i));
    if (!fresh && it->second.first != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          node.Describe(), ": input ", i, " ('", v->name(), "') is ", ir::DTypeName(dtype),
          ", input ", it->second.second, " is ", ir::DTypeName(it->second.first),
          "; both are of the operator's type ", p.GetTypeStr(), " and must be the same"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::internal
