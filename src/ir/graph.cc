#include "tpc/ir/graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tpc/util/status_macros.h"

namespace tpc::ir {

const char* NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kPlaceholder:
      return "placeholder";
    case NodeKind::kConstant:
      return "constant";
    case NodeKind::kCall:
      return "call";
    case NodeKind::kOutput:
      return "output";
  }
  return "?";
}

// ---------------------------------------------------------------- Value

void Value::ReplaceAllUsesWith(Value* other) {
  TPC_CHECK(other != this);
  std::vector<Use> uses = uses_;
  for (const Use& u : uses) u.user->SetInput(u.index, other);
}

// ---------------------------------------------------------------- Node

void Node::SetInput(int i, Value* v) {
  Value*& slot = inputs_[static_cast<size_t>(i)];
  if (slot == v) return;
  if (slot != nullptr) {
    auto& uses = slot->uses_;
    auto it = std::find(uses.begin(), uses.end(), Use{this, i});
    TPC_CHECK(it != uses.end());
    uses.erase(it);
  }
  slot = v;
  if (v != nullptr) v->uses_.push_back({this, i});
}

void Node::AddInput(Value* v) {
  inputs_.push_back(nullptr);
  SetInput(num_inputs() - 1, v);
}

void Node::TruncateInputs(int n) {
  for (int i = num_inputs() - 1; i >= n; --i) {
    SetInput(i, nullptr);
    inputs_.pop_back();
  }
}

std::vector<Value*> Node::outputs() const {
  std::vector<Value*> out;
  out.reserve(outputs_.size());
  for (const auto& v : outputs_) out.push_back(v.get());
  return out;
}

int64_t Node::attr_int(const std::string& key, int64_t def) const {
  auto it = attrs_.find(key);
  if (it == attrs_.end()) return def;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  return def;
}

float Node::attr_float(const std::string& key, float def) const {
  auto it = attrs_.find(key);
  if (it == attrs_.end()) return def;
  if (const auto* v = std::get_if<float>(&it->second)) return *v;
  return def;
}

std::string Node::attr_string(const std::string& key, const std::string& def) const {
  auto it = attrs_.find(key);
  if (it == attrs_.end()) return def;
  if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
  return def;
}

std::vector<int64_t> Node::attr_ints(const std::string& key) const {
  auto it = attrs_.find(key);
  if (it == attrs_.end()) return {};
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return {};
}

std::string Node::Describe() const {
  if (kind_ == NodeKind::kCall) {
    std::string op = domain_.empty() ? op_type_ : absl::StrCat(domain_, "::", op_type_);
    if (!name_.empty()) return absl::StrCat("node '", name_, "' (", op, ")");
    if (!outputs_.empty())
      return absl::StrCat("node producing '", outputs_[0]->name(), "' (", op, ")");
    return absl::StrCat("node (", op, ")");
  }
  if (kind_ == NodeKind::kOutput) return "graph output";
  return absl::StrCat(std::string(NodeKindName(kind_)), " '",
                      outputs_.empty() ? "" : outputs_[0]->name(), "'");
}

// ---------------------------------------------------------------- Graph

int64_t Graph::onnx_opset() const {
  auto it = opsets_.find("");
  return it == opsets_.end() ? 0 : it->second;
}

std::vector<Node*> Graph::NodeVector() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Value*> Graph::inputs() const {
  std::vector<Value*> out;
  for (const auto& n : nodes_) {
    if (n->kind() == NodeKind::kPlaceholder) out.push_back(n->output(0));
  }
  return out;
}

std::vector<Value*> Graph::outputs() const {
  return output_node_ == nullptr ? std::vector<Value*>{} : output_node_->inputs();
}

Node* Graph::output_node() const { return output_node_; }

Node* Graph::NewNode(NodeKind kind, NodeList::iterator pos) {
  auto it = nodes_.insert(pos, std::unique_ptr<Node>(new Node(this, kind)));
  (*it)->self_ = it;
  return it->get();
}

Value* Graph::NewOutput(Node* node, std::string name) {
  TPC_CHECK(values_by_name_.find(name) == values_by_name_.end());
  int index = node->num_outputs();
  node->outputs_.push_back(std::unique_ptr<Value>(new Value(name, node, index)));
  Value* v = node->outputs_.back().get();
  values_by_name_[v->name()] = v;
  return v;
}

Value* Graph::AddPlaceholder(std::string name, TensorType type) {
  auto pos = output_node_ != nullptr ? output_node_->self_ : nodes_.end();
  Node* n = NewNode(NodeKind::kPlaceholder, pos);
  Value* v = NewOutput(n, std::move(name));
  v->set_type(std::move(type));
  return v;
}

Value* Graph::AddConstant(std::string name, Tensor tensor) {
  auto pos = output_node_ != nullptr ? output_node_->self_ : nodes_.end();
  Node* n = NewNode(NodeKind::kConstant, pos);
  Value* v = NewOutput(n, std::move(name));
  std::vector<Dim> dims(tensor.shape().begin(), tensor.shape().end());
  v->set_type(TensorType(tensor.dtype(), std::move(dims)));
  n->set_tensor(std::move(tensor));
  return v;
}

