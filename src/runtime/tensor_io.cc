#include "tpc/runtime/tensor_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "onnx/onnx_pb.h"
#include "tpc/onnx/tensor_proto.h"
#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/write_error.h"

namespace tpc::runtime {
namespace {

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  // A device, a FIFO or a folder is refused before reading: /dev/zero read without end.
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `pieces` to `path` through a temporary file beside it, renamed over it once
// whole: a write that fails (a full disk) leaves no partial file, and says why.
absl::Status WriteWhole(const std::string& path, std::initializer_list<std::string_view> pieces) {
  const std::string temp = absl::StrCat(path, ".tmp-", getpid());
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (f == nullptr) return WriteError(path, errno, /*opening=*/true);
  int err = 0;
  for (std::string_view p : pieces) {
    if (err == 0 && std::fwrite(p.data(), 1, p.size(), f) != p.size()) err = errno;
  }
  if (std::fflush(f) != 0 && err == 0) err = errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(temp.c_str(), path.c_str()) != 0) err = errno;
  if (err == 0) return absl::OkStatus();
  std::remove(temp.c_str());
  return WriteError(path, err, /*opening=*/false);
}

absl::Status WriteAll(const std::string& path, const std::string& header, const Tensor& t) {
  return WriteWhole(path, {header, std::string_view(reinterpret_cast<const char*>(t.raw()),
                                                    static_cast<size_t>(t.nbytes()))});
}

struct NpyType {
  const char* descr;
  ir::DType dtype;
};
constexpr NpyType kNpyTypes[] = {
    {"<f4", ir::DType::kF32}, {"<f8", ir::DType::kF64}, {"<f2", ir::DType::kF16},
    {"<i8", ir::DType::kI64}, {"<i4", ir::DType::kI32}, {"<i2", ir::DType::kI16},
    {"|i1", ir::DType::kI8},  {"|u1", ir::DType::kU8},  {"<u2", ir::DType::kU16},
    {"<u4", ir::DType::kU32}, {"<u8", ir::DType::kU64}, {"|b1", ir::DType::kBool},
};

// The value of 'key' in a numpy header dict: `'descr': '<f4'` -> `'<f4'`.
std::string HeaderField(const std::string& header, const std::string& key) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  auto colon = header.find(':', k);
  if (colon == std::string::npos) return "";
  size_t b = header.find_first_not_of(' ', colon + 1);
  if (b == std::string::npos) return "";
  size_t e = header[b] == '(' ? header.find(')', b) + 1 : header.find_first_of(",}", b);
  return header.substr(b, e - b);
}

}  // namespace

absl::StatusOr<NamedTensor> ReadTensorFile(const std::string& path) {
  if (path.size() >= 4 && path.substr(path.size() - 4) == ".npy") {
    TPC_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(path));
    return NamedTensor{"", std::move(t)};
  }
  return ReadTensorProtoFile(path);
}

