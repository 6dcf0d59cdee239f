// Compile time against the bare protobuf parse of the same file.
//
//   bench_compile [benchmark flags] [--tp=4] [--shard-only=MODEL.onnx]... MODEL.onnx...
//
// For each MODEL (N = --tp ranks, default 4):
//   ProtobufParse  read + ModelProto::ParseFromString: the floor, and the baseline;
//   Import         tpc::onnx::ImportModel (read, IR, shape inference, verifier);
//   Shard          tpc::shard::ShardGraph (rules, cost model, solver, propagation) with
//                  the default objective (balanced: a search over a price of weights);
//   ShardMemory    the same with --objective memory (one exact solve): the baseline;
//   Partition      tpc::partition::PartitionGraph + the verifier;
//   Export         every rank's graph as an ONNX ModelProto serialized to a string,
//                  weights excluded (per-rank constants write no bytes; the few small
//                  replicated constants are inlined);
//   Pipeline       all of the above in a row (import → shard → partition → export):
//                  tp-compile's work without weight bytes and without the disk;
//   WriteRankFiles the plan writer itself into a temporary folder, weights included
//                  (for reference: the weight bytes of these models are small).
// Each stage's setup (the stages before it) runs with the timer paused.
// --shard-only=MODEL runs only Import and Shard on MODEL (a very large graph).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "tpc/ir/graph.h"
#include "tpc/ir/verifier.h"
#include "tpc/onnx/exporter.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/shard/options.h"
#include "tpc/shard/shard_pass.h"

namespace {

int64_t g_tp = 4;

tpc::shard::ShardOptions Options() {
  tpc::shard::ShardOptions options;
  options.mesh = tpc::shard::Mesh::Tp(g_tp);
  return options;
}

// The stages as tp-compile runs them; each returns false (and marks the benchmark
// failed) on an error.
struct Pipeline {
  std::unique_ptr<tpc::ir::Graph> graph;
  tpc::shard::ShardResult shard;

  bool Import(benchmark::State& state, const std::string& path) {
    auto g = tpc::onnx::ImportModel(path);
    if (!g.ok()) return Fail(state, g.status());
    graph = *std::move(g);
    return true;
  }
  bool Shard(benchmark::State& state,
             tpc::shard::Objective objective = tpc::shard::ShardOptions{}.objective) {
    tpc::shard::ShardOptions options = Options();
    options.objective = objective;
    auto r = tpc::shard::ShardGraph(*graph, options);
    if (!r.ok()) return Fail(state, r.status());
    shard = *std::move(r);
    return true;
  }
  bool Partition(benchmark::State& state) {
    auto stats = tpc::partition::PartitionGraph(*graph, shard, Options());
    if (!stats.ok()) return Fail(state, stats.status());
    if (auto s = tpc::ir::VerifyGraph(*graph); !s.ok()) return Fail(state, s);
    return true;
  }
  // Every rank's model serialized, without weight bytes; returns the bytes written.
  bool Export(benchmark::State& state, int64_t* bytes) {
    tpc::onnx::ExportOptions eo;
    eo.write_constant = [](const tpc::ir::Node&, std::ostream&) { return absl::OkStatus(); };
    *bytes = 0;
    for (int64_t r = 0; r < g_tp; ++r) {
      auto model = tpc::onnx::ExportModelProto(*graph, eo);
      if (!model.ok()) return Fail(state, model.status());
      std::string text;
      if (!model->SerializeToString(&text)) return Fail(state, absl::InternalError("serialize"));
      *bytes += static_cast<int64_t>(text.size());
      benchmark::DoNotOptimize(text);
    }
    return true;
  }
  static bool Fail(benchmark::State& state, const absl::Status& s) {
    state.SkipWithError(std::string(s.message()).c_str());
    return false;
  }
};

void SetNodes(benchmark::State& state, const tpc::ir::Graph* graph) {
  if (graph != nullptr) {
    state.counters["ir_nodes"] = static_cast<double>(graph->nodes().size());
  }
}

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

void BM_Import(benchmark::State& state, std::string path) {
  Pipeline p;
  for (auto _ : state) {
    if (!p.Import(state, path)) break;
  }
  SetNodes(state, p.graph.get());
}

void ShardWith(benchmark::State& state, const std::string& path, tpc::shard::Objective objective) {
  Pipeline p;
  int64_t nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const bool ok = p.Import(state, path);
    if (ok) nodes = static_cast<int64_t>(p.graph->nodes().size());
    state.ResumeTiming();
    if (!ok || !p.Shard(state, objective)) break;
  }
  state.counters["ir_nodes"] = static_cast<double>(nodes);
  state.counters["decisions"] = static_cast<double>(p.shard.decisions);
}

