#include "tpc/runtime/kernel.h"

#include "absl/strings/str_cat.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

absl::StatusOr<Tensor*> KernelContext::Output(int i, const std::vector<int64_t>& shape) {
  return Output(i, shape, output_dtype(i));
}

absl::StatusOr<Tensor*> KernelContext::Output(int i, const std::vector<int64_t>& shape,
                                              ir::DType dtype) {
  TPC_CHECK(i >= 0 && i < num_outputs());
  for (int64_t d : shape) {
    if (d < 0)
      return Error(absl::StrCat("output ", i, " would have a negative dim: ", ShapeString(shape)));
  }
  const std::string what = absl::StrCat("output ", i);
  auto elements = ElementCount(shape, what);
  if (elements.ok()) elements = ByteSize(*elements, ir::DTypeSize(dtype), what);
  if (!elements.ok()) return Error(std::string(elements.status().message()));
  TPC_ASSIGN_OR_RETURN(Tensor t, allocator_.AllocateOutput(i, dtype, shape));
  outputs_[static_cast<size_t>(i)] = std::move(t);
  return &outputs_[static_cast<size_t>(i)];
}

absl::Status KernelContext::Error(std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(node_.Describe(), ": ", std::string(message)));
}

}  // namespace tpc::runtime
