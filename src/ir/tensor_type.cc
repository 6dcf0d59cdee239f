#include "tpc/ir/tensor_type.h"

#include "absl/strings/str_cat.h"

namespace tpc::ir {

bool TensorType::is_fully_known() const {
  if (!shape) return false;
  for (const Dim& d : *shape) {
    if (d.is_unknown()) return false;
  }
  return true;
}

std::string TensorType::ToString() const {
  if (!shape) return absl::StrCat(std::string(DTypeName(dtype)), "[*]");
  return absl::StrCat(std::string(DTypeName(dtype)), DimsToString(*shape));
}

}  // namespace tpc::ir
