#include "proto_convert.h"

#include "absl/strings/str_cat.h"
#include "tpc/onnx/tensor_proto.h"

namespace tpc::onnx::internal {

void SetType(const ir::TensorType& type, ::onnx::TypeProto* out) {
  auto* tt = out->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(type.dtype));
  if (!type.shape) return;
  auto* shape = tt->mutable_shape();
  for (const ir::Dim& d : *type.shape) {
    auto* dim = shape->add_dim();
    if (d.is_static()) {
      dim->set_dim_value(d.value());
    } else if (!d.is_unknown()) {
      dim->set_dim_param(d.ToString());
    }
  }
}

absl::Status SetAttribute(const std::string& name, const ir::AttrValue& value,
                          ::onnx::AttributeProto* a) {
  using AP = ::onnx::AttributeProto;
  a->set_name(name);
  if (const auto* v = std::get_if<int64_t>(&value)) {
    a->set_type(AP::INT);
    a->set_i(*v);
  } else if (const auto* v = std::get_if<float>(&value)) {
    a->set_type(AP::FLOAT);
    a->set_f(*v);
  } else if (const auto* v = std::get_if<std::string>(&value)) {
    a->set_type(AP::STRING);
    a->set_s(*v);
  } else if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) {
    a->set_type(AP::INTS);
    for (int64_t x : *v) a->add_ints(x);
  } else if (const auto* v = std::get_if<std::vector<float>>(&value)) {
    a->set_type(AP::FLOATS);
    for (float x : *v) a->add_floats(x);
  } else if (const auto* v = std::get_if<std::vector<std::string>>(&value)) {
    a->set_type(AP::STRINGS);
    for (const auto& x : *v) a->add_strings(x);
  } else if (const auto* v = std::get_if<ir::Tensor>(&value)) {
    if (!v->has_data()) {
      return absl::FailedPreconditionError(absl::StrCat("attribute '", name, "' has no data"));
    }
    a->set_type(AP::TENSOR);
    *a->mutable_t() = TensorToProto(*v, "");
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::internal
