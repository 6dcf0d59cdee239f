#include "schema_check.h"
#include "tpc/onnx/schema.h"

#include <algorithm>
#include <array>
#include <exception>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "onnx/checker.h"
#include "onnx/defs/data_type_utils.h"
#include "onnx/defs/schema.h"
#include "schema_extra.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx::internal {

namespace {

// Operators of the default domain with a version newer than opset 17, libonnx 1.12's
// newest, and the first opset of that version (ONNX's Changelog, opsets 18 to 23). For any
// other operator the newest schema libonnx has is still the current one at opsets 18+.
int FirstNewVersion(const std::string& op) {
  // {first opset of the new version, operators}; opset 22 mostly added bfloat16 to the
  // type constraints.
  static const std::pair<int, const char*> kChanged[] = {
      {18,
       "BitwiseAnd BitwiseNot BitwiseOr BitwiseXor CenterCropPad Col2Im "
       "GroupNormalization LpPool Mish OptionalGetElement OptionalHasElement "
       "Pad ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax "
       "ReduceMean ReduceMin ReduceProd ReduceSumSquare Resize "
       "ScatterElements ScatterND Split "},
      {19,
       "AveragePool Cast CastLike Constant DeformConv DequantizeLinear Equal "
       "Identity If Loop QuantizeLinear Reshape Scan Shape Size "},
      {20,
       "AffineGrid ConstantOfShape DFT Gelu GridSample ImageDecoder IsInf "
       "IsNaN RegexFullMatch StringConcat StringSplit "},
      {21, "Flatten QLinearMatMul Squeeze Transpose Unsqueeze "},
      {22,
       "Acos Acosh Asin Asinh Atan Atanh Bernoulli Conv ConvTranspose Cos "
       "Cosh Det Dropout Elu EyeLike GRU GlobalAveragePool GlobalLpPool "
       "GlobalMaxPool HardSigmoid HardSwish InstanceNormalization LSTM "
       "LpNormalization MaxPool MaxRoiPool MaxUnpool Multinomial "
       "NegativeLogLikelihoodLoss RNN RandomNormal RandomNormalLike "
       "RandomUniform RandomUniformLike RoiAlign Round Selu Sin Sinh Softplus "
       "Softsign Tan ThresholdedRelu "},
      {23, "Attention RMSNormalization RotaryEmbedding "},
  };
  static const auto* kFirst = [] {
    auto* m = new absl::flat_hash_map<std::string, int>();
    for (const auto& [version, ops] : kChanged) {
      for (absl::string_view o : absl::StrSplit(ops, ' ', absl::SkipEmpty())) {
        m->emplace(std::string(o), version);
      }
    }
    return m;
  }();
  auto it = kFirst->find(op);
  return it == kFirst->end() ? 0 : it->second;
}

// libonnx's interned type string `tensor(float)` of `dtype` (nullptr for a type it does
// not name): looked up once per element type, since this runs for every input of every node
// shape inference sees.
::onnx::DataType OnnxTensorType(ir::DType dtype) {
  static const auto kTypes = [] {
    std::array<::onnx::DataType, 64> types{};
    for (int32_t t = 1; t < static_cast<int32_t>(types.size()); ++t) {
      try {
        types[static_cast<size_t>(t)] = ::onnx::Utils::DataTypeUtils::ToType(
            absl::StrCat("tensor(", ::onnx::Utils::DataTypeUtils::ToDataTypeString(t), ")"));
      } catch (const std::exception&) {
        // not a tensor element type libonnx knows
      }
    }
    return types;
  }();
  const auto t = static_cast<size_t>(dtype);
  return t < kTypes.size() ? kTypes[t] : nullptr;
}

}  // namespace

// libonnx's newest schema is current when the opset is one it knows, or when the operator
// has no newer version up to the model's opset.
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

absl::Status CheckAgainstSchema(const ::onnx::NodeProto& node, const std::string& domain,
                                int64_t opset, const std::string& label) {
  // libonnx names the default domain "" (ai.onnx), as tpc does.
  bool current = false;
  const ::onnx::OpSchema* schema = FindSchema(node.op_type(), domain, opset, &current);
  const ExtraSchema* extra = FindExtraSchema(domain, node.op_type());
  if (schema == nullptr) {
    if (extra == nullptr) return absl::OkStatus();  // the shape rules name unsupported ops
    TPC_RETURN_IF_ERROR(CheckExtraInputs(*extra, node, label));
    for (const auto& a : node.attribute()) {
      TPC_RETURN_IF_ERROR(CheckExtraAttribute(*extra, a, /*known_elsewhere=*/false, label));
    }
    return absl::OkStatus();
  }
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
  // Versions newer than libonnx's schema added an input to these (axes, dft_length).
  static const absl::flat_hash_set<std::string> kGainedAnInput = {
      "DFT",       "Pad",        "ReduceL1",  "ReduceL2",   "ReduceLogSum",   "ReduceLogSumExp",
      "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare"};
  const int most = schema->max_input() + (kGainedAnInput.contains(node.op_type()) ? 1 : 0);
  if (node.input_size() > most) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": ", node.input_size(), " inputs, the operator takes at most ", most));
  }
  for (const auto& a : node.attribute()) {
    auto it = schema->attributes().find(a.name());
    const bool known = it != schema->attributes().end();
    if (extra != nullptr) {
      TPC_RETURN_IF_ERROR(CheckExtraAttribute(*extra, a, known, label));
    } else if (!known) {
      std::vector<std::string> names;
      for (const auto& [name, attr] : schema->attributes()) names.push_back(name);
      return UnknownAttributeError(label, a.name(), std::move(names));
    }
    if (known && it->second.type != a.type()) return AttributeTypeError(label, a, it->second.type);
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
    if (current && !p.GetTypes().count(OnnxTensorType(dtype))) {
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

namespace tpc::onnx {

absl::Status CheckInputTypes(const ir::Node& node, int64_t opset) {
  return internal::CheckInputTypes(node, opset);
}

}  // namespace tpc::onnx
