// The FX-like graph: a list of nodes in topological order. A node is a `placeholder`
// (graph input), a `constant` (initializer), a `call` (an operator) or the single
// `output`. Values are SSA: each is produced by exactly one node (nodes may produce
// several) and knows its uses.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tpc/ir/attribute.h"
#include "tpc/ir/sharding.h"
#include "tpc/ir/tensor.h"
#include "tpc/ir/tensor_type.h"

namespace tpc::ir {

class Graph;
class Node;

enum class NodeKind { kPlaceholder, kConstant, kCall, kOutput };
const char* NodeKindName(NodeKind kind);

// One use of a value: input `index` of `user`.
struct Use {
  Node* user;
  int index;
  bool operator==(const Use&) const = default;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  Node* producer() const { return producer_; }
  // Position among the producer's outputs.
  int index() const { return index_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }

  TensorType& type() { return type_; }
  const TensorType& type() const { return type_; }
  void set_type(TensorType t) { type_ = std::move(t); }

  // The sharding slot; empty until the shard stage fills it.
  const std::optional<Sharding>& sharding() const { return sharding_; }
  void set_sharding(std::optional<Sharding> s) { sharding_ = std::move(s); }

  // For small integer tensors (shape computations): the element values as dims, when
  // shape inference could evaluate them (`Shape(x)` of `f32[batch, seq]` is
  // `[batch, seq]`). Empty when not known.
  const std::optional<std::vector<Dim>>& known_value() const { return known_value_; }
  void set_known_value(std::optional<std::vector<Dim>> v) { known_value_ = std::move(v); }

  // Every use of this value now uses `other` instead.
  void ReplaceAllUsesWith(Value* other);

 private:
  friend class Graph;
  friend class Node;
  Value(std::string name, Node* producer, int index)
      : name_(std::move(name)), producer_(producer), index_(index) {}

  std::string name_;
  Node* producer_;
  int index_;
  TensorType type_;
  std::optional<Sharding> sharding_;
  std::optional<std::vector<Dim>> known_value_;
  std::vector<Use> uses_;
};

class Node {
 public:
  NodeKind kind() const { return kind_; }
  bool is_call() const { return kind_ == NodeKind::kCall; }
  Graph* graph() const { return graph_; }

  // ONNX node name (may be empty); calls only.
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  // "" is the default ONNX domain (ai.onnx).
  const std::string& domain() const { return domain_; }
  const std::string& op_type() const { return op_type_; }

  // Inputs; an omitted optional input is nullptr.
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // Input i if present (not omitted and within range), else nullptr.
  Value* optional_input(int i) const {
    return i < num_inputs() ? inputs_[static_cast<size_t>(i)] : nullptr;
  }
  void SetInput(int i, Value* v);
  void AddInput(Value* v);
  // Drops trailing inputs from `n` on.
  void TruncateInputs(int n);

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  Value* output(int i = 0) const { return outputs_[static_cast<size_t>(i)].get(); }
  std::vector<Value*> outputs() const;

