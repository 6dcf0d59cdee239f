// The executor: memory planning, input checks, the committed models, the collective ops
// across ranks.
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/memory_plan.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;

TEST_CASE("PlanMemory reuses buffers whose lifetimes do not overlap", "[runtime][memory]") {
  // A chain: each buffer is read by the next step only.
  std::vector<BufferRequest> chain;
  for (int i = 0; i < 10; ++i) chain.push_back({1000, i, i + 1});
  MemoryPlan plan = PlanMemory(chain);
  REQUIRE(plan.total_bytes == 10 * 1024);
  REQUIRE(plan.arena_bytes == 2 * 1024);  // two alive at a time
  for (size_t i = 0; i + 1 < chain.size(); ++i) REQUIRE(plan.offsets[i] != plan.offsets[i + 1]);
  // Everything alive at once: no reuse possible.
  std::vector<BufferRequest> all;
  for (int i = 0; i < 4; ++i) all.push_back({100 * (i + 1), 0, 10});
  REQUIRE(PlanMemory(all).arena_bytes == PlanMemory(all).total_bytes);
}

TEST_CASE("PlanMemory never overlaps live buffers", "[runtime][memory]") {
  std::vector<BufferRequest> reqs;
  for (int i = 0; i < 200; ++i)
    reqs.push_back({(i * 7919) % 5000 + 1, (i * 31) % 50, (i * 31) % 50 + (i % 9)});
  MemoryPlan plan = PlanMemory(reqs);
  for (size_t a = 0; a < reqs.size(); ++a) {
    for (size_t b = a + 1; b < reqs.size(); ++b) {
      const bool live = reqs[a].first <= reqs[b].last && reqs[b].first <= reqs[a].last;
      const bool overlap = plan.offsets[a] < plan.offsets[b] + reqs[b].bytes &&
                           plan.offsets[b] < plan.offsets[a] + reqs[a].bytes;
      REQUIRE(!(live && overlap));
    }
  }
  REQUIRE(plan.arena_bytes < plan.total_bytes);
}

// x -> Neg -> Abs -> Neg -> ... : a chain of n elementwise ops with symbolic dims.
std::unique_ptr<ir::Graph> Chain(int n) {
  auto g = std::make_unique<ir::Graph>();
  g->opsets()[""] = 18;
  ir::Value* v =
      g->AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim::Symbol("batch"), Dim(256)}));
  for (int i = 0; i < n; ++i) {
    v = g->AddCall("", i % 2 ? "Abs" : "Neg", {v}, {"v" + std::to_string(i)})->output();
  }
  g->SetOutputs({v});
  REQUIRE(onnx::InferShapes(*g).ok());
  return g;
}

TEST_CASE("The executor's arena reuses buffers on a chain", "[runtime][memory]") {
  auto g = Chain(12);
  auto backend = MakeCpuBackend(1);
  auto ex = Executor::Create(*g, *backend, nullptr, {.guard_bytes = 0});
  REQUIRE(ex.ok());
  Tensor x = Tensor::Allocate(DType::kF32, {4, 256});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 2;
  auto out = (*ex)->Run({{"x", x}});
  REQUIRE(out.ok());
  const RunStats& st = (*ex)->last_stats();
  REQUIRE(st.planned_values == 11);  // the last value is the graph output
  REQUIRE(st.arena_bytes == 2 * 4 * 256 * 4);
  REQUIRE(st.arena_bytes < st.planned_total_bytes);
  // Neg, Abs, ...: the result is abs(x).
  for (int64_t i = 0; i < x.num_elements(); ++i)
    REQUIRE((*out)[0].data<float>()[i] == std::abs(x.data<float>()[i]));
  // Another binding gets its own plan.
  Tensor x2 = Tensor::Allocate(DType::kF32, {8, 256});
  REQUIRE((*ex)->Run({{"x", x2}}).ok());
  REQUIRE((*ex)->last_stats().arena_bytes == 2 * 8 * 256 * 4);
}

TEST_CASE("A profiled run counts each op type's calls, time and largest buffers",
          "[runtime][executor]") {
  auto g = Chain(5);  // Neg, Abs, Neg, Abs, Neg over [batch, 256] f32
  auto backend = MakeCpuBackend(1);
  for (bool profile : {false, true}) {
    auto ex = Executor::Create(*g, *backend, nullptr, {.profile = profile});
    REQUIRE(ex.ok());
    Tensor x = Tensor::Allocate(DType::kF32, {3, 256});
    REQUIRE((*ex)->Run({{"x", x}}).ok());
    const RunStats& st = (*ex)->last_stats();
    if (!profile) {
      CHECK(st.op_calls.empty());
      CHECK(st.op_bytes.empty());
      continue;
    }
    CHECK(st.op_calls == std::map<std::string, int64_t>{{"Abs", 2}, {"Neg", 3}});
    CHECK(st.op_bytes ==
          std::map<std::string, int64_t>{{"Abs", 2 * 3 * 256 * 4}, {"Neg", 3 * 3 * 256 * 4}});
    CHECK(st.op_seconds.size() == 2);
  }
}

