#include "tpc/runtime/kernel.h"

#include "absl/strings/str_cat.h"
#include "tpc/runtime/backend.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

ThreadPool& KernelContext::pool() const { return backend_.pool(); }

absl::StatusOr<Tensor*> KernelContext::Output(int i, const std::vector<int64_t>& shape) {
  return Output(i, shape, output_dtype(i));
}

absl::StatusOr<Tensor*> KernelContext::Output(int i, const std::vector<int64_t>& shape,
                                              ir::DType dtype) {
  TPC_CHECK(i >= 0 && i < num_outputs());
  // Negative dims and absurd sizes; the message is built only when one is refused.
  if (!TensorBytes(shape, ir::DTypeSize(dtype))) {
    return Error(std::string(
        TensorSizeError(shape, ir::DTypeSize(dtype), absl::StrCat("output ", i)).message()));
  }
  TPC_ASSIGN_OR_RETURN(Tensor t, allocator_.AllocateOutput(i, dtype, shape));
  outputs_[static_cast<size_t>(i)] = std::move(t);
  return &outputs_[static_cast<size_t>(i)];
}

absl::Status KernelContext::Error(std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(node_.Describe(), ": ", std::string(message)));
}

}  // namespace tpc::runtime
