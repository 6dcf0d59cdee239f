#include "tpc/plan/precision.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tpc/onnx/schema.h"
#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"

namespace tpc::plan {
namespace {

using ir::DType;

// Operators whose float inputs or outputs are f32 by definition (quantization scales):
// a half-precision plan of a quantized model is refused rather than mistyped.
const std::set<std::string> kRefused = {
    "DynamicQuantizeLinear", "QuantizeLinear",       "DequantizeLinear",
    "QLinearMatMul",         "QLinearConv",          "MatMulInteger",
    "ConvInteger",           "MatMulIntegerToFloat", "QAttention",
    "DynamicQuantizeMatMul"};

// Inputs that ONNX types as f32 whatever the data's type: (op, input index).
const std::set<std::pair<std::string, int>> kF32Inputs = {{"Resize", 2}, {"Upsample", 1}};

// Attributes whose absence means an f32 tensor (ConstantOfShape's `value`: one f32 zero):
// a half plan states the default in the plan's type.
const std::set<std::pair<std::string, std::string>> kF32DefaultValue = {
    {"ConstantOfShape", "value"}};

// Attributes naming an element type (ONNX's TensorProto codes): Cast's `to`, the
// generators' `dtype`.
const std::set<std::string> kTypeAttrs = {"to", "dtype"};

ir::TensorType WithDType(ir::TensorType t, DType d) {
  t.dtype = d;
  return t;
}

ir::Tensor Converted(const ir::Tensor& t, DType to) {
  std::string bytes(static_cast<size_t>(t.num_elements()) * 2, '\0');
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    float f;
    std::memcpy(&f, t.data() + i * 4, 4);
    const uint16_t h = to == DType::kF16 ? FloatToHalfSaturated(f) : FloatToBFloat16Saturated(f);
    std::memcpy(bytes.data() + i * 2, &h, 2);
  }
  return ir::Tensor::FromBytes(to, t.shape(), std::move(bytes));
}

// Input i of `n` through a Cast to f32 placed before it.
void CastInputToF32(ir::Graph& graph, ir::Node* n, int i) {
  ir::Value* v = n->input(i);
  ir::Node* cast =
      graph.InsertCallBefore(n, "", "Cast", {v}, {graph.UniqueName(v->name() + "/f32")},
                             {{"to", static_cast<int64_t>(DType::kF32)}});
  cast->output()->set_type(WithDType(v->type(), DType::kF32));
  cast->output()->set_sharding(v->sharding());
  n->SetInput(i, cast->output());
}

}  // namespace

absl::Status CheckConvertible(const ir::Graph& graph, DType to) {
  std::map<DType, int64_t> bytes;  // of float weights, by type
  for (const ir::Node* n : graph.nodes()) {
    if (n->kind() == ir::NodeKind::kConstant && ir::IsFloating(n->tensor().dtype())) {
      bytes[n->tensor().dtype()] += n->tensor().nbytes();
    }
  }
  if (bytes.empty()) return absl::OkStatus();
  // The type of most of the weights' bytes (a small f32 constant in an f64 model does not
  // make it an f32 one).
  const DType most = std::max_element(bytes.begin(), bytes.end(), [](const auto& a, const auto& b) {
                       return a.second < b.second;
                     })->first;
  if (most == DType::kF32 || most == to) return absl::OkStatus();  // converted, or already so
  return absl::InvalidArgumentError(absl::StrCat(
      "--dtype ", ir::DTypeName(to), ": the model's float weights are ", ir::DTypeName(most),
      ", and --dtype converts f32 ones; compile it without --dtype (as ", ir::DTypeName(most),
      ") or convert the model first"));
}