TEST_CASE("Outputs belong to the caller, whether handed over or copied", "[runtime][executor]") {
  // y = Relu(x) is a block of its own (handed over as it is); xi = Identity(x) is the
  // caller's input, c = Identity(const) a constant, and y is an output twice: those are
  // copies. None may share bytes with another output, the input, the constant or a later
  // run, and all outlive the executor and its backend.
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(4), Dim(8)}));
  ir::Value* y = g.AddCall("", "Relu", {x}, {"y"})->output();
  ir::Value* xi = g.AddCall("", "Identity", {x}, {"xi"})->output();
  ir::Value* k = g.AddConstant("k", ir::Tensor::FromFloat({2}, {1.5f, -2.5f}));
  ir::Value* c = g.AddCall("", "Identity", {k}, {"c"})->output();
  g.SetOutputs({y, xi, c, y});
  REQUIRE(onnx::InferShapes(g).ok());
  Tensor in = Tensor::Allocate(DType::kF32, {4, 8});
  for (int64_t i = 0; i < in.num_elements(); ++i) in.data<float>()[i] = static_cast<float>(i) - 9;
  std::vector<Tensor> first, second;
  {
    auto backend = MakeCpuBackend(1);
    auto ex = Executor::Create(g, *backend, nullptr);
    REQUIRE(ex.ok());
    auto a = (*ex)->Run({{"x", in}});
    REQUIRE(a.ok());
    first = *a;
    for (Tensor& t : first) std::fill_n(t.data<float>(), t.num_elements(), 77.0f);
    auto b = (*ex)->Run({{"x", in}});
    REQUIRE(b.ok());
    second = *b;
  }
  for (const Tensor& t : first) {
    for (int64_t i = 0; i < t.num_elements(); ++i) REQUIRE(t.data<float>()[i] == 77.0f);
  }
  REQUIRE(second.size() == 4);
  second[3].data<float>()[0] = 55.0f;  // the second y is not the first
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    const float xv = static_cast<float>(i) - 9;
    CHECK(in.data<float>()[i] == xv);
    CHECK(second[0].data<float>()[i] == std::max(xv, 0.0f));
    CHECK(second[1].data<float>()[i] == xv);
  }
  CHECK(second[2].data<float>()[0] == 1.5f);
  CHECK(second[2].data<float>()[1] == -2.5f);
}

TEST_CASE("Bad inputs are refused before anything runs", "[runtime][executor]") {
  auto g = onnx::ImportModel(tpc::testing::SourcePath("models/gpt2.onnx"));
  REQUIRE(g.ok());
  auto backend = MakeCpuBackend(1);
  auto ex = Executor::Create(**g, *backend, nullptr);
  REQUIRE(ex.ok());
  auto run = [&](std::map<std::string, Tensor> in) {
    return std::string((*ex)->Run(in).status().message());
  };
  REQUIRE_THAT(run({{"input_ids", Tensor::Allocate(DType::kF32, {2, 8})}}),
               Catch::Contains("input 'input_ids': expected i64[batch, seq], got f32[2, 8]"));
  REQUIRE_THAT(run({{"input_ids", Tensor::Allocate(DType::kI64, {2, 8, 1})}}),
               Catch::Contains("rank 3 is not 2"));
  REQUIRE_THAT(run({{"ids", Tensor::Allocate(DType::kI64, {2, 8})}}),
               Catch::Contains("unknown input 'ids'"));
  REQUIRE_THAT(run({}), Catch::Contains("missing input 'input_ids'"));
}

TEST_CASE("Inconsistent symbol bindings are refused", "[runtime][executor]") {
  ir::Graph g;
  g.opsets()[""] = 18;
  auto* a = g.AddPlaceholder("a", ir::TensorType(DType::kF32, {Dim::Symbol("batch"), Dim(4)}));
  auto* b = g.AddPlaceholder("b", ir::TensorType(DType::kF32, {Dim::Symbol("batch"), Dim(4)}));
  g.SetOutputs({g.AddCall("", "Add", {a, b}, {"y"})->output()});
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(1);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  auto s = (*ex)->Run(
      {{"a", Tensor::Allocate(DType::kF32, {2, 4})}, {"b", Tensor::Allocate(DType::kF32, {3, 4})}});
  REQUIRE_THAT(std::string(s.status().message()), Catch::Contains("batch = 3, but batch = 2"));
  auto d = (*ex)->Run(
      {{"a", Tensor::Allocate(DType::kF32, {2, 5})}, {"b", Tensor::Allocate(DType::kF32, {2, 4})}});
  REQUIRE_THAT(std::string(d.status().message()), Catch::Contains("dim 1 must be 4, not 5"));
}

