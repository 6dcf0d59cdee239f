#include "tpc/onnx/function_inliner.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "subgraph_names.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx {
namespace {

// Nested calls deeper than this are taken for recursion.
constexpr int kMaxDepth = 64;

class Inliner {
 public:
  Inliner(const ::onnx::ModelProto& model, std::string scope) : scope_(std::move(scope)) {
    for (const auto& f : model.functions()) functions_[{f.domain(), f.name()}] = &f;
  }

  absl::Status Expand(const ::onnx::NodeProto& node, int depth,
                      std::vector<::onnx::NodeProto>* out) {
    auto it = functions_.find({node.domain(), node.op_type()});
    if (it == functions_.end()) {
      out->push_back(node);
      return absl::OkStatus();
    }
    if (depth >= kMaxDepth) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': call of function '",
                                                     node.op_type(),
                                                     "' nests too deeply (recursion?)"));
    }
    const ::onnx::FunctionProto& fn = *it->second;
    const std::string prefix =
        absl::StrCat(scope_, node.name().empty() ? fn.name() : node.name(), "/", counter_++, "/");
    // Formal → actual names; names internal to the body get the prefix.
    std::map<std::string, std::string> rename;
    for (int i = 0; i < fn.input_size(); ++i) {
      rename[fn.input(i)] = i < node.input_size() ? node.input(i) : "";
    }
    for (int i = 0; i < fn.output_size(); ++i) {
      rename[fn.output(i)] = i < node.output_size() ? node.output(i) : "";
    }
    auto map_name = [&](const std::string& n) -> std::string {
      if (n.empty()) return n;
      auto r = rename.find(n);
      return r != rename.end() ? r->second : prefix + n;
    };
    // Attribute values given at the call site. (Defaults declared by the function,
    // `attribute_proto`, are newer than the ONNX schema tpc builds against.)
    std::map<std::string, const ::onnx::AttributeProto*> actual;
    for (const auto& a : node.attribute()) actual[a.name()] = &a;

    for (const ::onnx::NodeProto& body : fn.node()) {
      ::onnx::NodeProto copy = body;
      copy.set_name(prefix + body.name());
      for (auto& in : *copy.mutable_input()) in = map_name(in);
      for (auto& o : *copy.mutable_output()) o = map_name(o);
      copy.clear_attribute();
      for (const auto& a : body.attribute()) {
        if (a.ref_attr_name().empty()) {
          ::onnx::AttributeProto* kept = copy.add_attribute();
          *kept = a;
          // A branch or body reads the function's values under their new names.
          if (kept->has_g()) internal::RenameOuterNames(kept->mutable_g(), map_name);
          for (auto& g : *kept->mutable_graphs()) internal::RenameOuterNames(&g, map_name);
          continue;
        }
        auto ref = actual.find(a.ref_attr_name());
        if (ref == actual.end()) continue;  // optional attribute not given: ONNX drops it
        ::onnx::AttributeProto resolved = *ref->second;
        resolved.set_name(a.name());
        *copy.add_attribute() = std::move(resolved);
      }
      TPC_RETURN_IF_ERROR(Expand(copy, depth + 1, out));
    }
    return absl::OkStatus();
  }

 private:
  std::map<std::pair<std::string, std::string>, const ::onnx::FunctionProto*> functions_;
  std::string scope_;  // before every prefix: apart from other inliners' names
  int counter_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<::onnx::NodeProto>> InlineLocalFunctions(
    const ::onnx::ModelProto& model) {
  return InlineLocalFunctions(model, model.graph().node(), "");
}

absl::StatusOr<std::vector<::onnx::NodeProto>> InlineLocalFunctions(
    const ::onnx::ModelProto& model,
    const google::protobuf::RepeatedPtrField<::onnx::NodeProto>& nodes, const std::string& scope) {
  std::vector<::onnx::NodeProto> out;
  out.reserve(static_cast<size_t>(nodes.size()));
  Inliner inliner(model, scope);
  for (const auto& node : nodes) TPC_RETURN_IF_ERROR(inliner.Expand(node, 0, &out));
  return out;
}

}  // namespace tpc::onnx
