#include "tpc/onnx/importer.h"

#include <algorithm>
#include <filesystem>
#include <queue>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schema_check.h"
#include "sequence_split.h"
#include "subgraph_names.h"
#include "tpc/ir/parser.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/function_inliner.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/onnx/tensor_proto.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx {
namespace {

std::string CanonicalDomain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

std::string NodeLabel(const ::onnx::NodeProto& node) {
  std::string op = node.domain().empty() || node.domain() == "ai.onnx"
                       ? node.op_type()
                       : absl::StrCat(node.domain(), "::", node.op_type());
  if (!node.name().empty()) return absl::StrCat("node '", node.name(), "' (", op, ")");
  if (node.output_size() > 0)
    return absl::StrCat("node producing '", node.output(0), "' (", op, ")");
  return absl::StrCat("node (", op, ")");
}

// A dim_param: a name (`seq`), or an expression over names as tpc writes per-rank dims
// (`seq/2`) and exporters write derived ones (`past_sequence_length + sequence_length`),
// which becomes that polynomial. Anything else is an opaque name.
ir::Dim DimFromParam(const std::string& param) {
  if (param.find_first_of("+-*/") == std::string::npos) return ir::Dim::Symbol(param);
  auto parsed = ir::ParseDim(param);
  if (!parsed.ok() || parsed->is_unknown() || parsed->is_static()) return ir::Dim::Symbol(param);
  return *parsed;
}

absl::StatusOr<ir::TensorType> TypeFromProto(const ::onnx::TypeProto& type,
                                             const std::string& what) {
  if (!type.has_tensor_type()) {
    return absl::UnimplementedError(absl::StrCat(what, ": only tensor types are supported"));
  }
  const auto& tt = type.tensor_type();
  if (!ir::IsKnownOnnxDType(tt.elem_type()) || tt.elem_type() == ::onnx::TensorProto::STRING) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unsupported or missing element type ", tt.elem_type()));
  }
  ir::TensorType out;
  out.dtype = static_cast<ir::DType>(tt.elem_type());
  if (tt.has_shape()) {
    std::vector<ir::Dim> dims;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        dims.emplace_back(d.dim_value());
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        dims.push_back(DimFromParam(d.dim_param()));
      } else {
        dims.emplace_back();
      }
    }
    out.shape = std::move(dims);
  }
  return out;
}

class Importer {
 public:
  Importer(const ModelFile& model, std::string model_dir, const ImportOptions& options)
      : model_(model),
        external_(std::move(model_dir)),
        options_(options),
        graph_(std::make_unique<ir::Graph>()) {}

  absl::StatusOr<std::unique_ptr<ir::Graph>> Run() {
    const ::onnx::GraphProto& g = model_.proto.graph();
    graph_->set_name(g.name());
    TPC_RETURN_IF_ERROR(ImportOpsets());
    TPC_RETURN_IF_ERROR(ImportInputs());
    TPC_RETURN_IF_ERROR(ImportInitializers());
    TPC_ASSIGN_OR_RETURN(std::vector<::onnx::NodeProto> nodes, InlineLocalFunctions(model_.proto));
    TPC_RETURN_IF_ERROR(ImportNodes(nodes));
    TPC_RETURN_IF_ERROR(ImportOutputs());
    if (options_.infer_shapes) {
      TPC_RETURN_IF_ERROR(InferShapes(*graph_));
      TPC_RETURN_IF_ERROR(CheckDeclaredTypes());
    }
    if (options_.verify) TPC_RETURN_IF_ERROR(ir::VerifyGraph(*graph_));
    return std::move(graph_);
  }

 private:
  absl::Status Error(absl::Status status) const {
    return absl::Status(status.code(), absl::StrCat(model_.path, ": ", status.message()));
  }