Node* Graph::AddCall(std::string domain, std::string op_type, std::vector<Value*> inputs,
                     std::vector<std::string> output_names, Attributes attrs,
                     std::string node_name) {
  auto pos = output_node_ != nullptr ? output_node_->self_ : nodes_.end();
  Node* n = NewNode(NodeKind::kCall, pos);
  n->domain_ = std::move(domain);
  n->op_type_ = std::move(op_type);
  n->name_ = std::move(node_name);
  n->attrs_ = std::move(attrs);
  for (Value* v : inputs) n->AddInput(v);
  for (auto& name : output_names) NewOutput(n, std::move(name));
  return n;
}

Node* Graph::SetOutputs(std::vector<Value*> outputs) {
  if (output_node_ == nullptr) output_node_ = NewNode(NodeKind::kOutput, nodes_.end());
  output_node_->TruncateInputs(0);
  for (Value* v : outputs) output_node_->AddInput(v);
  return output_node_;
}

Node* Graph::InsertCallBefore(Node* pos, std::string domain, std::string op_type,
                              std::vector<Value*> inputs, std::vector<std::string> output_names,
                              Attributes attrs, std::string node_name) {
  TPC_CHECK(pos->graph_ == this);
  Node* n = NewNode(NodeKind::kCall, pos->self_);
  n->domain_ = std::move(domain);
  n->op_type_ = std::move(op_type);
  n->name_ = std::move(node_name);
  n->attrs_ = std::move(attrs);
  for (Value* v : inputs) n->AddInput(v);
  for (auto& name : output_names) NewOutput(n, std::move(name));
  return n;
}

Node* Graph::InsertCallAfter(Node* pos, std::string domain, std::string op_type,
                             std::vector<Value*> inputs, std::vector<std::string> output_names,
                             Attributes attrs, std::string node_name) {
  TPC_CHECK(pos->graph_ == this && pos != output_node_);
  Node* next = std::next(pos->self_)->get();
  return InsertCallBefore(next, std::move(domain), std::move(op_type), std::move(inputs),
                          std::move(output_names), std::move(attrs), std::move(node_name));
}

Value* Graph::InsertConstantBefore(Node* pos, std::string name, Tensor tensor) {
  TPC_CHECK(pos->graph_ == this);
  Node* n = NewNode(NodeKind::kConstant, pos->self_);
  Value* v = NewOutput(n, std::move(name));
  std::vector<Dim> dims(tensor.shape().begin(), tensor.shape().end());
  v->set_type(TensorType(tensor.dtype(), std::move(dims)));
  n->set_tensor(std::move(tensor));
  return v;
}

Value* Graph::CloneConstant(Node* constant) {
  TPC_CHECK(constant->kind() == NodeKind::kConstant);
  Node* next = std::next(constant->self_)->get();
  Value* original = constant->output(0);
  Value* v = InsertConstantBefore(next, UniqueName(original->name()), constant->tensor());
  v->set_type(original->type());
  v->set_known_value(original->known_value());
  v->set_sharding(original->sharding());
  return v;
}

void Graph::Erase(Node* node) {
  TPC_CHECK(node->graph_ == this);
  for (const auto& out : node->outputs_) TPC_CHECK(!out->has_uses());
  node->TruncateInputs(0);
  for (const auto& out : node->outputs_) values_by_name_.erase(out->name());
  if (node == output_node_) output_node_ = nullptr;
  nodes_.erase(node->self_);
}

void Graph::MoveBefore(Node* node, Node* pos) {
  TPC_CHECK(node->graph_ == this && pos->graph_ == this);
  nodes_.splice(pos->self_, nodes_, node->self_);
}

void Graph::RenameValue(Value* v, std::string name) {
  TPC_CHECK(v->producer()->graph_ == this);
  if (name == v->name_) return;
  TPC_CHECK(values_by_name_.find(name) == values_by_name_.end());
  values_by_name_.erase(v->name_);
  v->name_ = std::move(name);
  values_by_name_[v->name_] = v;
}

Value* Graph::FindValue(std::string_view name) const {
  auto it = values_by_name_.find(std::string(name));
  return it == values_by_name_.end() ? nullptr : it->second;
}

std::string Graph::UniqueName(std::string_view base) const {
  if (!base.empty() && FindValue(base) == nullptr) return std::string(base);
  for (int i = 1;; ++i) {
    std::string candidate = absl::StrCat(std::string(base), ".", i);
    if (FindValue(candidate) == nullptr) return candidate;
  }
}

bool Graph::HasDataSizedDim() const {
  for (const Node* node : nodes()) {
    for (const Value* v : node->outputs()) {
      if (!v->type().shape) continue;
      for (const Dim& d : *v->type().shape) {
        if (d.is_sized_by_data()) return true;
      }
    }
  }
  return false;
}

}  // namespace tpc::ir