  Attributes& attrs() { return attrs_; }
  const Attributes& attrs() const { return attrs_; }
  bool has_attr(const std::string& key) const { return attrs_.count(key) > 0; }
  // Typed attribute lookups with a default.
  int64_t attr_int(const std::string& key, int64_t def) const;
  float attr_float(const std::string& key, float def) const;
  std::string attr_string(const std::string& key, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;

  // Constant nodes: the data of the single output.
  const Tensor& tensor() const { return tensor_; }
  void set_tensor(Tensor t) { tensor_ = std::move(t); }

  // `"/h.0/attn/MatMul" (MatMul)` or the output name for non-calls; for messages.
  std::string Describe() const;

 private:
  friend class Graph;
  Node(Graph* g, NodeKind k) : graph_(g), kind_(k) {}

  Graph* graph_;
  NodeKind kind_;
  std::string name_;
  std::string domain_;
  std::string op_type_;
  std::vector<Value*> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
  Attributes attrs_;
  Tensor tensor_;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

class Graph {
 public:
  using NodeList = std::list<std::unique_ptr<Node>>;

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  // Opset per domain ("" is ai.onnx).
  std::map<std::string, int64_t>& opsets() { return opsets_; }
  const std::map<std::string, int64_t>& opsets() const { return opsets_; }
  int64_t onnx_opset() const;

  // Nodes in order. Iterate with `for (Node* n : graph.nodes())`.
  class NodeRange {
   public:
    class iterator {
     public:
      explicit iterator(NodeList::const_iterator it) : it_(it) {}
      Node* operator*() const { return it_->get(); }
      iterator& operator++() {
        ++it_;
        return *this;
      }
      iterator& operator--() {
        --it_;
        return *this;
      }
      bool operator!=(const iterator& o) const { return it_ != o.it_; }
      bool operator==(const iterator& o) const { return it_ == o.it_; }

     private:
      NodeList::const_iterator it_;
    };
    explicit NodeRange(const NodeList* l) : list_(l) {}
    iterator begin() const { return iterator(list_->begin()); }
    iterator end() const { return iterator(list_->end()); }
    size_t size() const { return list_->size(); }

   private:
    const NodeList* list_;
  };
  NodeRange nodes() const { return NodeRange(&nodes_); }
  // Nodes as a snapshot, safe to iterate while editing.
  std::vector<Node*> NodeVector() const;

  std::vector<Value*> inputs() const;   // placeholder outputs, in order
  std::vector<Value*> outputs() const;  // inputs of the output node
  Node* output_node() const;

  // ---- Building (appends at the end, before the output node if there is one) ----
  Value* AddPlaceholder(std::string name, TensorType type);
  Value* AddConstant(std::string name, Tensor tensor);
  // A call with `num_outputs` outputs named `output_names` (must be that many).
  Node* AddCall(std::string domain, std::string op_type, std::vector<Value*> inputs,
                std::vector<std::string> output_names, Attributes attrs = {},
                std::string node_name = "");
  Node* SetOutputs(std::vector<Value*> outputs);

  // ---- Editing ----
  // Creates a call placed immediately before / after `pos`.
  Node* InsertCallBefore(Node* pos, std::string domain, std::string op_type,
                         std::vector<Value*> inputs, std::vector<std::string> output_names,
                         Attributes attrs = {}, std::string node_name = "");
  Node* InsertCallAfter(Node* pos, std::string domain, std::string op_type,
                        std::vector<Value*> inputs, std::vector<std::string> output_names,
                        Attributes attrs = {}, std::string node_name = "");
  // A constant placed immediately before `pos`.
  Value* InsertConstantBefore(Node* pos, std::string name, Tensor tensor);
  // A new constant node with the same data (shared, not copied) and type, placed right
  // after `constant`, with a fresh name derived from the original.
  Value* CloneConstant(Node* constant);
  // Removes `node`; its outputs must have no uses left.
  void Erase(Node* node);
  // Moves `node` to just before `pos`.
  void MoveBefore(Node* node, Node* pos);
  // Gives `v` the name `name`, which must be unused.
  void RenameValue(Value* v, std::string name);

  // ---- Names ----
  Value* FindValue(std::string_view name) const;
  // A name not used by any value yet, `base` itself when free, else `base.1`, `base.2`, ...
  std::string UniqueName(std::string_view base) const;

  // Whether a value of the graph has a dim its data sizes (Dim::SizedByData: NonZero's
  // count, Compress's selection, and dims computed from them).
  bool HasDataSizedDim() const;

 private:
  Node* NewNode(NodeKind kind, NodeList::iterator pos);
  Value* NewOutput(Node* node, std::string name);

  std::string name_;
  std::map<std::string, int64_t> opsets_;
  NodeList nodes_;
  absl::flat_hash_map<std::string, Value*> values_by_name_;
  Node* output_node_ = nullptr;
};

}  // namespace tpc::ir
