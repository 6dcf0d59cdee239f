#include "tpc/runtime/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc::runtime {

Tensor Tensor::Allocate(ir::DType dtype, std::vector<int64_t> shape) {
  Tensor t(dtype, std::move(shape), nullptr);
  // 64-byte aligned so BLAS and vector loops see the same alignment as in the arena.
  size_t bytes = (t.nbytes() + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  std::memset(p, 0, bytes == 0 ? 64 : bytes);
  t.data_ = static_cast<uint8_t*>(p);
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return t;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::string Tensor::TypeString() const {
  return absl::StrCat(ir::DTypeName(dtype_), ShapeString(shape_));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace tpc::runtime
