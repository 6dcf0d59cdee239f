#include "rewriter.h"

#include "absl/strings/str_cat.h"

namespace tpc::partition::internal {

ir::Node* Rewriter::FirstCall() {
  for (ir::Node* n : graph_.nodes()) {
    if (n->kind() == ir::NodeKind::kCall || n->kind() == ir::NodeKind::kOutput) return n;
  }
  return nullptr;
}

ir::Value* Rewriter::Constant(const std::string& base, ir::Tensor t) {
  ir::Node* first = FirstCall();
  ir::Value* v = first != nullptr
                     ? graph_.InsertConstantBefore(first, graph_.UniqueName(base), std::move(t))
                     : graph_.AddConstant(graph_.UniqueName(base), std::move(t));
  v->set_sharding(ir::Sharding{{ir::Placement::Replicate()}});
  return v;
}

ir::Value* Rewriter::Int64s(const std::string& base, const std::vector<int64_t>& values,
                            bool scalar) {
  std::vector<int64_t> shape;
  if (!scalar) shape.push_back(static_cast<int64_t>(values.size()));
  ir::Value* v = Constant(base, ir::Tensor::FromInt64(shape, values));
  if (values.size() <= 64) {
    std::vector<ir::Dim> known(values.begin(), values.end());
    v->set_known_value(std::move(known));
  }
  return v;
}

ir::Value* Rewriter::Scalar(const std::string& base, ir::DType dtype, double value) {
  return Constant(base, ir::Tensor::FromDoubles(dtype, {}, {value}));
}

ir::Value* Rewriter::PerRank(const std::string& base, ir::Tensor table) {
  ir::Value* v = Constant(base, table);
  std::vector<ir::Dim> local(table.shape().begin(), table.shape().end());
  local[0] = ir::Dim(table.shape()[0] / n_);
  v->set_type(ir::TensorType(table.dtype(), std::move(local)));
  v->set_sharding(ir::Sharding{{ir::Placement::Shard(0)}});
  return v;
}

ir::Value* Rewriter::Op(ir::Node* before, const std::string& op, std::vector<ir::Value*> inputs,
                        ir::TensorType type, const ir::Placement& placement, ir::Attributes attrs,
                        const std::string& domain) {
  const std::string name = graph_.UniqueName(absl::StrCat("tp/", op));
  ir::Node* n = graph_.InsertCallBefore(before, domain, op, std::move(inputs), {name},
                                        std::move(attrs), name);
  n->output(0)->set_type(std::move(type));
  n->output(0)->set_sharding(ir::Sharding{{placement}});
  if (domain == kTpcDomain) UseTpcDomain();
  return n->output(0);
}

ir::Value* Rewriter::Unsqueeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes,
                               ir::TensorType type, const ir::Placement& p) {
  if (graph_.onnx_opset() >= 13) {
    return Op(before, "Unsqueeze", {x, Int64s("tp/axes", axes)}, std::move(type), p);
  }
  return Op(before, "Unsqueeze", {x}, std::move(type), p, {{"axes", axes}});
}

ir::Value* Rewriter::Squeeze(ir::Node* before, ir::Value* x, std::vector<int64_t> axes,
                             ir::TensorType type, const ir::Placement& p) {
  if (graph_.onnx_opset() >= 13) {
    return Op(before, "Squeeze", {x, Int64s("tp/axes", axes)}, std::move(type), p);
  }
  return Op(before, "Squeeze", {x}, std::move(type), p, {{"axes", axes}});
}

ir::Value* Rewriter::Reduce(ir::Node* before, const std::string& op, ir::Value* x,
                            std::vector<int64_t> axes, bool keepdims, ir::TensorType type,
                            const ir::Placement& p) {
  // Axes became an input: ReduceSum at opset 13, the other reductions at 18.
  const int64_t since = op == "ReduceSum" ? 13 : 18;
  ir::Attributes attrs = {{"keepdims", static_cast<int64_t>(keepdims ? 1 : 0)}};
  if (axes.empty()) return Op(before, op, {x}, std::move(type), p, std::move(attrs));  // all axes
  if (graph_.onnx_opset() >= since) {
    return Op(before, op, {x, Int64s("tp/axes", axes)}, std::move(type), p, std::move(attrs));
  }
  attrs["axes"] = std::move(axes);
  return Op(before, op, {x}, std::move(type), p, std::move(attrs));
}

ir::Value* Rewriter::AllReduce(ir::Node* before, ir::Value* x, ir::ReduceOp op) {
  const ir::TensorType type = x->type();
  ir::Value* out = factory_.all_reduce(graph_, before, x, op);
  out->set_type(type);
  out->set_sharding(ir::Sharding{{ir::Placement::Replicate()}});
  ++stats_.collectives;
  UseTpcDomain();
  return out;
}

Replacements Rewriter::Replace(ir::Node* node, const std::vector<ir::Value*>& values) {
  Replacements out;
  std::vector<std::string> names;
  for (int i = 0; i < node->num_outputs() && i < static_cast<int>(values.size()); ++i) {
    ir::Value* old = node->output(i);
    names.push_back(old->name());
    old->ReplaceAllUsesWith(values[static_cast<size_t>(i)]);
    out.emplace_back(old, values[static_cast<size_t>(i)]);
  }
  // The old outputs are about to go: record the pairs by the values that replace them.
  for (ir::Value* v : node->outputs()) {
    if (v->has_uses()) return out;  // an extra output still used: keep the node
  }
  graph_.Erase(node);
  for (size_t i = 0; i < names.size(); ++i) graph_.RenameValue(values[i], names[i]);
  return out;
}

void Rewriter::UseTpcDomain() { graph_.opsets()[kTpcDomain] = kTpcOpsetVersion; }

}  // namespace tpc::partition::internal
