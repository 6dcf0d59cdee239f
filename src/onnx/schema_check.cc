#include "schema_check.h"

#include "absl/strings/str_cat.h"
#include "onnx/checker.h"
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

}  // namespace

absl::Status CheckAgainstSchema(const ::onnx::NodeProto& node, const std::string& domain,
                                int64_t opset, const std::string& label) {
  // libonnx names the default domain "" (ai.onnx).
  const auto& ranges = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = ranges.find(domain);
  if (range == ranges.end()) return absl::OkStatus();
  const bool known_opset = opset <= range->second.second;
  const ::onnx::OpSchema* schema =
      known_opset ? ::onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), domain)
                  : ::onnx::OpSchemaRegistry::Schema(node.op_type(), domain);
  if (schema == nullptr) return absl::OkStatus();  // the shape rules name unsupported ops
  if (known_opset) {
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
    return absl::InvalidArgumentError(absl::StrCat(label, ": attribute '", a.name(), "' is ",
                                                   AttributeTypeName(a.type()), ", the operator's ",
                                                   "schema wants ", AttributeTypeName(it->second.type)));
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::internal