TEST_CASE("Every committed model, unsharded, equals its torch outputs", "[runtime][models]") {
  for (const char* name :
       {"mlp", "mlp_dynamo", "gpt2", "gpt2_dynamo", "gpt2_loss", "llama", "mistral", "bert"}) {
    INFO("model " << name);
    auto g = onnx::ImportModel(tpc::testing::SourcePath(std::string("models/") + name + ".onnx"));
    REQUIRE(g.ok());
    auto runner = PlanRunner::Create({g->get()});
    REQUIRE(runner.ok());
    const std::string data =
        tpc::testing::SourcePath(std::string("models/") + name + "/test_data_set_0");
    std::map<std::string, Tensor> inputs;
    for (int k = 0; std::filesystem::exists(data + "/input_" + std::to_string(k) + ".pb"); ++k) {
      auto t = ReadTensorProtoFile(data + "/input_" + std::to_string(k) + ".pb");
      REQUIRE(t.ok());
      inputs[t->name] = t->tensor;
    }
    auto out = (*runner)->Run(inputs);
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    const auto& outputs = (*out)[0];
    for (size_t k = 0; k < outputs.size(); ++k) {
      auto want = ReadTensorProtoFile(data + "/output_" + std::to_string(k) + ".pb");
      REQUIRE(want.ok());
      REQUIRE(outputs[k].shape() == want->tensor.shape());
      for (int64_t i = 0; i < outputs[k].num_elements(); ++i) {
        const float a = outputs[k].data<float>()[i], e = want->tensor.data<float>()[i];
        INFO("output " << k << " element " << i);
        REQUIRE(std::abs(a - e) <= 1e-5 + 1e-4 * std::abs(e));
      }
    }
  }
}

// y = Collective(x) on n ranks, x on rank r = r*100 + iota, from an IR graph.
std::vector<std::vector<Tensor>> RunCollective(int n, const std::string& op, ir::Attributes attrs,
                                               std::vector<int64_t> shape) {
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  std::vector<ir::Graph*> ptrs;
  for (int r = 0; r < n; ++r) {
    auto g = std::make_unique<ir::Graph>();
    g->opsets()[""] = 18;
    g->opsets()["tpc"] = 1;
    std::vector<Dim> dims(shape.begin(), shape.end());
    auto* x = g->AddPlaceholder("x", ir::TensorType(DType::kF32, dims));
    auto* rank = g->AddCall("tpc", "Rank", {}, {"rank"})->output();
    auto* rank_f = g->AddCall("", "Cast", {rank}, {"rank_f"}, {{"to", int64_t{1}}})->output();
    auto* hundred = g->AddConstant("hundred", ir::Tensor::FromFloat({}, {100.0f}));
    auto* offset = g->AddCall("", "Mul", {rank_f, hundred}, {"offset"})->output();
    auto* xr = g->AddCall("", "Add", {x, offset}, {"xr"})->output();
    attrs["group_size"] = int64_t{n};
    g->SetOutputs({g->AddCall("tpc", op, {xr}, {"y"}, attrs)->output()});
    auto s = onnx::InferShapes(*g);
    INFO(s.ToString());
    REQUIRE(s.ok());
    ptrs.push_back(g.get());
    graphs.push_back(std::move(g));
  }
  PlanRunnerOptions options;
  options.threads = n;
  auto runner = PlanRunner::Create(ptrs, options);
  REQUIRE(runner.ok());
  Tensor x = Tensor::Allocate(DType::kF32, shape);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(i);
  auto out = (*runner)->Run({{"x", x}});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  return *out;
}