absl::Status ConvertFloatPrecision(ir::Graph& graph, DType to) {
  if (to == DType::kF32) return absl::OkStatus();
  if (to != DType::kF16 && to != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype ", ir::DTypeName(to), ": expected f32, f16 or bf16"));
  }
  for (ir::Node* n : graph.nodes()) {
    if (n->is_call() && kRefused.count(n->op_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dtype ", ir::DTypeName(to), ": ", n->Describe(),
          " is a quantized operator (its scales are f32); compile this model with --dtype f32"));
    }
  }
  std::set<std::string> f32_outputs;  // by name: a value the passes below rename keeps it
  for (ir::Value* v : graph.outputs()) {
    if (v->type().dtype == DType::kF32) f32_outputs.insert(v->name());
  }
  // Inputs: the declared f32 stays; a Cast right after it gives the graph its half copy.
  std::set<const ir::Node*> input_casts;
  for (ir::Value* in : graph.inputs()) {
    if (in->type().dtype != DType::kF32) continue;
    ir::Node* cast = graph.InsertCallAfter(in->producer(), "", "Cast", {in},
                                           {graph.UniqueName(in->name() + "/to_half")},
                                           {{"to", static_cast<int64_t>(to)}});
    ir::Value* half = cast->output();
    half->set_type(WithDType(in->type(), to));
    half->set_sharding(in->sharding());
    in->ReplaceAllUsesWith(half);
    cast->SetInput(0, in);
    input_casts.insert(cast);
  }
  for (ir::Node* n : graph.NodeVector()) {
    if (n->kind() == ir::NodeKind::kConstant) {
      // The data stays f32 (mapped); the plan writer converts it as it writes.
      ir::Value* v = n->output();
      if (v->type().dtype == DType::kF32) v->set_type(WithDType(v->type(), to));
      continue;
    }
    if (!n->is_call() || input_casts.count(n)) continue;
    for (ir::Value* out : n->outputs()) {
      if (out->type().dtype == DType::kF32) out->set_type(WithDType(out->type(), to));
    }
    for (const auto& [op, key] : kF32DefaultValue) {
      if (n->op_type() == op && n->domain().empty() && !n->attrs().count(key) &&
          n->output(0)->type().dtype == to) {
        n->attrs()[key] = Converted(ir::Tensor::FromFloat({1}, {0.0f}), to);
      }
    }
    for (auto& [key, value] : n->attrs()) {
      if (kTypeAttrs.count(key) && std::holds_alternative<int64_t>(value) &&
          std::get<int64_t>(value) == static_cast<int64_t>(DType::kF32)) {
        value = static_cast<int64_t>(to);
      }
      if (std::holds_alternative<ir::Tensor>(value) &&
          std::get<ir::Tensor>(value).dtype() == DType::kF32 &&
          std::get<ir::Tensor>(value).has_data()) {
        value = Converted(std::get<ir::Tensor>(value), to);  // ConstantOfShape's value
      }
    }
  }
  // Inputs ONNX keeps f32 get a Cast back.
  for (ir::Node* n : graph.NodeVector()) {
    if (!n->is_call()) continue;
    for (int i = 0; i < n->num_inputs(); ++i) {
      ir::Value* v = n->input(i);
      if (v == nullptr || v->type().dtype != to || !kF32Inputs.count({n->op_type(), i})) continue;
      CastInputToF32(graph, n, i);
    }
  }
  // Operators whose schema does not take `to` compute in f32: their `to` inputs go through
  // a Cast to f32, their outputs through a Cast back (under their own names).
  const int64_t opset = graph.onnx_opset();
  for (ir::Node* n : graph.NodeVector()) {
    if (!n->is_call() || !n->domain().empty() || onnx::CheckInputTypes(*n, opset).ok()) continue;
    for (int i = 0; i < n->num_inputs(); ++i) {
      ir::Value* v = n->input(i);
      if (v == nullptr || v->type().dtype != to) continue;
      CastInputToF32(graph, n, i);
    }
    for (ir::Value* out : n->outputs()) {
      if (out->type().dtype != to) continue;
      if (!out->has_uses()) {
        out->set_type(WithDType(out->type(), DType::kF32));
        continue;
      }
      const std::string name = out->name();
      graph.RenameValue(out, graph.UniqueName(name + "/f32"));
      out->set_type(WithDType(out->type(), DType::kF32));
      ir::Node* cast =
          graph.InsertCallAfter(n, "", "Cast", {out}, {name}, {{"to", static_cast<int64_t>(to)}});
      cast->output()->set_type(WithDType(out->type(), to));
      cast->output()->set_sharding(out->sharding());
      out->ReplaceAllUsesWith(cast->output());
      cast->SetInput(0, out);
    }
    TPC_RETURN_IF_ERROR(onnx::CheckInputTypes(*n, opset));
  }
  // Outputs: the original name and type, through a Cast back to f32.
  std::vector<ir::Value*> new_outputs;
  for (ir::Value* v : graph.outputs()) {
    if (!f32_outputs.count(v->name()) || v->type().dtype == DType::kF32) {
      new_outputs.push_back(v);
      continue;
    }
    const std::string name = v->name();
    graph.RenameValue(v, graph.UniqueName(name + "/half"));
    ir::Node* cast = graph.InsertCallBefore(graph.output_node(), "", "Cast", {v}, {name},
                                            {{"to", static_cast<int64_t>(DType::kF32)}});
    cast->output()->set_type(WithDType(v->type(), DType::kF32));
    cast->output()->set_sharding(v->sharding());
    new_outputs.push_back(cast->output());
  }
  graph.SetOutputs(new_outputs);
  return absl::OkStatus();
}

Tolerance DocumentedTolerance(const std::string& dtype) {
  // Measured largest errors (docs/cuda.md): f16 4e-3 on hidden states, bf16 3.5e-2.
  if (dtype == "f16") return {1e-2, 1e-2};
  if (dtype == "bf16") return {5e-2, 5e-2};
  return {};
}

}  // namespace tpc::plan
