// Internal to the importer: what libonnx's schemas do not say about the operators tpc
// runs. libonnx 1.12 knows the default domain up to opset 17 and no com.microsoft operator,
// so without this table an attribute it does not know (a newer onnxruntime's
// GroupQueryAttention `sliding_window_cache`, an opset-19 AveragePool `dilations`) would be
// read by nobody and the node computed as if it were absent: a wrong answer with exit 0.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace tpc::onnx::internal {

// One operator: its attributes (`name:type` separated by spaces; types int, float,
// string, ints, floats, strings) beyond the libonnx schema it has, if any (then all of
// them); of those, the ones tpc implements only at one value (`name=value`: any other
// value is refused); its most inputs (-1: libonnx's count); and the inputs tpc does not
// implement (their indices), which must be absent.
struct ExtraSchema {
  std::string_view domain;  // canonical: "" for ai.onnx
  std::string_view op_type;
  std::string_view attributes;
  std::string_view only_value = "";
  int max_inputs = -1;
  std::string_view absent_inputs = "";
};

// The record of `op_type` in `domain`, or null.
const ExtraSchema* FindExtraSchema(std::string_view domain, std::string_view op_type);

// OK when `attribute` of a node is named in `extra` with its type and, if it is an
// only-value attribute, has that value; else an error naming the node (`label`).
// `known_elsewhere`: libonnx's (older) schema declares it, so only the value is checked.
absl::Status CheckExtraAttribute(const ExtraSchema& extra, const ::onnx::AttributeProto& attribute,
                                 bool known_elsewhere, const std::string& label);

// The errors of an attribute the operator's schema (whose attributes are `names`) does
// not have, and of one of another type than it declares.
absl::Status UnknownAttributeError(const std::string& label, const std::string& name,
                                   std::vector<std::string> names);
absl::Status AttributeTypeError(const std::string& label, const ::onnx::AttributeProto& attribute,
                                ::onnx::AttributeProto::AttributeType want);

// OK when `node` has at most `extra`'s inputs and none of its absent ones.
absl::Status CheckExtraInputs(const ExtraSchema& extra, const ::onnx::NodeProto& node,
                              const std::string& label);

}  // namespace tpc::onnx::internal
