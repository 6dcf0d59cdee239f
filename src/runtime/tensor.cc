#include "tpc/runtime/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cpu/isa_loops.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

// 64-byte aligned so BLAS and vector loops see the same alignment as in the arena.
void* AlignedZeros(size_t nbytes) {
  const size_t bytes = nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p != nullptr) std::memset(p, 0, bytes);
  return p;
}

}  // namespace

Tensor Tensor::Allocate(ir::DType dtype, std::vector<int64_t> shape) {
  Tensor t(dtype, std::move(shape), nullptr);
  void* p = AlignedZeros(t.nbytes());
  TPC_CHECK(p != nullptr);
  t.data_ = static_cast<uint8_t*>(p);
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return t;
}

absl::StatusOr<Tensor> Tensor::Create(ir::DType dtype, std::vector<int64_t> shape,
                                      const std::string& what) {
  TPC_ASSIGN_OR_RETURN(const int64_t bytes, CheckedTensorBytes(shape, ir::DTypeSize(dtype), what));
  void* p = AlignedZeros(static_cast<size_t>(bytes));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot allocate ", bytes,
                                                     " bytes for ", ir::DTypeName(dtype),
                                                     ShapeString(shape)));
  }
  Tensor t(dtype, std::move(shape), p);
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

bool IsHalfType(ir::DType t) { return t == ir::DType::kF16 || t == ir::DType::kBF16; }

void ConvertFloats(const Tensor& src, const Tensor& dst) {
  const int64_t n = src.num_elements();
  TPC_CHECK(n == dst.num_elements());
  using ir::DType;
  if (src.dtype() == dst.dtype()) {
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
  } else if (src.dtype() == DType::kF32) {
    TPC_CHECK(IsHalfType(dst.dtype()));
    // 16 lanes at a time, exactly FloatToHalf's and FloatToBFloat16's values.
    cpu::FloatToHalfBlock(src.data<float>(), n, dst.data<uint16_t>(), dst.dtype() == DType::kBF16);
  } else {
    TPC_CHECK(IsHalfType(src.dtype()) && dst.dtype() == DType::kF32);
    // 16 lanes at a time, exactly HalfToFloat's and BFloat16ToFloat's values (the CPU
    // backend's loop; every half input of a kernel that computes in f32 comes here).
    cpu::HalfBlockToFloat(src.data<uint16_t>(), n, 1, n, dst.data<float>(), n,
                          src.dtype() == DType::kBF16);
  }
}

Tensor ConvertFloats(const Tensor& src, ir::DType to) {
  Tensor out = Tensor::Allocate(to, src.shape());
  ConvertFloats(src, out);
  return out;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace tpc::runtime
