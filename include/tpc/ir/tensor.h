// Constant tensor data: a view on bytes owned elsewhere (a mapped model or external-data
// file, or a small owned buffer). Copying a Tensor copies the view, never the bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/dtype.h"
#include "tpc/util/mapped_file.h"

namespace tpc::ir {

// Where a tensor's bytes live; kept alive by every tensor that views it.
struct Storage {
  virtual ~Storage() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // A view of [offset, offset + nbytes) of `storage`; the caller checks the bounds.
  Tensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<const Storage> storage,
         size_t offset);
  // A tensor whose bytes are not present (the text form elides large constants).
  static Tensor Elided(DType dtype, std::vector<int64_t> shape);
  // A view of a mapped file.
  static Tensor FromMapped(DType dtype, std::vector<int64_t> shape,
                           std::shared_ptr<const MappedFile> file, size_t offset);
  // Owned copies of small host data.
  static Tensor FromBytes(DType dtype, std::vector<int64_t> shape, std::string bytes);
  static Tensor FromInt64(std::vector<int64_t> shape, const std::vector<int64_t>& values);
  static Tensor FromFloat(std::vector<int64_t> shape, const std::vector<float>& values);
  // Values of `shape` elements converted from doubles to `dtype`.
  static Tensor FromDoubles(DType dtype, std::vector<int64_t> shape,
                            const std::vector<double>& values);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const;
  size_t nbytes() const { return static_cast<size_t>(num_elements() * DTypeSize(dtype_)); }
  bool has_data() const { return storage_ != nullptr; }
  // Start of the bytes (possibly unaligned for the element type); null when elided.
  const uint8_t* data() const;
  // True when the bytes are a view of a mapped file (not an owned copy).
  bool is_mapped() const;
  // The mapped file the bytes view, or null.
  const MappedFile* mapped_file() const;

  // Element i converted to double / int64 (any numeric dtype). Requires has_data().
  double ElementAsDouble(int64_t i) const;
  int64_t ElementAsInt64(int64_t i) const;
  std::vector<int64_t> ToInt64() const;

 private:
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> shape_;
  std::shared_ptr<const Storage> storage_;
  size_t offset_ = 0;
};

}  // namespace tpc::ir