absl::StatusOr<NamedTensor> ReadTensorProtoFile(const std::string& path) {
  TPC_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  ::onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an ONNX TensorProto"));
  }
  auto t = tpc::onnx::TensorFromProto(proto, std::nullopt, nullptr, nullptr);
  if (!t.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::string(t.status().message())));
  TPC_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(t->dtype(), t->shape(), path));
  if (out.nbytes() > 0) std::memcpy(out.raw(), t->data(), out.nbytes());
  return NamedTensor{proto.name(), std::move(out)};
}

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  TPC_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return bad("not a .npy file");
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, start;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    start = 10;
  } else {
    if (bytes.size() < 12) return bad("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + static_cast<size_t>(i)]))
                    << (8 * i);
    start = 12;
  }
  if (start + header_len > bytes.size()) return bad("truncated header");
  const std::string header = bytes.substr(start, header_len);
  std::string descr = HeaderField(header, "descr");
  if (descr.size() >= 2) descr = descr.substr(1, descr.size() - 2);
  if (descr == "<b1" || descr == "=b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  ir::DType dtype = ir::DType::kUndefined;
  for (const NpyType& n : kNpyTypes) {
    if (descr == n.descr) dtype = n.dtype;
  }
  if (dtype == ir::DType::kUndefined) return bad(absl::StrCat("unsupported dtype '", descr, "'"));
  if (HeaderField(header, "fortran_order") != "False") return bad("Fortran order is not supported");
  std::string shape_text = HeaderField(header, "shape");
  std::vector<int64_t> shape;
  for (std::string part :
       std::vector<std::string>(absl::StrSplit(shape_text.substr(1, shape_text.size() - 2), ','))) {
    part.erase(std::remove(part.begin(), part.end(), ' '), part.end());
    if (part.empty()) continue;
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) return bad(absl::StrCat("bad shape ", shape_text));
    shape.push_back(d);
  }
  TPC_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape, path));
  const size_t data_start = start + header_len;
  if (bytes.size() - data_start < t.nbytes()) return bad("truncated data");
  if (t.nbytes() > 0) std::memcpy(t.raw(), bytes.data() + data_start, t.nbytes());
  return t;
}

absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& t,
                                  const std::string& name) {
  ::onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) proto.add_dims(d);
  proto.set_raw_data(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", t.TypeString(), " does not fit a TensorProto (over 2 GiB)"));
  }
  return WriteWhole(path, {bytes});
}

absl::Status WriteNpyFile(const std::string& path, const Tensor& t) {
  const char* descr = nullptr;
  for (const NpyType& n : kNpyTypes) {
    if (n.dtype == t.dtype()) descr = n.descr;
  }
  if (descr == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": .npy cannot hold ", ir::DTypeName(t.dtype())));
  }
  std::string shape = absl::StrJoin(t.shape(), ", ");
  if (t.rank() == 1) shape += ",";
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Header padded with spaces to a multiple of 64 bytes, ending in a newline.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>((dict.size() >> 8) & 0xff);
  header += dict;
  return WriteAll(path, header, t);
}

absl::StatusOr<Tensor> RandomTensor(const std::string& name, const ir::TensorType& type,
                                    const SymbolBindings& bindings, uint64_t seed,
                                    int64_t int_high) {
  if (!type.shape)
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' has an unknown rank"));
  std::vector<int64_t> shape;
  for (const ir::Dim& d : *type.shape) {
    auto v = EvaluateDim(d, bindings);
    if (!v) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", name, "' (", type.ToString(), "): dim ", d.ToString(),
                       " is not bound (give it with --dim NAME=VALUE) or too large"));
    }
    shape.push_back(*v);
  }
  TPC_ASSIGN_OR_RETURN(Tensor t,
                       Tensor::Create(type.dtype, shape, absl::StrCat("input '", name, "'")));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> integer(0, std::max<int64_t>(int_high, 1) - 1);
  const int64_t n = t.num_elements();
  using ir::DType;
  for (int64_t i = 0; i < n; ++i) {
    switch (type.dtype) {
      case DType::kF32:
        t.data<float>()[i] = static_cast<float>(real(rng));
        break;
      case DType::kF64:
        t.data<double>()[i] = real(rng);
        break;
      case DType::kF16:
        t.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(real(rng)));
        break;
      case DType::kBF16:
        t.data<uint16_t>()[i] = FloatToBFloat16(static_cast<float>(real(rng)));
        break;
      case DType::kI64:
        t.data<int64_t>()[i] = integer(rng);
        break;
      case DType::kI32:
        t.data<int32_t>()[i] = static_cast<int32_t>(integer(rng));
        break;
      case DType::kBool:
        t.data<bool>()[i] = (rng() & 1) != 0;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("input '", name, "': random values of ",
                                                       ir::DTypeName(type.dtype),
                                                       " are not supported"));
    }
  }
  return t;
}

}  // namespace tpc::runtime
