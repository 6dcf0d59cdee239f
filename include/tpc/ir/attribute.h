// Operator attributes, as ONNX has them (subgraph attributes are not supported).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tpc/ir/tensor.h"

namespace tpc::ir {

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

// Sorted by name, so printing is stable.
using Attributes = std::map<std::string, AttrValue>;

}  // namespace tpc::ir
