// The CUDA backend's own behaviour (the kernels' results are the node tests', through
// the CUDA backend): on a GPU only; without one the tests say so and pass.
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "catch2/catch.hpp"
#include "model_data.h"
#include "one_op.h"
#include "test_util.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/compare.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::I64;
using testing::OneOp;

std::unique_ptr<Backend> CudaOrSkip() {
  if (!CudaBuiltIn()) {
    WARN("skipped: this build has no CUDA backend");
    return nullptr;
  }
  if (GpuCount() == 0) {
    WARN("skipped: no GPU here (tools/gpu_check.sh runs this on a GPU machine)");
    return nullptr;
  }
  auto b = MakeBackend({.name = "cuda", .threads = 1});
  REQUIRE(b.ok());
  return std::move(*b);
}

TEST_CASE("A Gather index out of range fails the run on the GPU, naming the node",
          "[runtime][cuda]") {
  auto cuda = CudaOrSkip();
  if (!cuda) return;
  {
    OneOp o;
    o.Input("x", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
    o.Input("i", I64({2}, {2, -3}));
    auto out = o.TryRun("Gather", {}, 1, "", cuda.get());
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    CHECK(testing::Floats((*out)[0]) == std::vector<float>{5, 6, 1, 2});
  }
  for (int64_t bad : {3, -4}) {
    OneOp o;
    o.Input("x", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
    o.Input("i", I64({2}, {0, bad}));
    auto out = o.TryRun("Gather", {}, 1, "", cuda.get());
    REQUIRE(!out.ok());
    CHECK_THAT(std::string(out.status().message()),
               Catch::Contains("the_op") && Catch::Contains("out of range"));
  }
  // The failure does not stick: the next run is fine.
  OneOp o;
  o.Input("x", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
  o.Input("i", I64({1}, {1}));
  auto out = o.TryRun("Gather", {}, 1, "", cuda.get());
  INFO(out.status().ToString());
  REQUIRE(out.ok());
}

// The same kernels on the same GPU: equal but for a GEMM algorithm cuBLAS may pick
// differently while capturing.
bool Close(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    const Comparison c = CompareTensors(a[k], b[k], 1e-5, 1e-6);
    if (!c.pass) {
      WARN("output " << k << ": max abs " << c.max_abs << " max rel " << c.max_rel << " "
                     << c.note);
      return false;
    }
  }
  return true;
}

TEST_CASE("CUDA graphs: a replayed run equals the same run queued kernel by kernel",
          "[runtime][cuda][capture]") {
  auto cuda = CudaOrSkip();
  if (!cuda) return;
  int replayed_models = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(tpc::testing::SourcePath("models"))) {
    if (entry.path().extension() != ".onnx") continue;
    const std::string name = entry.path().stem().string();
    const std::string data = tpc::testing::SourcePath("models/" + name + "/test_data_set_0");
    if (!std::filesystem::exists(data)) continue;
    INFO("model " << name);
    auto g = onnx::ImportModel(entry.path().string());
    REQUIRE(g.ok());
    const auto inputs = testing::ReadInputs(data);
    const auto other = testing::OtherData(inputs);
    // Queued kernel by kernel: the reference, on the same GPU.
    auto plain = Executor::Create(**g, *cuda, nullptr);
    REQUIRE(plain.ok());
    auto want = (*plain)->Run(inputs);
    auto want_other = (*plain)->Run(other);
    REQUIRE(want.ok());
    REQUIRE(want_other.ok());
    auto ex = Executor::Create(**g, *cuda, nullptr, {.capture = true, .guard_bytes = 0});
    REQUIRE(ex.ok());
    std::vector<RunStats::Device> work;
    for (int run = 0; run < 5; ++run) {
      INFO("run " << run);
      auto got = (*ex)->Run(run == 3 ? other : inputs);
      INFO(got.status().ToString());
      REQUIRE(got.ok());
      CHECK(Close(*got, run == 3 ? *want_other : *want));
      const RunStats& stats = (*ex)->last_stats();
      INFO(stats.capture_error);
      work.push_back(stats.device_work);
      if (run >= 1) CHECK(stats.device_allocations == 0);
    }
    if (work[2] == RunStats::Device::kReplayed) ++replayed_models;
    WARN(name << ": "
              << ((*ex)->last_stats().capture_error.empty() ? std::string("replayed")
                                                            : (*ex)->last_stats().capture_error));
  }
  CHECK(replayed_models >= 5);
}

}  // namespace
}  // namespace tpc::runtime
