#include "targets.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "onnx/onnx_pb.h"
#include "tpc/ir/parser.h"
#include "tpc/ir/printer.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/plan_runner.h"

namespace tpc::fuzz {
namespace {

namespace fs = std::filesystem;

// A fresh folder for one input, removed when it goes out of scope. One name per
// process (the pid), so parallel fuzzers never share a folder; every input starts from
// an empty one, so nothing an earlier input wrote can change what a later one does.
class ScopedDir {
 public:
  ScopedDir() {
    const char* tmp = std::getenv("TMPDIR");
    fs::path root = (tmp != nullptr && tmp[0] != '\0') ? fs::path(tmp) : fs::path("/tmp");
    path_ = root / ("tpc-fuzz-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (!fs::create_directories(path_, ec)) {
      // Without a folder every input would fail the same way and the run would test
      // nothing; stop loudly instead.
      std::fprintf(stderr, "tpc-fuzz: cannot create %s: %s\n", path_.c_str(), ec.message().c_str());
      std::abort();
    }
  }
  ~ScopedDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScopedDir(const ScopedDir&) = delete;
  ScopedDir& operator=(const ScopedDir&) = delete;

  std::string File(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "tpc-fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Consumes bytes from the front of the fuzz input; reads past the end give nothing.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t left() const { return size_ - pos_; }
  // The next byte, or `fallback` at the end.
  int Byte(int fallback) { return empty() ? fallback : static_cast<uint8_t>(data_[pos_++]); }
  std::string_view Take(size_t n) {
    n = std::min(n, left());
    std::string_view out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view Rest() { return Take(left()); }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// y = Add(x, w): w (f32[2, 2], 16 bytes) is external data. Small enough that an input
// which gets its external data right imports in microseconds.
const ::onnx::ModelProto& ExternalDataModel() {
  static const ::onnx::ModelProto* model = [] {
    auto* m = new ::onnx::ModelProto();
    m->set_ir_version(8);
    auto* opset = m->add_opset_import();
    opset->set_domain("");
    opset->set_version(17);
    auto* g = m->mutable_graph();
    g->set_name("external_data");
    auto f32_2x2 = [](::onnx::ValueInfoProto* vi, const char* name) {
      vi->set_name(name);
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(::onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(2);
      tt->mutable_shape()->add_dim()->set_dim_value(2);
    };
    f32_2x2(g->add_input(), "x");
    f32_2x2(g->add_output(), "y");
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(::onnx::TensorProto::FLOAT);
    w->add_dims(2);
    w->add_dims(2);
    w->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* add = g->add_node();
    add->set_name("add");
    add->set_op_type("Add");
    add->add_input("x");
    add->add_input("w");
    add->add_output("y");
    return m;
  }();
  return *model;
}

// Where the initializer says its data is. The file is always written as weights.bin;
// the other entries reach the importer's checks of locations (missing, a folder, empty,
// leaving the model's folder, indirect).
constexpr const char* kLocations[8] = {"weights.bin",
                                       "weights.bin",
                                       "./weights.bin",
                                       "sub/../weights.bin",
                                       "../weights.bin",
                                       "missing.bin",
                                       ".",
                                       ""};

std::atomic<int> round_trip_failures{0};

void ReportRoundTrip(std::string_view what, std::string_view text) {
  // A report per failure would drown libFuzzer's output; the count says how many.
  if (round_trip_failures.fetch_add(1) < 5) {
    std::fprintf(stderr, "tpc-fuzz: round-trip: %.*s\n--- printed text ---\n%.*s\n---\n",
                 static_cast<int>(what.size()), what.data(), static_cast<int>(text.size()),
                 text.data());
  }
}

}  // namespace

int FuzzImportModel(const uint8_t* data, size_t size) {
  ScopedDir dir;
  const std::string path = dir.File("model.onnx");
  WriteBytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  auto graph = tpc::onnx::ImportModel(path);
  return 0;
}

int FuzzExternalData(const uint8_t* data, size_t size) {
  Reader in(data, size);
  ::onnx::ModelProto model = ExternalDataModel();
  auto* w = model.mutable_graph()->mutable_initializer(0);
  auto add_entry = [w](const std::string& key, std::string_view value) {
    auto* kv = w->add_external_data();
    kv->set_key(key);
    kv->set_value(std::string(value));
  };
  add_entry("location", kLocations[in.Byte(0) & 7]);
  for (const char* key : {"offset", "length"}) {
    const int n = in.Byte(0xFF);
    if (n != 0xFF) add_entry(key, in.Take(static_cast<size_t>(n)));
  }

  ScopedDir dir;
  WriteBytes(dir.File("weights.bin"), in.Rest());
  const std::string path = dir.File("model.onnx");
  WriteBytes(path, model.SerializeAsString());
  auto graph = tpc::onnx::ImportModel(path);
  return 0;
}

int FuzzIrParser(const uint8_t* data, size_t size) {
  auto graph = tpc::ir::ParseGraph(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!graph.ok()) return 0;
  // The verifier must not crash on anything the parser accepts; whether it accepts the
  // graph does not matter here (the parser leaves order errors to it on purpose).
  const bool verified = tpc::ir::VerifyGraph(**graph).ok();
  const std::string printed = tpc::ir::PrintGraph(**graph);
  auto again = tpc::ir::ParseGraph(printed);
  if (!again.ok()) {
    ReportRoundTrip(std::string("printed text does not parse (verifier ") +
                        (verified ? "accepted" : "refused") +
                        " the input): " + std::string(again.status().message()),
                    printed);
    return 0;
  }
  const std::string reprinted = tpc::ir::PrintGraph(**again);
  if (reprinted != printed) {
    ReportRoundTrip("Print(Parse(Print(g))) != Print(g); the second print is", reprinted);
  }
  return 0;
}

int FuzzPlanLoader(const uint8_t* data, size_t size) {
  Reader in(data, size);
  ScopedDir dir;
  for (const char* name : {"plan.json", "rank0.onnx", "rank0.weights"}) {
    if (in.left() < 4) break;
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(in.Byte(0)) << (8 * i);
    WriteBytes(dir.File(name), in.Take(n));
  }
  auto graphs = tpc::runtime::LoadPlan(dir.path());
  if (!graphs.ok()) {
    // tp-run --no-verify: a mutated rank file almost never matches the SHA-256 in
    // plan.json, so without this the importer behind the loader would go unfuzzed.
    auto unverified = tpc::runtime::LoadPlan(dir.path(), {.verify_hashes = false});
  }
  return 0;
}

int IrRoundTripFailures() { return round_trip_failures.load(); }

}  // namespace tpc::fuzz