  absl::Status ImportOpsets() {
    for (const auto& op : model_.proto.opset_import()) {
      graph_->opsets()[CanonicalDomain(op.domain())] = op.version();
    }
    int64_t opset = graph_->onnx_opset();
    if (opset == 0) {
      return absl::InvalidArgumentError("the model imports no opset of the default ONNX domain");
    }
    if (opset < kMinOpset || opset > kMaxOpset) {
      return absl::UnimplementedError(absl::StrCat("opset ", opset, " is not supported (tpc reads ",
                                                   kMinOpset, " to ", kMaxOpset, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status ImportInputs() {
    const ::onnx::GraphProto& g = model_.proto.graph();
    absl::flat_hash_set<std::string> initializers;
    for (const auto& t : g.initializer()) initializers.insert(t.name());
    for (const auto& in : g.input()) {
      // Before IR version 4, initializers were listed as inputs too; they are constants.
      if (initializers.contains(in.name())) continue;
      if (in.name().empty()) return absl::InvalidArgumentError("a graph input has no name");
      if (env_.contains(in.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph input '", in.name(), "' is listed twice"));
      }
      TPC_ASSIGN_OR_RETURN(ir::TensorType type,
                           TypeFromProto(in.type(), absl::StrCat("graph input '", in.name(), "'")));
      env_[in.name()] = graph_->AddPlaceholder(in.name(), std::move(type));
    }
    return absl::OkStatus();
  }

  absl::Status ImportInitializers() {
    const ::onnx::GraphProto& g = model_.proto.graph();
    for (int i = 0; i < g.initializer_size(); ++i) {
      const ::onnx::TensorProto& t = g.initializer(i);
      if (t.name().empty()) return absl::InvalidArgumentError("an initializer has no name");
      if (env_.contains(t.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer '", t.name(), "' is defined twice"));
      }
      const std::optional<ByteSpan>& raw = model_.raw_data[static_cast<size_t>(i)];
      TPC_ASSIGN_OR_RETURN(ir::Tensor tensor, TensorFromProto(t, raw, model_.file, &external_));
      env_[t.name()] = graph_->AddConstant(t.name(), std::move(tensor));
    }
    return absl::OkStatus();
  }

  // Orders nodes topologically (stable: the file's order where it is valid) and reports
  // missing inputs and cycles.
  absl::StatusOr<std::vector<int>> TopologicalOrder(const std::vector<::onnx::NodeProto>& nodes) {
    absl::flat_hash_map<std::string, int> producer;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      for (const auto& o : nodes[i].output()) {
        if (o.empty()) continue;
        if (env_.contains(o) || !producer.emplace(o, i).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              NodeLabel(nodes[i]), ": value '", o, "' is already defined (ONNX values are SSA)"));
        }
      }
    }
    std::vector<int> pending(nodes.size(), 0);
    std::vector<std::vector<int>> users(nodes.size());
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      std::set<int> deps;
      // A node holding subgraphs (an If's branches) comes after the values they read.
      std::vector<std::string> reads(nodes[i].input().begin(), nodes[i].input().end());
      const size_t inputs = reads.size();
      std::vector<std::string> outer = internal::SubgraphReads(nodes[i]);
      reads.insert(reads.end(), outer.begin(), outer.end());
      for (size_t k = 0; k < reads.size(); ++k) {
        const std::string& in = reads[k];
        if (in.empty() || env_.contains(in)) continue;
        auto it = producer.find(in);
        if (it == producer.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(NodeLabel(nodes[i]), k < inputs ? ": input '" : ": a subgraph reads '",
                           in, k < inputs ? "'" : "', which", " is not defined (no graph input, ",
                           "initializer or node output has this name)"));
        }
        deps.insert(it->second);
      }
      pending[i] = static_cast<int>(deps.size());
      for (int d : deps) users[d].push_back(i);
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      if (pending[i] == 0) ready.push(i);
    }
    std::vector<int> order;
    order.reserve(nodes.size());
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int u : users[i]) {
        if (--pending[u] == 0) ready.push(u);
      }
    }
    if (order.size() != nodes.size()) {
      std::vector<std::string> stuck;
      for (int i = 0; i < static_cast<int>(nodes.size()) && stuck.size() < 4; ++i) {
        if (pending[i] > 0) stuck.push_back(NodeLabel(nodes[i]));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("the graph has a cycle through ", absl::StrJoin(stuck, ", "),
                       nodes.size() - order.size() > stuck.size() ? ", ..." : ""));
    }
    return order;
  }

  absl::StatusOr<ir::AttrValue> ConvertAttribute(const ::onnx::NodeProto& node,
                                                 const ::onnx::AttributeProto& a) {
    using AP = ::onnx::AttributeProto;
    switch (a.type()) {
      case AP::INT:
        return ir::AttrValue(static_cast<int64_t>(a.i()));
      case AP::FLOAT:
        return ir::AttrValue(a.f());
      case AP::STRING:
        return ir::AttrValue(a.s());
      case AP::INTS:
        return ir::AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      case AP::FLOATS:
        return ir::AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
      case AP::STRINGS:
        return ir::AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
      case AP::TENSOR: {
        TPC_ASSIGN_OR_RETURN(ir::Tensor t,
                             TensorFromProto(a.t(), std::nullopt, model_.file, &external_));
        return ir::AttrValue(std::move(t));
      }
      case AP::GRAPH:
      case AP::GRAPHS:
        return absl::UnimplementedError(absl::StrCat(
            NodeLabel(node), ": attribute '", a.name(),
            "' is a subgraph; control flow is not supported (Loop and Scan never; an If only "
            "when its condition is known when compiling)"));
      default:
        return absl::UnimplementedError(
            absl::StrCat(NodeLabel(node), ": attribute '", a.name(), "' has an unsupported type, ",
                         ::onnx::AttributeProto::AttributeType_Name(a.type()),
                         a.type() == AP::SPARSE_TENSOR ? " (tpc reads dense tensors only)" : ""));
    }
  }

  // `Constant` nodes become IR constants.
  absl::Status ImportConstantNode(const ::onnx::NodeProto& node, const ir::Attributes& attrs) {
    if (node.output_size() != 1 || attrs.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(NodeLabel(node), ": a Constant needs one output and one value attribute"));
    }
    const auto& [key, value] = *attrs.begin();
    ir::Tensor tensor;
    // The schema check does not run on opsets newer than libonnx knows: the attribute's
    // type is checked here too.
    const ir::Tensor* t = std::get_if<ir::Tensor>(&value);
    const float* f = std::get_if<float>(&value);
    const auto* fs = std::get_if<std::vector<float>>(&value);
    const int64_t* i = std::get_if<int64_t>(&value);
    const auto* is = std::get_if<std::vector<int64_t>>(&value);
    if (key == "value" && t != nullptr) {
      tensor = *t;
    } else if (key == "value_float" && f != nullptr) {
      tensor = ir::Tensor::FromFloat({}, {*f});
    } else if (key == "value_floats" && fs != nullptr) {
      tensor = ir::Tensor::FromFloat({static_cast<int64_t>(fs->size())}, *fs);
    } else if (key == "value_int" && i != nullptr) {
      tensor = ir::Tensor::FromInt64({}, {*i});
    } else if (key == "value_ints" && is != nullptr) {
      tensor = ir::Tensor::FromInt64({static_cast<int64_t>(is->size())}, *is);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeLabel(node), ": Constant attribute '", key, "' is not supported or has the wrong ",
          "type (value: tensor, value_float(s): float(s), value_int(s): int(s))"));
    }
    // Constants stay ahead of every call, as initializers do, so that exporting and
    // re-importing gives the same IR.
    env_[node.output(0)] =
        first_call_ == nullptr
            ? graph_->AddConstant(node.output(0), std::move(tensor))
            : graph_->InsertConstantBefore(first_call_, node.output(0), std::move(tensor));
    return absl::OkStatus();
  }

  // `also_used`: names read outside `nodes` (a branch's outputs).
  absl::Status ImportNodes(const std::vector<::onnx::NodeProto>& nodes,
                           const std::vector<std::string>& also_used = {}) {
    TPC_ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(nodes));
    absl::flat_hash_set<std::string> graph_outputs;
    for (const auto& o : model_.proto.graph().output()) graph_outputs.insert(o.name());
    absl::flat_hash_set<std::string> consumed(also_used.begin(), also_used.end());
    for (const auto& n : nodes) {
      // Names the nodes define, not yet imported (an inlined function's `call/N/name`):
      // no fresh name may take one.
      for (const auto& o : n.output()) pending_names_.insert(o);
      for (const auto& in : n.input()) consumed.insert(in);
      for (const std::string& name : internal::SubgraphReads(n)) consumed.insert(name);
    }

    absl::flat_hash_set<std::string> kept(graph_outputs);
    kept.insert(also_used.begin(), also_used.end());
    for (int index : order) {
      const ::onnx::NodeProto& node = nodes[static_cast<size_t>(index)];
      const std::string domain = CanonicalDomain(node.domain());
      if (domain.empty() && node.op_type() == "SplitToSequence") {
        TPC_RETURN_IF_ERROR(RecordSequenceSplit(node, nodes, kept));
        continue;
      }
      if (domain.empty() && node.op_type() == "SequenceAt" && node.input_size() == 2 &&
          sequences_.contains(node.input(0))) {
        TPC_RETURN_IF_ERROR(ImportSequenceAt(node, graph_outputs, consumed));
        continue;
      }
      TPC_RETURN_IF_ERROR(ImportNode(node, graph_outputs, consumed));
    }
    return absl::OkStatus();
  }

  absl::Status ImportNode(const ::onnx::NodeProto& node,
                          const absl::flat_hash_set<std::string>& graph_outputs,
                          const absl::flat_hash_set<std::string>& consumed) {
    const std::string domain = CanonicalDomain(node.domain());
    auto opset = graph_->opsets().find(domain);
    if (opset == graph_->opsets().end()) {
      return absl::InvalidArgumentError(absl::StrCat(NodeLabel(node), ": its domain '",
                                                     node.domain(),
                                                     "' is not among the model's opset imports"));
    }
    if (domain.empty() && node.op_type() == "If") return ImportIf(node, graph_outputs);
    ir::Attributes attrs;
    for (const auto& a : node.attribute()) {
      TPC_ASSIGN_OR_RETURN(attrs[a.name()], ConvertAttribute(node, a));
    }
    TPC_RETURN_IF_ERROR(internal::CheckAgainstSchema(node, domain, opset->second, NodeLabel(node)));
    if (domain.empty() && node.op_type() == "Constant") return ImportConstantNode(node, attrs);
    std::vector<ir::Value*> inputs;
    for (const auto& in : node.input()) inputs.push_back(in.empty() ? nullptr : env_.at(in));

    // Identity, and Dropout in inference, forward their input: the value is aliased
    // unless its name must survive as a graph output.
    if (domain.empty() && (node.op_type() == "Identity" || node.op_type() == "Dropout") &&
        !inputs.empty() && inputs[0] != nullptr && !graph_outputs.contains(node.output(0))) {
      bool mask_used =
          node.output_size() > 1 && !node.output(1).empty() &&
          (consumed.contains(node.output(1)) || graph_outputs.contains(node.output(1)));
      if (!mask_used) {
        env_[node.output(0)] = inputs[0];
        return absl::OkStatus();
      }
    }

    std::vector<std::string> outputs;
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& o = node.output(i);
      // An omitted optional output still gets a value in the IR, with a fresh name.
      outputs.push_back(
          o.empty() ? graph_->UniqueName(absl::StrCat(
                          node.name().empty() ? node.op_type() : node.name(), "_unused_", i))
                    : o);
    }
    ir::Node* n = graph_->AddCall(domain, node.op_type(), std::move(inputs), outputs,
                                  std::move(attrs), node.name());
    if (first_call_ == nullptr) first_call_ = n;
    for (int i = 0; i < node.output_size(); ++i) {
      if (!node.output(i).empty()) env_[node.output(i)] = n->output(i);
    }
    return absl::OkStatus();
  }

  // An If whose condition is known when compiling (torch's TorchScript exporter writes
  // `squeeze(dim)` as If(Shape(x)[dim] == 1, Squeeze, Identity)) becomes the branch it
  // takes: that branch's nodes, its outputs under the If's names. tpc runs no control
  // flow, so an If decided by the data is refused.
  absl::Status ImportIf(const ::onnx::NodeProto& node,
                        const absl::flat_hash_set<std::string>& graph_outputs) {
    const ::onnx::GraphProto* branches[2] = {nullptr, nullptr};  // else, then
    for (const auto& a : node.attribute()) {
      if (a.type() != ::onnx::AttributeProto::GRAPH) continue;
      if (a.name() == "then_branch") branches[1] = &a.g();
      if (a.name() == "else_branch") branches[0] = &a.g();
    }
    if (node.input_size() != 1 || node.input(0).empty() || branches[0] == nullptr ||
        branches[1] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeLabel(node), ": an If needs a condition and the graphs then_branch and else_branch"));
    }
    if (!options_.infer_shapes) {
      return absl::UnimplementedError(absl::StrCat(
          NodeLabel(node), ": an If is taken apart by shape inference, which is off here"));
    }
    TPC_RETURN_IF_ERROR(InferUntypedShapes(*graph_));
    const ir::Value* cond = env_.at(node.input(0));
    const auto& known = cond->known_value();
    if (cond->type().dtype != ir::DType::kBool || (cond->type().shape && cond->type().rank() > 1)) {
      return absl::InvalidArgumentError(absl::StrCat(NodeLabel(node), ": its condition '",
                                                     node.input(0), "' is ",
                                                     cond->type().ToString(), ", not one bool"));
    }
    if (!known || known->size() != 1 || !known->front().is_static()) {
      return absl::UnimplementedError(absl::StrCat(
          NodeLabel(node), ": its condition '", node.input(0), "' (", cond->type().ToString(),
          ") is not known when compiling; tpc takes an If's branch only when it is (control "
          "flow at run time, If, Loop and Scan, is not supported)"));
    }
    const bool taken = known->front().value() != 0;
    // The branch's own names renamed apart: sibling branches, other Ifs and the graph
    // around may use the same local names (each If's scope its own).
    ::onnx::GraphProto branch = *branches[taken ? 1 : 0];
    const std::string label = absl::StrCat(
        NodeLabel(node), "'s ", branch.name().empty() ? (taken ? "then" : "else") : branch.name());
    if (branch.output_size() != node.output_size() || branch.input_size() != 0 ||
        branch.sparse_initializer_size() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, " has ", branch.output_size(), " output(s), ", branch.input_size(),
                       " input(s) and ", branch.sparse_initializer_size(),
                       " sparse initializer(s): a branch has as many outputs as its If (",
                       node.output_size(), ") and neither of the others"));
    }
    const std::string scope =
        absl::StrCat(node.name().empty() ? "If" : node.name(), "/", branches_taken_++, "/");
    internal::RenameDefinedNames(&branch,
                                 [&](const std::string& name) { return FreshName(scope + name); });
    for (const auto& t : branch.initializer()) {
      if (t.name().empty() || env_.contains(t.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": initializer '", t.name(), "' has no name or is defined twice"));
      }
      TPC_ASSIGN_OR_RETURN(ir::Tensor tensor,
                           TensorFromProto(t, std::nullopt, model_.file, &external_));
      env_[t.name()] = first_call_ == nullptr
                           ? graph_->AddConstant(t.name(), std::move(tensor))
                           : graph_->InsertConstantBefore(first_call_, t.name(), std::move(tensor));
    }
    std::vector<std::string> results;
    for (const auto& o : branch.output()) results.push_back(o.name());
    TPC_ASSIGN_OR_RETURN(std::vector<::onnx::NodeProto> nodes,
                         InlineLocalFunctions(model_.proto, branch.node(), scope));
    TPC_RETURN_IF_ERROR(ImportNodes(nodes, results));
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& name = node.output(i);
      auto it = env_.find(results[static_cast<size_t>(i)]);
      if (it == env_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": output '", results[static_cast<size_t>(i)], "' is not defined"));
      }
      if (name.empty()) continue;
      ir::Value* v = it->second;
      // A graph output keeps the If's name.
      if (graph_outputs.contains(name)) {
        ir::Node* copy = graph_->AddCall("", "Identity", {v}, {name}, {}, node.name());
        if (first_call_ == nullptr) first_call_ = copy;
        v = copy->output(0);
      }
      env_[name] = v;
    }
    return absl::OkStatus();
  }

  // A SplitToSequence is recorded, not imported: each SequenceAt of it becomes a slice.
  absl::Status RecordSequenceSplit(const ::onnx::NodeProto& node,
                                   const std::vector<::onnx::NodeProto>& nodes,
                                   const absl::flat_hash_set<std::string>& kept) {
    const std::string label = NodeLabel(node);
    if (node.input_size() < 1 || node.input(0).empty() || node.output_size() != 1 ||
        node.output(0).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": a SplitToSequence needs an input and one output"));
    }
    if (absl::Status uses = internal::CheckSequenceUses(node, nodes, kept, NodeLabel); !uses.ok()) {
      return absl::Status(uses.code(), absl::StrCat(label, ": ", uses.message()));
    }
    TPC_RETURN_IF_ERROR(
        internal::CheckAgainstSchema(node, "", graph_->onnx_opset(), NodeLabel(node)));
    if (!options_.infer_shapes) {
      return absl::UnimplementedError(absl::StrCat(
          label, ": a SplitToSequence is taken apart by shape inference, which is off here"));
    }
    TPC_RETURN_IF_ERROR(InferUntypedShapes(*graph_));
    internal::SequenceSplit s;
    s.label = label;
    s.input = node.input(0);
    s.split = node.input_size() > 1 ? node.input(1) : "";
    for (const auto& a : node.attribute()) {
      if (a.name() == "axis") s.axis = a.i();
      if (a.name() == "keepdims") s.keepdims = a.i() != 0;
    }
    const ir::TensorType& x = env_.at(s.input)->type();
    if (!x.shape) {
      return absl::UnimplementedError(
          absl::StrCat(label, ": the rank of its input '", s.input, "' is not known"));
    }
    const int64_t rank = x.rank();
    if (s.axis < -rank || s.axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": axis ", s.axis, " is out of range for rank ", rank));
    }
    if (s.axis < 0) s.axis += rank;
    const ir::Dim& dim = (*x.shape)[static_cast<size_t>(s.axis)];
    if (dim.is_static()) s.dim = dim.value();
    if (!s.split.empty()) {
      const ir::Value* split = env_.at(s.split);
      const ir::TensorType& t = split->type();
      if ((t.dtype != ir::DType::kI64 && t.dtype != ir::DType::kI32) || !t.shape || t.rank() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(label, ": its split '", s.split, "' is ",
                                                       t.ToString(),
                                                       ", not int32/int64 of rank 0 or 1"));
      }
      s.split_is_scalar = t.rank() == 0;
      s.split_is_int32 = t.dtype == ir::DType::kI32;
      const auto& known = split->known_value();
      if (known && std::all_of(known->begin(), known->end(),
                               [](const ir::Dim& d) { return d.is_static(); })) {
        s.split_values.emplace();
        for (const ir::Dim& d : *known) s.split_values->push_back(d.value());
      }
    }
    TPC_RETURN_IF_ERROR(internal::CheckSequenceSplit(s));
    sequences_[node.output(0)] = std::move(s);
    return absl::OkStatus();
  }

  // A SequenceAt of a recorded SplitToSequence, at an index known when compiling.
  absl::Status ImportSequenceAt(const ::onnx::NodeProto& node,
                                const absl::flat_hash_set<std::string>& graph_outputs,
                                const absl::flat_hash_set<std::string>& consumed) {
    const std::string label = NodeLabel(node);
    if (node.input(1).empty() || node.output_size() != 1 || node.output(0).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": a SequenceAt needs a sequence, an index and one output"));
    }
    TPC_RETURN_IF_ERROR(InferUntypedShapes(*graph_));
    const ir::Value* index = env_.at(node.input(1));
    const auto& known = index->known_value();
    if ((index->type().dtype != ir::DType::kI64 && index->type().dtype != ir::DType::kI32) ||
        !known || known->size() != 1 || !known->front().is_static()) {
      return absl::UnimplementedError(absl::StrCat(
          label, ": its index '", node.input(1), "' (", index->type().ToString(),
          ") is not an integer known when compiling; tpc has no sequence values and takes "
          "a SequenceAt only at a known index"));
    }
    auto slice = internal::SequenceAtNodes(
        sequences_.at(node.input(0)), known->front().value(), graph_->onnx_opset(), node.output(0),
        node.name().empty() ? node.output(0) : node.name(),
        [this](const std::string& base) { return FreshName(base); });
    if (!slice.ok()) {
      return absl::Status(slice.status().code(),
                          absl::StrCat(label, ": ", slice.status().message()));
    }
    for (const auto& n : *slice) TPC_RETURN_IF_ERROR(ImportNode(n, graph_outputs, consumed));
    return absl::OkStatus();
  }

  // A name no value of the model has, `base` where it is free.
  std::string FreshName(const std::string& base) {
    if (model_names_.empty()) CollectNames(model_.proto.graph(), &model_names_);
    std::string fresh = base;
    while (model_names_.contains(fresh) || env_.contains(fresh) || pending_names_.contains(fresh)) {
      fresh += "_";
    }
    model_names_.insert(fresh);
    return fresh;
  }

  // Every name `g` and its subgraphs define or read (the names a renamed one must avoid).
  static void CollectNames(const ::onnx::GraphProto& g, absl::flat_hash_set<std::string>* names) {
    for (const auto& in : g.input()) names->insert(in.name());
    for (const auto& t : g.initializer()) names->insert(t.name());
    for (const auto& n : g.node()) {
      names->insert(n.input().begin(), n.input().end());
      names->insert(n.output().begin(), n.output().end());
      for (const auto& a : n.attribute()) {
        if (a.has_g()) CollectNames(a.g(), names);
        for (const auto& sub : a.graphs()) CollectNames(sub, names);
      }
    }
  }

  absl::Status ImportOutputs() {
    std::vector<ir::Value*> outputs;
    for (const auto& o : model_.proto.graph().output()) {
      auto it = env_.find(o.name());
      if (it == env_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph output '", o.name(), "' is not produced by any node"));
      }
      outputs.push_back(it->second);
    }
    if (outputs.empty()) return absl::InvalidArgumentError("the graph has no outputs");
    graph_->SetOutputs(std::move(outputs));
    return absl::OkStatus();
  }

  // The types the model declares (value_info, outputs) must agree with what the nodes
  // produce.
  absl::Status CheckDeclared(const ::onnx::ValueInfoProto& info, bool is_output) {
    auto it = env_.find(info.name());
    if (it == env_.end() || !info.type().has_tensor_type()) return absl::OkStatus();
    ir::Value* v = it->second;
    auto declared = TypeFromProto(info.type(), absl::StrCat("value '", info.name(), "'"));
    if (!declared.ok()) return absl::OkStatus();  // an unusable declaration says nothing
    const ir::TensorType& inferred = v->type();
    std::string where = v->producer()->is_call() ? v->producer()->Describe()
                                                 : ir::NodeKindName(v->producer()->kind());
    if (declared->dtype != inferred.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "type mismatch: value '", info.name(), "' is declared ", ir::DTypeName(declared->dtype),
          " but ", where, " produces ", ir::DTypeName(inferred.dtype)));
    }
    if (declared->shape && inferred.shape) {
      const auto& a = *declared->shape;
      const auto& b = *inferred.shape;
      bool conflict = a.size() != b.size();
      for (size_t i = 0; !conflict && i < a.size(); ++i) {
        conflict = a[i].is_static() && b[i].is_static() && a[i].value() != b[i].value();
      }
      // A constant's data is what the model computes: a value_info that gives it another
      // shape is wrong (onnxruntime-genai's builder declares its [1] constants as scalars)
      // and, as onnxruntime does, the data wins.
      if (conflict && v->producer()->kind() == ir::NodeKind::kConstant && !is_output) {
        return absl::OkStatus();
      }
      if (conflict) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape mismatch: value '", info.name(), "' is declared ",
                         ir::DimsToString(a), " but ", where, " produces ", ir::DimsToString(b)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckDeclaredTypes() {
    const ::onnx::GraphProto& g = model_.proto.graph();
    for (const auto& info : g.value_info()) TPC_RETURN_IF_ERROR(CheckDeclared(info, false));
    for (const auto& info : g.output()) TPC_RETURN_IF_ERROR(CheckDeclared(info, true));
    return absl::OkStatus();
  }

  const ModelFile& model_;
  ExternalDataFiles external_;
  ImportOptions options_;
  std::unique_ptr<ir::Graph> graph_;
  absl::flat_hash_map<std::string, ir::Value*> env_;  // ONNX name → IR value (with aliases)
  ir::Node* first_call_ = nullptr;
  int branches_taken_ = 0;  // Ifs taken apart so far
  // SplitToSequence outputs, lowered at their SequenceAt uses.
  absl::flat_hash_map<std::string, internal::SequenceSplit> sequences_;
  absl::flat_hash_set<std::string> model_names_;    // CollectNames of the model, once needed
  absl::flat_hash_set<std::string> pending_names_;  // outputs of nodes ImportNodes was given

 public:
  absl::StatusOr<std::unique_ptr<ir::Graph>> RunWithContext() {
    auto result = Run();
    if (!result.ok()) return Error(result.status());
    return result;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Graph>> ImportModelFile(const ModelFile& model,
                                                           const std::string& model_dir,
                                                           const ImportOptions& options) {
  Importer importer(model, model_dir, options);
  return importer.RunWithContext();
}

absl::StatusOr<std::unique_ptr<ir::Graph>> ImportModel(const std::string& path,
                                                       const ImportOptions& options) {
  return CatchExceptions(path, [&]() -> absl::StatusOr<std::unique_ptr<ir::Graph>> {
    TPC_ASSIGN_OR_RETURN(ModelFile model, ReadModelFile(path));
    std::string dir = std::filesystem::path(path).parent_path().string();
    return ImportModelFile(model, dir, options);
  });
}

}  // namespace tpc::onnx
