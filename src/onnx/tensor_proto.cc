#include "tpc/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx {
namespace {

namespace fs = std::filesystem;

template <typename T, typename Field>
std::string PackAs(const Field& field) {
  std::string out(static_cast<size_t>(field.size()) * sizeof(T), '\0');
  for (int i = 0; i < field.size(); ++i) {
    T v = static_cast<T>(field.Get(i));
    std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
  }
  return out;
}

// The typed repeated field of `proto` that holds data of type `dtype`, packed to bytes.
absl::StatusOr<std::string> PackTypedData(const ::onnx::TensorProto& proto, ir::DType dtype) {
  using ir::DType;
  switch (dtype) {
    case DType::kF32:
      return PackAs<float>(proto.float_data());
    case DType::kF64:
      return PackAs<double>(proto.double_data());
    case DType::kI64:
      return PackAs<int64_t>(proto.int64_data());
    case DType::kU32:
    case DType::kU64:
      return dtype == DType::kU32 ? PackAs<uint32_t>(proto.uint64_data())
                                  : PackAs<uint64_t>(proto.uint64_data());
    case DType::kI32:
      return PackAs<int32_t>(proto.int32_data());
    case DType::kI16:
      return PackAs<int16_t>(proto.int32_data());
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16:
      return PackAs<uint16_t>(proto.int32_data());
    case DType::kI8:
      return PackAs<int8_t>(proto.int32_data());
    case DType::kU8:
    case DType::kBool:
      return PackAs<uint8_t>(proto.int32_data());
    case DType::kString:
    case DType::kUndefined:
      break;
  }
  return absl::UnimplementedError("string tensors are not supported");
}

}  // namespace

absl::StatusOr<std::shared_ptr<const MappedFile>> ExternalDataFiles::Open(
    const std::string& location, const std::string& tensor_name) {
  auto it = files_.find(location);
  if (it != files_.end()) return it->second;
  fs::path rel(location);
  if (location.empty() || rel.is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer '", tensor_name, "': external data location '", location,
                     "' is absolute or empty; it must be a path relative to the model's folder"));
  }
  // The location may not leave the model's folder ('../x'); a symbolic link in the folder
  // may point elsewhere (Hugging Face's cache keeps a snapshot's files as links into its
  // blobs/), as onnxruntime reads it.
  const fs::path base = fs::path(model_dir_.empty() ? "." : model_dir_).lexically_normal();
  const fs::path inside = (base / rel).lexically_normal().lexically_relative(base);
  if (inside.empty() || *inside.begin() == "..") {
    return absl::InvalidArgumentError(absl::StrCat("initializer '", tensor_name,
                                                   "': external data location '", location,
                                                   "' leaves the model's folder"));
  }
  // The error_code forms: a symlink loop or an unreadable folder is an error, not an
  // exception.
  std::error_code ec;
  const fs::path full = fs::weakly_canonical(base / rel, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("initializer '", tensor_name,
                                                   "': external data location '", location,
                                                   "' cannot be resolved: ", ec.message()));
  }
  auto file = MappedFile::Open(full.string());
  if (!file.ok()) {
    return absl::NotFoundError(absl::StrCat("initializer '", tensor_name, "': external data file '",
                                            location,
                                            "' cannot be read: ", file.status().message()));
  }
  files_[location] = *file;
  return *file;
}

absl::StatusOr<ir::Tensor> TensorFromProto(const ::onnx::TensorProto& proto,
                                           const std::optional<ByteSpan>& raw,
                                           const std::shared_ptr<const MappedFile>& model_file,
                                           ExternalDataFiles* external) {
  const std::string& name = proto.name();
  if (!ir::IsKnownOnnxDType(proto.data_type()) ||
      proto.data_type() == ::onnx::TensorProto::STRING) {
    return absl::UnimplementedError(
        absl::StrCat("tensor '", name, "': data type ", proto.data_type(), " is not supported"));
  }
  auto dtype = static_cast<ir::DType>(proto.data_type());
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  const std::string what = absl::StrCat("tensor '", name, "'");
  TPC_ASSIGN_OR_RETURN(const int64_t nbytes, CheckedTensorBytes(shape, ir::DTypeSize(dtype), what));
  const size_t expected = static_cast<size_t>(nbytes);
  auto check_size = [&](size_t got, std::string_view where) -> absl::Status {
    if (got == expected) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", std::string(where),
                                                   " holds ", got, " bytes, its type ",
                                                   ir::DTypeName(dtype), " needs ", expected));
  };

  if (proto.data_location() == ::onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0;
    int64_t length = -1;
    for (const auto& kv : proto.external_data()) {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() != "offset" && kv.key() != "length") continue;
      int64_t v = 0;
      if (!absl::SimpleAtoi(kv.value(), &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("initializer '", name, "': external data ",
                                                       kv.key(), " '", kv.value(),
                                                       "' is not a non-negative integer"));
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
    if (external == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': external data here"));
    }
    TPC_ASSIGN_OR_RETURN(auto file, external->Open(location, name));
    if (length < 0) length = static_cast<int64_t>(expected);
    const std::optional<int64_t> end = CheckedAdd(offset, length);
    if (!end || static_cast<uint64_t>(*end) > file->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer '", name, "': external data at offset ", offset, ", length ",
                       length, " is past the end of '", location, "' (", file->size(), " bytes)"));
    }
    TPC_RETURN_IF_ERROR(check_size(static_cast<size_t>(length), "its external data"));
    return ir::Tensor::FromMapped(dtype, shape, file, static_cast<size_t>(offset));
  }
  if (raw.has_value()) {
    TPC_RETURN_IF_ERROR(check_size(raw->length, "raw_data"));
    return ir::Tensor::FromMapped(dtype, shape, model_file, raw->offset);
  }
  if (proto.has_raw_data()) {
    TPC_RETURN_IF_ERROR(check_size(proto.raw_data().size(), "raw_data"));
    return ir::Tensor::FromBytes(dtype, shape, proto.raw_data());
  }
  TPC_ASSIGN_OR_RETURN(std::string bytes, PackTypedData(proto, dtype));
  TPC_RETURN_IF_ERROR(check_size(bytes.size(), "its typed data"));
  return ir::Tensor::FromBytes(dtype, shape, std::move(bytes));
}

::onnx::TensorProto TensorToProto(const ir::Tensor& tensor, const std::string& name) {
  ::onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  if (tensor.has_data()) {
    proto.set_raw_data(reinterpret_cast<const char*>(tensor.data()), tensor.nbytes());
  }
  return proto;
}

}  // namespace tpc::onnx
