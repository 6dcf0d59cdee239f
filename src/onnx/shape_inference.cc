// The driver of shape inference: walks the graph in order, gives constants their known
// values and runs the rule of every call (the rules live in shape_rules/).
#include "tpc/onnx/shape_inference.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "libonnx_inference.h"
#include "schema_check.h"
#include "shape_rules/rules.h"
#include "tpc/util/checked_math.h"

namespace tpc::onnx {

const ir::Tensor* InferenceContext::input_constant(int i) const {
  const ir::Value* v = node_.optional_input(i);
  if (v == nullptr || v->producer() == nullptr) return nullptr;
  const ir::Node* producer = v->producer();
  if (producer->kind() != ir::NodeKind::kConstant) return nullptr;
  return &producer->tensor();
}

absl::Status InferenceContext::Error(std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(node_.Describe(), ": ", std::string(message)));
}

namespace {

// Known value of a small integer (or bool) constant (rank 0 or 1 usually; any rank up to
// kMaxKnownValueElements elements).
void SetConstantValue(ir::Node* node) {
  ir::Value* out = node->output(0);
  out->set_known_value(std::nullopt);
  const ir::Tensor& t = node->tensor();
  // A per-rank constant (split across ranks by the partition stage) has different
  // values on every rank: nothing is known of it here.
  const bool per_rank = out->sharding() && !out->sharding()->placements.empty() &&
                        out->sharding()->placements[0].kind == ir::Placement::Kind::kShard;
  if (per_rank || !t.has_data() || !shape_rules::TracksValues(t.dtype()) ||
      t.num_elements() > kMaxKnownValueElements) {
    return;
  }
  std::vector<ir::Dim> value;
  value.reserve(static_cast<size_t>(t.num_elements()));
  for (int64_t v : t.ToInt64()) value.emplace_back(v);
  out->set_known_value(std::move(value));
}

// A type whose static dims alone hold more elements than one tensor may, or with a
// negative dim, is refused where it appears: later stages multiply dims unchecked.
absl::Status CheckStaticSize(const ir::Value& v, const std::string& where) {
  const ir::TensorType& t = v.type();
  if (!t.shape) return absl::OkStatus();
  std::vector<int64_t> dims;
  for (const ir::Dim& d : *t.shape) {
    if (d.is_static()) dims.push_back(d.value());
  }
  if (TensorBytes(dims, 1)) return absl::OkStatus();
  return TensorSizeError(dims, 1, absl::StrCat(where, ": '", v.name(), "' (", t.ToString(), ")"));
}

absl::Status InferCall(ir::Node* node, int64_t opset) {
  for (int i = 0; i < node->num_inputs(); ++i) {
    const ir::Value* in = node->input(i);
    if (in != nullptr && in->type().dtype == ir::DType::kUndefined) {
      return absl::InvalidArgumentError(
          absl::StrCat(node->Describe(), ": input ", i, " ('", in->name(), "') has no type"));
    }
  }
  TPC_RETURN_IF_ERROR(internal::CheckInputTypes(*node, opset));
  ShapeRule rule = FindShapeRule(node->domain(), node->op_type());
  // An operator of the default domain without a rule of its own: libonnx's inference.
  if (rule == nullptr && internal::HasLibOnnxInference(node->domain(), node->op_type(), opset)) {
    rule = internal::InferWithLibOnnx;
  }
  if (rule == nullptr) {
    return absl::UnimplementedError(absl::StrCat(node->Describe(), ": unsupported operator '",
                                                 node->op_type(), "' (no shape rule)"));
  }
  for (ir::Value* out : node->outputs()) {
    out->set_type(ir::TensorType());
    out->set_known_value(std::nullopt);
  }
  InferenceContext ctx(*node, opset);
  TPC_RETURN_IF_ERROR(rule(ctx));
  for (int i = 0; i < node->num_outputs(); ++i) {
    if (node->output(i)->type().dtype == ir::DType::kUndefined) {
      return absl::InternalError(absl::StrCat(node->Describe(), ": shape rule left output ", i,
                                              " ('", node->output(i)->name(), "') untyped"));
    }
    TPC_RETURN_IF_ERROR(CheckStaticSize(*node->output(i), node->Describe()));
  }
  return absl::OkStatus();
}

}  // namespace

bool CanInferShapes(std::string_view domain, std::string_view op_type, int64_t opset) {
  return FindShapeRule(domain, op_type) != nullptr ||
         internal::HasLibOnnxInference(domain, op_type, opset);
}

absl::Status InferShapes(ir::Graph& graph) {
  const int64_t opset = graph.onnx_opset();
  for (ir::Node* node : graph.nodes()) {
    switch (node->kind()) {
      case ir::NodeKind::kConstant:
        SetConstantValue(node);
        break;
      case ir::NodeKind::kCall:
        TPC_RETURN_IF_ERROR(InferCall(node, opset));
        break;
      case ir::NodeKind::kPlaceholder:
        TPC_RETURN_IF_ERROR(CheckStaticSize(*node->output(0), "graph input"));
        break;
      case ir::NodeKind::kOutput:
        break;
    }
  }
  // Values of rank 2 and more (torch lowers Pad's pads through a [2, 2] reshape) only
  // serve while inferring: the IR keeps known values for rank 0 and 1.
  for (ir::Node* node : graph.nodes()) {
    for (ir::Value* out : node->outputs()) {
      if (out->known_value().has_value() && out->type().rank() != 0 && out->type().rank() != 1) {
        out->set_known_value(std::nullopt);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status InferUntypedShapes(ir::Graph& graph) {
  // The importer calls this at every If, SplitToSequence and SequenceAt: it must not walk
  // the whole graph each time (an unrolled scan's import went quadratic). The importer's
  // graph is its inputs, then its constants, then its calls in order: the calls not yet
  // inferred are the last ones, and a constant's value, once set, stays.
  const int64_t opset = graph.onnx_opset();
  const ir::Graph::NodeRange nodes = graph.nodes();
  for (ir::Node* node : nodes) {
    if (node->kind() == ir::NodeKind::kCall) break;
    if (node->kind() == ir::NodeKind::kConstant && !node->output(0)->known_value()) {
      SetConstantValue(node);
    }
  }
  auto typed = [](const ir::Node* node) {
    for (int i = 0; i < node->num_outputs(); ++i) {
      if (node->output(i)->type().dtype != ir::DType::kUndefined) return true;
    }
    return false;
  };
  std::vector<ir::Node*> pending;
  for (auto it = nodes.end(); it != nodes.begin();) {
    ir::Node* node = *--it;
    if (node->kind() == ir::NodeKind::kConstant) break;
    if (node->kind() != ir::NodeKind::kCall) continue;
    if (typed(node)) break;
    pending.push_back(node);
  }
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
    TPC_RETURN_IF_ERROR(InferCall(*it, opset));
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx
