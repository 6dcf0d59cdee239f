// A run-time tensor: element type, concrete dims and a pointer to its bytes. The bytes
// belong to the executor's arena, to a mapped weights file, or to `owner` (a tensor
// made by Allocate, e.g. a graph input read from a file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/dtype.h"

namespace tpc::runtime {

class Tensor {
 public:
  Tensor() = default;
  // A view of bytes owned elsewhere.
  Tensor(ir::DType dtype, std::vector<int64_t> shape, void* data)
      : dtype_(dtype), shape_(std::move(shape)), data_(static_cast<uint8_t*>(data)) {}
  // A zero-filled tensor owning its bytes (host memory), for a shape already known to be
  // of a valid size (derived from tensors that exist).
  static Tensor Allocate(ir::DType dtype, std::vector<int64_t> shape);
  // The same for a shape from outside (a file, a declared type, --dim): an error naming
  // `what` when a dim is negative, the size is absurd (util/checked_math.h) or the memory
  // cannot be had.
  static absl::StatusOr<Tensor> Create(ir::DType dtype, std::vector<int64_t> shape,
                                       const std::string& what);

  ir::DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t num_elements() const;
  size_t nbytes() const { return static_cast<size_t>(num_elements() * ir::DTypeSize(dtype_)); }

  uint8_t* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(data_);
  }
  // Keeps the owner of the bytes (a copy of a tensor shares it).
  const std::shared_ptr<void>& owner() const { return owner_; }
  void set_owner(std::shared_ptr<void> owner) { owner_ = std::move(owner); }

  // `f32[2, 8, 64]`
  std::string TypeString() const;

 private:
  ir::DType dtype_ = ir::DType::kUndefined;
  std::vector<int64_t> shape_;
  uint8_t* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

// True for f16 and bf16, which CPU kernels compute in f32.
bool IsHalfType(ir::DType t);
// Converts between f32 and f16/bf16 (host memory): into `dst` (same shape) or a new tensor.
void ConvertFloats(const Tensor& src, const Tensor& dst);
Tensor ConvertFloats(const Tensor& src, ir::DType to);

// `[2, 8, 64]`
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace tpc::runtime