// The default objective (balanced: a search over a price of weight bytes) ...
void BM_Shard(benchmark::State& state, std::string path) {
  ShardWith(state, path, tpc::shard::ShardOptions{}.objective);
}

// ... and the memory objective (one exact solve), its baseline in the same run.
void BM_ShardMemory(benchmark::State& state, std::string path) {
  ShardWith(state, path, tpc::shard::Objective::kMemory);
}

void BM_Partition(benchmark::State& state, std::string path) {
  Pipeline p;
  for (auto _ : state) {
    state.PauseTiming();
    const bool ok = p.Import(state, path) && p.Shard(state);
    state.ResumeTiming();
    if (!ok || !p.Partition(state)) break;
  }
  SetNodes(state, p.graph.get());
}

void BM_Export(benchmark::State& state, std::string path) {
  Pipeline p;
  int64_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const bool ok = p.Import(state, path) && p.Shard(state) && p.Partition(state);
    state.ResumeTiming();
    if (!ok || !p.Export(state, &bytes)) break;
  }
  SetNodes(state, p.graph.get());
  state.counters["model_bytes"] = static_cast<double>(bytes);
}

void BM_Pipeline(benchmark::State& state, std::string path) {
  Pipeline p;
  int64_t bytes = 0;
  for (auto _ : state) {
    if (!p.Import(state, path) || !p.Shard(state) || !p.Partition(state) ||
        !p.Export(state, &bytes)) {
      break;
    }
  }
  SetNodes(state, p.graph.get());
}

void BM_WriteRankFiles(benchmark::State& state, std::string path) {
  Pipeline p;
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("tpc_bench_compile_" + std::to_string(::getpid()));
  int64_t weight_bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    const bool ok = p.Import(state, path) && p.Shard(state) && p.Partition(state);
    state.ResumeTiming();
    if (!ok) break;
    tpc::plan::PlanOptions po;
    po.tp = g_tp;
    po.source_model = path;
    auto ranks = tpc::plan::WriteRankFiles(*p.graph, dir.string(), po);
    if (!ranks.ok()) {
      Pipeline::Fail(state, ranks.status());
      break;
    }
    weight_bytes = 0;
    for (const auto& r : *ranks) weight_bytes += r.weight_bytes;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  state.counters["weight_bytes"] = static_cast<double>(weight_bytes);
}

std::string BaseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::vector<std::string> models, shard_only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--tp=", 0) == 0) {
      g_tp = std::stoll(arg.substr(5));
    } else if (arg.rfind("--shard-only=", 0) == 0) {
      shard_only.push_back(arg.substr(13));
    } else {
      models.push_back(arg);
    }
  }
  for (const std::string& path : models) {
    const std::string name = BaseName(path);
    // Stages with an untimed setup run a fixed number of iterations (the setup would
    // otherwise repeat until the timed part alone reaches the minimum time).
    auto reg = [&](const char* stage, auto fn, int64_t iterations) {
      auto* b = benchmark::RegisterBenchmark((std::string(stage) + "/" + name).c_str(), fn, path)
                    ->Unit(benchmark::kMillisecond);
      if (iterations > 0) b->Iterations(iterations);
    };
    reg("ProtobufParse", BM_ProtobufParse, 0);
    reg("Import", BM_Import, 0);
    reg("Shard", BM_Shard, 3);
    reg("ShardMemory", BM_ShardMemory, 3);
    reg("Partition", BM_Partition, 3);
    reg("Export", BM_Export, 3);
    reg("Pipeline", BM_Pipeline, 0);
    reg("WriteRankFiles", BM_WriteRankFiles, 3);
  }
  for (const std::string& path : shard_only) {
    const std::string name = BaseName(path);
    benchmark::RegisterBenchmark(("ProtobufParse/" + name).c_str(), BM_ProtobufParse, path)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
    benchmark::RegisterBenchmark(("Import/" + name).c_str(), BM_Import, path)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
    benchmark::RegisterBenchmark(("Shard/" + name).c_str(), BM_Shard, path)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