TEST_CASE("tpc collective ops across ranks", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4, 8}) {
    INFO("n = " << n);
    // AllReduce sum: iota * n + 100 * n(n-1)/2.
    auto ar = RunCollective(n, "AllReduce", {{"reduce", std::string("sum")}}, {2, 3});
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < 6; ++i)
        REQUIRE(ar[r][0].data<float>()[i] == static_cast<float>(i * n + 100 * n * (n - 1) / 2));
    }
    // AllGather on axis 1 of [2, 3]: [2, 3n], block k from rank k.
    auto ag = RunCollective(n, "AllGather", {{"axis", int64_t{1}}}, {2, 3});
    for (int r = 0; r < n; ++r) {
      REQUIRE(ag[r][0].shape() == std::vector<int64_t>{2, 3 * n});
      for (int64_t row = 0; row < 2; ++row) {
        for (int k = 0; k < n; ++k) {
          for (int64_t j = 0; j < 3; ++j)
            REQUIRE(ag[r][0].data<float>()[row * 3 * n + k * 3 + j] ==
                    static_cast<float>(k * 100 + row * 3 + j));
        }
      }
    }
    // ReduceScatter on axis 1 of [2, 2n]: rank r gets columns [2r, 2r+2) of the sum.
    auto rs = RunCollective(n, "ReduceScatter", {{"axis", int64_t{1}}}, {2, 2 * n});
    for (int r = 0; r < n; ++r) {
      REQUIRE(rs[r][0].shape() == std::vector<int64_t>{2, 2});
      for (int64_t row = 0; row < 2; ++row) {
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t col = 2 * r + j;
          REQUIRE(rs[r][0].data<float>()[row * 2 + j] ==
                  static_cast<float>((row * 2 * n + col) * n + 100 * n * (n - 1) / 2));
        }
      }
    }
    // AllToAll [n, 2] split on 0, concat on 1: rank r gets row r of every rank, side by side.
    auto aa = RunCollective(n, "AllToAll",
                            {{"split_axis", int64_t{0}}, {"concat_axis", int64_t{1}}}, {n, 2});
    for (int r = 0; r < n; ++r) {
      REQUIRE(aa[r][0].shape() == std::vector<int64_t>{1, 2 * n});
      for (int k = 0; k < n; ++k) {
        for (int64_t j = 0; j < 2; ++j)
          REQUIRE(aa[r][0].data<float>()[k * 2 + j] == static_cast<float>(k * 100 + r * 2 + j));
      }
    }
  }
}

TEST_CASE("tpc AllGather of parts held by groups of ranks keeps one copy of each",
          "[runtime][collectives]") {
  // 6 ranks in 3 groups of 2 (S(1@3)): x = [2, 2] iota + 100·rank; the result is rank 0's,
  // rank 2's and rank 4's blocks side by side on axis 1.
  auto ag = RunCollective(6, "AllGather", {{"axis", int64_t{1}}, {"parts", int64_t{3}}}, {2, 2});
  for (int r = 0; r < 6; ++r) {
    REQUIRE(ag[r][0].shape() == std::vector<int64_t>{2, 6});
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t k = 0; k < 3; ++k) {
        for (int64_t j = 0; j < 2; ++j) {
          CHECK(ag[r][0].data<float>()[row * 6 + k * 2 + j] ==
                static_cast<float>(2 * k * 100 + row * 2 + j));
        }
      }
    }
  }
  // On the outermost axis (one contiguous block per rank).
  auto outer = RunCollective(4, "AllGather", {{"axis", int64_t{0}}, {"parts", int64_t{2}}}, {1, 3});
  for (int r = 0; r < 4; ++r) {
    REQUIRE(outer[r][0].shape() == std::vector<int64_t>{2, 3});
    for (int64_t j = 0; j < 3; ++j) {
      CHECK(outer[r][0].data<float>()[j] == static_cast<float>(j));
      CHECK(outer[r][0].data<float>()[3 + j] == static_cast<float>(200 + j));
    }
  }
}

TEST_CASE("tpc Shard takes each rank's part, in groups of ranks too", "[runtime][collectives]") {
  // x = [2, 8] iota + 100·rank. Plain: rank r takes columns [2r, 2r+2) of its own x.
  auto plain = RunCollective(4, "Shard", {{"axis", int64_t{1}}}, {2, 8});
  // R → S(1@2) on 4 ranks: parts 2, stride 2, ranks 0 and 1 take columns 0-3, ranks 2
  // and 3 columns 4-7.
  auto groups = RunCollective(
      4, "Shard", {{"axis", int64_t{1}}, {"parts", int64_t{2}}, {"stride", int64_t{2}}}, {2, 8});
  // S(1@2) → S(1): a rank's part of its group's part, parts 2, stride 1 (r mod 2).
  auto within = RunCollective(4, "Shard", {{"axis", int64_t{1}}, {"parts", int64_t{2}}}, {2, 8});
  for (int r = 0; r < 4; ++r) {
    REQUIRE(plain[r][0].shape() == std::vector<int64_t>{2, 2});
    REQUIRE(groups[r][0].shape() == std::vector<int64_t>{2, 4});
    REQUIRE(within[r][0].shape() == std::vector<int64_t>{2, 4});
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t j = 0; j < 2; ++j) {
        CHECK(plain[r][0].data<float>()[row * 2 + j] ==
              static_cast<float>(r * 100 + row * 8 + 2 * r + j));
      }
      for (int64_t j = 0; j < 4; ++j) {
        CHECK(groups[r][0].data<float>()[row * 4 + j] ==
              static_cast<float>(r * 100 + row * 8 + 4 * (r / 2) + j));
        CHECK(within[r][0].data<float>()[row * 4 + j] ==
              static_cast<float>(r * 100 + row * 8 + 4 * (r % 2) + j));
      }
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
