#include "tpc/onnx/model_file.h"

#include <cstdint>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "tpc/util/status_macros.h"

namespace tpc::onnx {
namespace {

// Field numbers from onnx.proto.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A minimal reader of the protobuf wire format over a byte range: enough to walk the
// fields of a message and find where each one starts and ends.
class WireReader {
 public:
  WireReader(const uint8_t* base, size_t begin, size_t end) : base_(base), pos_(begin), end_(end) {}

  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }

  struct Field {
    uint32_t number;
    uint32_t wire_type;
    size_t start;          // first byte of the tag
    size_t payload_begin;  // for length-delimited fields: first byte of the payload
    size_t end;            // one past the last byte of the field
  };

  // Reads the next field; false with `error` set when the bytes are not well formed.
  bool Next(Field* f, std::string* error) {
    f->start = pos_;
    uint64_t tag;
    if (!ReadVarint(&tag)) return Fail(error, "bad field tag");
    f->number = static_cast<uint32_t>(tag >> 3);
    f->wire_type = static_cast<uint32_t>(tag & 7);
    if (f->number == 0) return Fail(error, "field number 0");
    f->payload_begin = pos_;
    switch (f->wire_type) {
      case kVarint: {
        uint64_t ignored;
        if (!ReadVarint(&ignored)) return Fail(error, "bad varint");
        break;
      }
      case kFixed64:
        if (end_ - pos_ < 8) return Fail(error, "truncated fixed64");
        pos_ += 8;
        break;
      case kFixed32:
        if (end_ - pos_ < 4) return Fail(error, "truncated fixed32");
        pos_ += 4;
        break;
      case kLengthDelimited: {
        uint64_t len;
        if (!ReadVarint(&len)) return Fail(error, "bad length");
        f->payload_begin = pos_;
        if (len > end_ - pos_) return Fail(error, "truncated (a field runs past the end)");
        pos_ += len;
        break;
      }
      default:
        return Fail(error, absl::StrCat("unsupported wire type ", f->wire_type));
    }
    f->end = pos_;
    return true;
  }

 private:
  bool ReadVarint(uint64_t* out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) return false;
      uint8_t b = base_[pos_++];
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = result;
        return true;
      }
    }
    return false;
  }
  bool Fail(std::string* error, std::string_view what) {
    *error = absl::StrCat(std::string(what), " at byte ", pos_);
    return false;
  }

  const uint8_t* base_;
  size_t pos_;
  size_t end_;
};

absl::Status Corrupt(const std::string& name, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": not a valid ONNX protobuf (", why,
                                                 "); the file is truncated, "
                                                 "corrupt or not an ONNX model"));
}

void Append(std::string* out, const uint8_t* base, size_t begin, size_t end) {
  out->append(reinterpret_cast<const char*>(base + begin), end - begin);
}

}  // namespace

absl::StatusOr<ModelFile> ReadModelBytes(std::shared_ptr<const MappedFile> keep,
                                         const std::string& name) {
  const uint8_t* base = keep->data();
  const size_t size = keep->size();
  if (size == 0) return absl::InvalidArgumentError(absl::StrCat(name, ": empty file"));

  ModelFile result;
  result.path = name;
  std::string model_rest;  // every top-level field but the graph
  std::string graph_rest;  // every graph field but the initializers
  std::vector<::onnx::TensorProto> initializers;
  std::string error;

  WireReader model(base, 0, size);
  WireReader::Field f;
  while (!model.done()) {
    if (!model.Next(&f, &error)) return Corrupt(name, error);
    if (f.number != kModelGraph || f.wire_type != kLengthDelimited) {
      Append(&model_rest, base, f.start, f.end);
      continue;
    }
    WireReader graph(base, f.payload_begin, f.end);
    WireReader::Field g;
    while (!graph.done()) {
      if (!graph.Next(&g, &error)) return Corrupt(name, error);
      if (g.number != kGraphInitializer || g.wire_type != kLengthDelimited) {
        Append(&graph_rest, base, g.start, g.end);
        continue;
      }
      std::string tensor_rest;
      std::optional<ByteSpan> raw;
      WireReader tensor(base, g.payload_begin, g.end);
      WireReader::Field t;
      while (!tensor.done()) {
        if (!tensor.Next(&t, &error)) return Corrupt(name, error);
        if (t.number == kTensorRawData && t.wire_type == kLengthDelimited) {
          raw = ByteSpan{t.payload_begin, t.end - t.payload_begin};
        } else {
          Append(&tensor_rest, base, t.start, t.end);
        }
      }
      ::onnx::TensorProto proto;
      if (!proto.ParseFromString(tensor_rest)) return Corrupt(name, "bad initializer");
      initializers.push_back(std::move(proto));
      result.raw_data.push_back(raw);
    }
  }

  if (!result.proto.ParseFromString(model_rest)) return Corrupt(name, "bad ModelProto");
  ::onnx::GraphProto* graph = result.proto.mutable_graph();
  if (!graph->ParseFromString(graph_rest)) return Corrupt(name, "bad GraphProto");
  for (auto& t : initializers) *graph->add_initializer() = std::move(t);

  if (result.proto.ir_version() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not an ONNX model (no ir_version)"));
  }
  if (graph->node_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        ": the graph has no nodes (its outputs are its inputs or initializers): nothing "
        "to split"));
  }
  result.file = std::move(keep);
  return result;
}

absl::StatusOr<ModelFile> ReadModelFile(const std::string& path) {
  TPC_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  TPC_ASSIGN_OR_RETURN(ModelFile model, ReadModelBytes(file, path));
  model.path = path;
  return model;
}

}  // namespace tpc::onnx
