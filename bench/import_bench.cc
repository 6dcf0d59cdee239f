// Import time against the bare protobuf parse of the same file.
//
//   bench_import [benchmark flags] MODEL.onnx...
//
// For each model: BM_ProtobufParse (read + ModelProto::ParseFromString, the floor any
// ONNX tool pays), BM_ReadModelFile (tpc's zero-copy read), BM_Import (read + IR
// construction + shape inference + verification).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/model_file.h"

namespace {

void BM_ProtobufParse(benchmark::State& state, std::string path) {
  for (auto _ : state) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    ::onnx::ModelProto model;
    if (!model.ParseFromString(ss.str())) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(model);
  }
}

void BM_ReadModelFile(benchmark::State& state, std::string path) {
  for (auto _ : state) {
    auto model = tpc::onnx::ReadModelFile(path);
    if (!model.ok()) state.SkipWithError(std::string(model.status().message()).c_str());
    benchmark::DoNotOptimize(model);
  }
}

void BM_Import(benchmark::State& state, std::string path) {
  int64_t nodes = 0;
  for (auto _ : state) {
    auto graph = tpc::onnx::ImportModel(path);
    if (!graph.ok()) {
      state.SkipWithError(std::string(graph.status().message()).c_str());
      break;
    }
    nodes = static_cast<int64_t>((*graph)->nodes().size());
  }
  state.counters["ir_nodes"] = static_cast<double>(nodes);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string path = argv[i];
    std::string name = path.substr(path.find_last_of('/') + 1);
    benchmark::RegisterBenchmark(("ProtobufParse/" + name).c_str(), BM_ProtobufParse, path)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("ReadModelFile/" + name).c_str(), BM_ReadModelFile, path)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Import/" + name).c_str(), BM_Import, path)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
