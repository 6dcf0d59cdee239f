// The shape-inference fallback: an operator of the default domain with no shape rule of its
// own is inferred by libonnx's inference function for its schema. tpc's types go in as
// TypeProtos (a symbolic dim as a dim_param holding its text), constant inputs as their data
// and known integer values as symbolic inputs; what comes back is read into tpc's types, a
// dim_param that names an input's dim becoming that dim again.
#include "libonnx_inference.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include "proto_convert.h"
#include "schema_check.h"
#include "tpc/ir/dtype.h"
#include "tpc/onnx/tensor_proto.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx::internal {
namespace {

// Operators whose versions after opset 17 (libonnx 1.12's newest) compute output shapes that
// the older schema does not (new attributes or inputs that change the dims: Resize's `axes`,
// AveragePool's `dilations`, DFT's `axis` input, ...). For these at a newer opset only the
// element type and the rank of libonnx's answer are kept. Every other operator changed after
// 17 only in the element types it accepts (opset 22 added bfloat16 to most), so libonnx's
// older schema still gives the right shapes.
bool ShapesChangedAfter17(const std::string& op) {
  static const std::set<std::string> kChanged = {
      "AveragePool", "DFT", "DequantizeLinear", "GridSample", "LpPool", "QuantizeLinear", "Resize",
  };
  return kChanged.count(op) > 0;
}

class LibOnnxContext final : public ::onnx::InferenceContext {
 public:
  explicit LibOnnxContext(const tpc::onnx::InferenceContext& ctx) : ctx_(ctx) {
    const ir::Node& node = ctx.node();
    inputs_.resize(static_cast<size_t>(node.num_inputs()));
    for (int i = 0; i < node.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      auto type = std::make_unique<::onnx::TypeProto>();
      SetType(ctx.input_type(i), type.get());
      inputs_[static_cast<size_t>(i)] = std::move(type);
    }
    outputs_.resize(static_cast<size_t>(node.num_outputs()));
  }

  absl::Status ConvertAttributes() {
    for (const auto& [name, value] : ctx_.node().attrs()) {
      TPC_RETURN_IF_ERROR(SetAttribute(name, value, &attrs_[name]));
    }
    return absl::OkStatus();
  }

  const ::onnx::AttributeProto* getAttribute(const std::string& name) const override {
    auto it = attrs_.find(name);
    return it == attrs_.end() ? nullptr : &it->second;
  }
  size_t getNumInputs() const override { return inputs_.size(); }
  const ::onnx::TypeProto* getInputType(size_t i) const override {
    return i < inputs_.size() ? inputs_[i].get() : nullptr;
  }
  // A constant input's data, or an integer input whose value is known and static (a shape
  // computed from static dims).
  const ::onnx::TensorProto* getInputData(size_t i) const override {
    if (i >= inputs_.size() || inputs_[i] == nullptr) return nullptr;
    auto cached = data_.find(i);
    if (cached != data_.end()) return cached->second.get();
    std::unique_ptr<::onnx::TensorProto> proto;
    const int index = static_cast<int>(i);
    if (const ir::Tensor* t = ctx_.input_constant(index); t != nullptr && t->has_data()) {
      proto = std::make_unique<::onnx::TensorProto>(TensorToProto(*t, ""));
    } else if (const auto& value = ctx_.input_value(index);
               value && ctx_.input_type(index).dtype == ir::DType::kI64) {
      std::vector<int64_t> ints;
      for (const ir::Dim& d : *value) {
        if (!d.is_static()) break;
        ints.push_back(d.value());
      }
      const auto& shape = ctx_.input_type(index).shape;
      if (ints.size() == value->size() && shape && shape->size() <= 1) {
        std::vector<int64_t> dims;
        if (shape->size() == 1) dims.push_back(static_cast<int64_t>(ints.size()));
        proto = std::make_unique<::onnx::TensorProto>(
            TensorToProto(ir::Tensor::FromInt64(dims, ints), ""));
      }
    }
    return (data_[i] = std::move(proto)).get();
  }
  size_t getNumOutputs() const override { return outputs_.size(); }
  ::onnx::TypeProto* getOutputType(size_t i) override {
    return i < outputs_.size() ? &outputs_[i] : nullptr;
  }
  ::onnx::GraphInferencer* getGraphAttributeInferencer(const std::string&) override {
    return nullptr;  // subgraph attributes are refused at import
  }
  const ::onnx::SparseTensorProto* getInputSparseData(size_t) const override { return nullptr; }
  // A known integer value as the dims libonnx's data propagation would give.
  const ::onnx::TensorShapeProto* getSymbolicInput(size_t i) const override {
    if (i >= inputs_.size() || inputs_[i] == nullptr) return nullptr;
    auto cached = symbolic_.find(i);
    if (cached != symbolic_.end()) return cached->second.get();
    std::unique_ptr<::onnx::TensorShapeProto> proto;
    if (const auto& value = ctx_.input_value(static_cast<int>(i)); value) {
      proto = std::make_unique<::onnx::TensorShapeProto>();
      for (const ir::Dim& d : *value) {
        auto* dim = proto->add_dim();
        if (d.is_static()) {
          dim->set_dim_value(d.value());
        } else if (!d.is_unknown()) {
          dim->set_dim_param(d.ToString());
        }
      }
    }
    return (symbolic_[i] = std::move(proto)).get();
  }

