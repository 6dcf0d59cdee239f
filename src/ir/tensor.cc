#include "tpc/ir/tensor.h"

#include <cstring>

#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"

namespace tpc::ir {
namespace {

class OwnedStorage final : public Storage {
 public:
  explicit OwnedStorage(std::string bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(bytes_.data()); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::string bytes_;
};

class MappedStorage final : public Storage {
 public:
  explicit MappedStorage(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {}
  const uint8_t* data() const override { return file_->data(); }
  size_t size() const override { return file_->size(); }
  const MappedFile* file() const { return file_.get(); }

 private:
  std::shared_ptr<const MappedFile> file_;
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Store(std::string& out, int64_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<const Storage> storage,
               size_t offset)
    : dtype_(dtype), shape_(std::move(shape)), storage_(std::move(storage)), offset_(offset) {}

Tensor Tensor::Elided(DType dtype, std::vector<int64_t> shape) {
  return Tensor(dtype, std::move(shape), nullptr, 0);
}

Tensor Tensor::FromMapped(DType dtype, std::vector<int64_t> shape,
                          std::shared_ptr<const MappedFile> file, size_t offset) {
  return Tensor(dtype, std::move(shape), std::make_shared<MappedStorage>(std::move(file)), offset);
}

Tensor Tensor::FromBytes(DType dtype, std::vector<int64_t> shape, std::string bytes) {
  return Tensor(dtype, std::move(shape), std::make_shared<OwnedStorage>(std::move(bytes)), 0);
}

Tensor Tensor::FromInt64(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  std::string bytes(values.size() * sizeof(int64_t), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return FromBytes(DType::kI64, std::move(shape), std::move(bytes));
}

Tensor Tensor::FromFloat(std::vector<int64_t> shape, const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return FromBytes(DType::kF32, std::move(shape), std::move(bytes));
}

Tensor Tensor::FromDoubles(DType dtype, std::vector<int64_t> shape,
                           const std::vector<double>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::string out(static_cast<size_t>(n * DTypeSize(dtype)), '\0');
  for (int64_t i = 0; i < n; ++i) {
    double v = values[i];
    switch (dtype) {
      case DType::kF32:
        Store<float>(out, i, static_cast<float>(v));
        break;
      case DType::kF64:
        Store<double>(out, i, v);
        break;
      case DType::kF16:
        Store<uint16_t>(out, i, FloatToHalf(static_cast<float>(v)));
        break;
      case DType::kBF16:
        Store<uint16_t>(out, i, FloatToBFloat16(static_cast<float>(v)));
        break;
      case DType::kBool:
        Store<uint8_t>(out, i, v != 0 ? 1 : 0);
        break;
      case DType::kU8:
        Store<uint8_t>(out, i, static_cast<uint8_t>(v));
        break;
      case DType::kI8:
        Store<int8_t>(out, i, static_cast<int8_t>(v));
        break;
      case DType::kU16:
        Store<uint16_t>(out, i, static_cast<uint16_t>(v));
        break;
      case DType::kI16:
        Store<int16_t>(out, i, static_cast<int16_t>(v));
        break;
      case DType::kI32:
        Store<int32_t>(out, i, static_cast<int32_t>(v));
        break;
      case DType::kI64:
        Store<int64_t>(out, i, static_cast<int64_t>(v));
        break;
      case DType::kU32:
        Store<uint32_t>(out, i, static_cast<uint32_t>(v));
        break;
      case DType::kU64:
        Store<uint64_t>(out, i, static_cast<uint64_t>(v));
        break;
      case DType::kString:
      case DType::kUndefined:
        break;
    }
  }
  return FromBytes(dtype, std::move(shape), std::move(out));
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

const uint8_t* Tensor::data() const {
  return storage_ == nullptr ? nullptr : storage_->data() + offset_;
}

bool Tensor::is_mapped() const {
  return dynamic_cast<const MappedStorage*>(storage_.get()) != nullptr;
}

const MappedFile* Tensor::mapped_file() const {
  const auto* m = dynamic_cast<const MappedStorage*>(storage_.get());
  return m == nullptr ? nullptr : m->file();
}

double Tensor::ElementAsDouble(int64_t i) const {
  TPC_CHECK(has_data() && i >= 0 && i < num_elements());
  const uint8_t* p = data() + i * DTypeSize(dtype_);
  switch (dtype_) {
    case DType::kF32:
      return Load<float>(p);
    case DType::kF64:
      return Load<double>(p);
    case DType::kF16:
      return HalfToFloat(Load<uint16_t>(p));
    case DType::kBF16:
      return BFloat16ToFloat(Load<uint16_t>(p));
    case DType::kBool:
    case DType::kU8:
      return Load<uint8_t>(p);
    case DType::kI8:
      return Load<int8_t>(p);
    case DType::kU16:
      return Load<uint16_t>(p);
    case DType::kI16:
      return Load<int16_t>(p);
    case DType::kI32:
      return Load<int32_t>(p);
    case DType::kI64:
      return static_cast<double>(Load<int64_t>(p));
    case DType::kU32:
      return Load<uint32_t>(p);
    case DType::kU64:
      return static_cast<double>(Load<uint64_t>(p));
    case DType::kString:
    case DType::kUndefined:
      break;
  }
  return 0;
}

int64_t Tensor::ElementAsInt64(int64_t i) const {
  TPC_CHECK(has_data() && i >= 0 && i < num_elements());
  const uint8_t* p = data() + i * DTypeSize(dtype_);
  switch (dtype_) {
    case DType::kI64:
      return Load<int64_t>(p);
    case DType::kU64:
      return static_cast<int64_t>(Load<uint64_t>(p));
    case DType::kI32:
      return Load<int32_t>(p);
    case DType::kU32:
      return Load<uint32_t>(p);
    default:
      return static_cast<int64_t>(ElementAsDouble(i));
  }
}

std::vector<int64_t> Tensor::ToInt64() const {
  std::vector<int64_t> out(static_cast<size_t>(num_elements()));
  for (int64_t i = 0; i < num_elements(); ++i) out[i] = ElementAsInt64(i);
  return out;
}

}  // namespace tpc::ir