  const ::onnx::TypeProto& output(int i) const { return outputs_[static_cast<size_t>(i)]; }

 private:
  const tpc::onnx::InferenceContext& ctx_;
  std::map<std::string, ::onnx::AttributeProto> attrs_;
  std::vector<std::unique_ptr<::onnx::TypeProto>> inputs_;  // null: omitted input
  std::vector<::onnx::TypeProto> outputs_;
  mutable std::map<size_t, std::unique_ptr<::onnx::TensorProto>> data_;
  mutable std::map<size_t, std::unique_ptr<::onnx::TensorShapeProto>> symbolic_;
};

}  // namespace

bool HasLibOnnxInference(std::string_view domain, std::string_view op_type, int64_t opset) {
  if (!domain.empty() && domain != "ai.onnx") return false;
  bool current = false;
  const ::onnx::OpSchema* schema = FindSchema(std::string(op_type), "", opset, &current);
  return schema != nullptr && schema->has_type_and_shape_inference_function();
}

absl::Status InferWithLibOnnx(tpc::onnx::InferenceContext& ctx) {
  const ir::Node& node = ctx.node();
  bool current = false;
  const ::onnx::OpSchema* schema = FindSchema(node.op_type(), "", ctx.opset(), &current);
  if (schema == nullptr || !schema->has_type_and_shape_inference_function()) {
    return absl::UnimplementedError(
        absl::StrCat(node.Describe(), ": unsupported operator '", node.op_type(),
                     "' (no shape rule, and libonnx has no shape inference for it)"));
  }
  LibOnnxContext lctx(ctx);
  TPC_RETURN_IF_ERROR(lctx.ConvertAttributes());
  try {
    schema->GetTypeAndShapeInferenceFunction()(lctx);
  } catch (const std::exception& e) {
    return ctx.Error(absl::StrCat("shape inference (libonnx): ", e.what()));
  }
  // An input's dim written as a dim_param reads back as that dim.
  std::map<std::string, ir::Dim> symbols;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || !ctx.input_type(i).shape) continue;
    for (const ir::Dim& d : *ctx.input_type(i).shape) {
      if (!d.is_static() && !d.is_unknown()) symbols.emplace(d.ToString(), d);
    }
  }
  const bool keep_dims = current || !ShapesChangedAfter17(node.op_type());
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ::onnx::TypeProto& type = lctx.output(i);
    const int32_t elem = type.has_tensor_type() ? type.tensor_type().elem_type() : 0;
    if (elem == 0 || !ir::IsKnownOnnxDType(elem)) {
      // An omitted optional output that libonnx leaves alone still needs a type in the IR.
      const char* kind = type.has_sequence_type()   ? "a sequence"
                         : type.has_optional_type() ? "an optional"
                         : type.has_map_type()      ? "a map"
                         : elem != 0                ? "a tensor of an element type tpc lacks"
                                                    : "no type";
      return ctx.Error(absl::StrCat("shape inference (libonnx) gives output ", i, " ", kind,
                                    ": tpc handles tensors of its element types only"));
    }
    ir::TensorType out;
    out.dtype = static_cast<ir::DType>(elem);
    if (type.tensor_type().has_shape()) {
      std::vector<ir::Dim> dims;
      for (const auto& d : type.tensor_type().shape().dim()) {
        if (keep_dims && d.has_dim_value()) {
          dims.emplace_back(d.dim_value());
        } else if (keep_dims && d.has_dim_param()) {
          auto it = symbols.find(d.dim_param());
          dims.push_back(it == symbols.end() ? ir::Dim::Unknown() : it->second);
        } else {
          dims.push_back(ir::Dim::Unknown());
        }
      }
      out.shape = std::move(dims);
    }
    ctx.set_output_type(i, std::move(out));
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::internal
