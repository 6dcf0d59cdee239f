// The executor with a backend whose memory is not the host's, without a GPU: a fake
// device whose memory is host pages made inaccessible (mprotect) except while a "device"
// kernel or a copy runs. A host kernel that touched device memory, or a device kernel
// handed a value still on the host, would fault or differ; every committed model must
// give the CPU backend's outputs bit for bit (the fake device runs the same CPU kernels).
#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "fake_device.h"
#include "model_data.h"
#include "test_util.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/backends.h"
#ifdef TPC_HAVE_CUDA
#include "tpc/runtime/cuda/cuda.h"
#endif
#include "tpc/runtime/executor.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

using testing::BlasCpu;
using testing::FakeDevice;
using testing::FakeTable;
using testing::ModelsWithData;
using testing::OtherData;
using testing::Placement;
using testing::ReadInputs;
using testing::RequireSame;
using testing::TestPlacement;

// Runs every committed model with test data on a fake device placing nodes by `place`,
// twice (the second run reuses the plan and the arena), and checks the outputs equal the
// CPU backend's bit for bit. Returns each model's host waits by the op type that waited
// (RunStats::host_waits_by_op).
std::map<std::string, std::map<std::string, int>> RunCommittedModels(const Placement& place) {
  std::map<std::string, std::map<std::string, int>> waits;
  for (const auto& [name, path, data] : ModelsWithData()) {
    INFO("model " << name);
    auto g = onnx::ImportModel(path);
    REQUIRE(g.ok());
    // The fake device runs the CPU's kernels, which compute f16 and bf16 only through the
    // executor's f32 copies (a host step's); the CUDA kernels' half precision is checked
    // on the emulated backend (tools.gpu_check_emulated).
    if (testing::ComputesInHalf(**g)) continue;
    const auto inputs = ReadInputs(data);
    BlasCpu cpu;
    auto cpu_ex = Executor::Create(**g, cpu, nullptr);
    REQUIRE(cpu_ex.ok());
    auto want = (*cpu_ex)->Run(inputs);
    REQUIRE(want.ok());
    FakeDevice device(place);
    auto ex = Executor::Create(**g, device, nullptr);
    INFO(ex.status().ToString());
    REQUIRE(ex.ok());
    for (int run = 0; run < 2; ++run) {
      INFO("run " << run);
      auto got = (*ex)->Run(inputs);
      INFO(got.status().ToString());
      REQUIRE(got.ok());
      RequireSame(*got, *want);
    }
    CHECK(device.device_steps > 0);
    CHECK(device.uploads > 0);    // constants and inputs
    CHECK(device.downloads > 0);  // outputs
    waits[name] = (*ex)->last_stats().host_waits_by_op;
  }
  return waits;
}

TEST_CASE(
    "A device backend's executor keeps host and device values apart and gets the CPU's "
    "outputs",
    "[runtime][executor][device]") {
  CHECK(RunCommittedModels(FakeTable).size() >= 10);
}

TEST_CASE("A recorded run replays with new data and equals the queued runs",
          "[runtime][executor][device][capture]") {
  int replayed_models = 0;
  for (const auto& [name, path, data] : ModelsWithData()) {
    INFO("model " << name);
    auto g = onnx::ImportModel(path);
    REQUIRE(g.ok());
    if (testing::ComputesInHalf(**g)) continue;  // (as in RunCommittedModels)
    const auto inputs = ReadInputs(data);
    const auto other = OtherData(inputs);
    BlasCpu cpu;
    auto cpu_ex = Executor::Create(**g, cpu, nullptr);
    REQUIRE(cpu_ex.ok());
    auto want = (*cpu_ex)->Run(inputs);
    REQUIRE(want.ok());
    auto want_other = (*cpu_ex)->Run(other);
    REQUIRE(want_other.ok());

    FakeDevice device(TestPlacement());
    device.capture = true;
    auto ex = Executor::Create(**g, device, nullptr, {.capture = true, .guard_bytes = 0});
    REQUIRE(ex.ok());
    std::vector<RunStats::Device> work;
    bool waited = false;
    for (int run = 0; run < 5; ++run) {
      INFO("run " << run);
      const bool use_other = run == 3;
      auto got = (*ex)->Run(use_other ? other : inputs);
      INFO(got.status().ToString());
      REQUIRE(got.ok());
      RequireSame(*got, use_other ? *want_other : *want);
      const RunStats& stats = (*ex)->last_stats();
      work.push_back(stats.device_work);
      waited = waited || stats.host_waits > 0;
      INFO(stats.capture_error);
      if (stats.device_work == RunStats::Device::kQueued && run >= 1 && !waited) {
        // Only another run's host-read values stop a replay (reversed ids can change a
        // data-dependent shape); the recording itself must work.
        CHECK(!stats.capture_error.empty());
        CHECK(run >= 3);
      }
    }
    CHECK(work[0] == RunStats::Device::kQueued);
#ifdef TPC_HAVE_CUDA
    // The CUDA table has a device kernel for every wait, but for NonZero, whose output the
    // data sizes (Optimum's Qwen 3 MoE picks each expert's tokens with it).
    bool sized_by_data = false;
    for (const ir::Node* n : (*g)->nodes()) sized_by_data |= n->op_type() == "NonZero";
    CHECK((!waited || sized_by_data));
#endif
    if (!waited) {
      CHECK(work[1] == RunStats::Device::kCaptured);
      CHECK(work[2] == RunStats::Device::kReplayed);
      CHECK(device.captures == 1);
    } else {
      CHECK(device.captures == 0);
    }
    if (work[4] == RunStats::Device::kReplayed) ++replayed_models;
  }
  CHECK(replayed_models >= 5);
}

TEST_CASE("Recorded runs are per input shape", "[runtime][executor][device][capture]") {
  auto g = tpc::testing::ImportCommitted("mlp");
  const auto inputs = ReadInputs(tpc::testing::SourcePath("models/mlp/test_data_set_0"));
  const Tensor& x = inputs.at("x");
  REQUIRE(x.shape()[1] >= 2);
  // The same rows, one position fewer.
  Tensor shorter = Tensor::Allocate(x.dtype(), {x.shape()[0], x.shape()[1] - 1, x.shape()[2]});
  for (int64_t b = 0; b < x.shape()[0]; ++b) {
    std::memcpy(shorter.data<float>() + b * shorter.shape()[1] * x.shape()[2],
                x.data<float>() + b * x.shape()[1] * x.shape()[2],
                static_cast<size_t>(shorter.shape()[1] * x.shape()[2]) * sizeof(float));
  }
  const std::map<std::string, Tensor> small = {{"x", shorter}};
  BlasCpu cpu;
  auto cpu_ex = Executor::Create(*g, cpu, nullptr);
  REQUIRE(cpu_ex.ok());
  auto want = (*cpu_ex)->Run(inputs);
  auto want_small = (*cpu_ex)->Run(small);
  REQUIRE(want.ok());
  REQUIRE(want_small.ok());

  FakeDevice device(TestPlacement());
  device.capture = true;
  auto ex = Executor::Create(*g, device, nullptr, {.capture = true, .guard_bytes = 0});
  REQUIRE(ex.ok());
  using D = RunStats::Device;
  const std::vector<std::pair<bool, D>> runs = {
      {false, D::kQueued},   {false, D::kCaptured}, {false, D::kReplayed}, {true, D::kQueued},
      {false, D::kReplayed}, {true, D::kCaptured},  {true, D::kReplayed},  {false, D::kReplayed}};
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("run " << i);
    auto got = (*ex)->Run(runs[i].first ? small : inputs);
    REQUIRE(got.ok());
    RequireSame(*got, runs[i].first ? *want_small : *want);
    CHECK((*ex)->last_stats().device_work == runs[i].second);
  }
  CHECK(device.captures == 2);
  CHECK(device.launches == 6);

  SECTION("An executor keeps a bounded number of records") {
    FakeDevice many(TestPlacement());
    many.capture = true;
    auto ex2 = Executor::Create(*g, many, nullptr, {.capture = true, .guard_bytes = 0});
    REQUIRE(ex2.ok());
    // Longest first: the arena then never grows (which would drop every record).
    for (int64_t seq = 9; seq >= 1; --seq) {
      INFO("seq " << seq);
      Tensor xs = Tensor::Allocate(ir::DType::kF32, {1, seq, x.shape()[2]});
      std::memcpy(xs.raw(), x.raw(), xs.nbytes());
      for (int run = 0; run < 3; ++run) REQUIRE((*ex2)->Run({{"x", xs}}).ok());
      const RunStats& stats = (*ex2)->last_stats();
      CHECK(stats.device_work == (seq >= 2 ? D::kReplayed : D::kQueued));
      if (seq == 1) CHECK_THAT(stats.capture_error, Catch::Contains("records"));
    }
    CHECK(many.captures == 8);
  }

  SECTION("A rank of several is never recorded") {
    // NCCL wants every rank to agree on each recorded launch: one rank of two queues.
    class TwoRanks final : public Communicator {
     public:
      int rank() const override { return 0; }
      int size() const override { return 2; }
      absl::Status AllReduce(const void*, void*, int64_t, ir::DType, ReduceOp) override {
        return absl::UnimplementedError("not here");
      }
      absl::Status AllGather(const void*, void*, int64_t, ir::DType) override {
        return absl::UnimplementedError("not here");
      }
      absl::Status ReduceScatter(const void*, void*, int64_t, ir::DType, ReduceOp) override {
        return absl::UnimplementedError("not here");
      }
      absl::Status AllToAll(const void*, void*, int64_t, ir::DType) override {
        return absl::UnimplementedError("not here");
      }
      absl::Status Barrier() override { return absl::OkStatus(); }
      void Abort(const absl::Status&) override {}
    } comm;
    FakeDevice rank_device(TestPlacement());
    rank_device.capture = true;
    auto ex2 = Executor::Create(*g, rank_device, &comm, {.capture = true, .guard_bytes = 0});
    REQUIRE(ex2.ok());
    for (int i = 0; i < 3; ++i) {
      auto got = (*ex2)->Run(inputs);
      REQUIRE(got.ok());
      RequireSame(*got, *want);
      CHECK((*ex2)->last_stats().device_work == D::kQueued);
      // --cuda-graph's report says why.
      CHECK_THAT((*ex2)->last_stats().capture_error, Catch::Contains("collectives"));
    }
    CHECK(rank_device.captures == 0);
  }

  SECTION("A backend that cannot record queues every run") {
    FakeDevice plain(TestPlacement());
    auto ex2 = Executor::Create(*g, plain, nullptr, {.capture = true, .guard_bytes = 0});
    REQUIRE(ex2.ok());
    for (int i = 0; i < 3; ++i) {
      auto got = (*ex2)->Run(inputs);
      REQUIRE(got.ok());
      CHECK((*ex2)->last_stats().device_work == D::kQueued);
    }
    CHECK(plain.launches == 0);
  }
}

#ifdef TPC_HAVE_CUDA
TEST_CASE("The CUDA kernel table places the committed models' steps without host waits",
          "[runtime][executor][device][cuda]") {
  // Host kernels read only host values (shape arithmetic, input-derived masks): no run
  // waits for the device, so every run can be recorded as a CUDA graph. But for NonZero,
  // whose output the data sizes: Optimum's Qwen 3 MoE has one per expert and layer, each
  // reading the expert's routing mask, which the device computes (a Cast of the router's
  // one-hot); those reads wait, one each, and nothing else does.
  std::map<std::string, int> nonzeros;
  for (const auto& [name, path, data] : ModelsWithData()) {
    auto g = onnx::ImportModel(path);
    REQUIRE(g.ok());
    for (const ir::Node* n : (*g)->nodes()) nonzeros[name] += n->op_type() == "NonZero";
  }
  CHECK(nonzeros["optimum/qwen3_moe"] == 8);  // 4 experts × 2 layers
  const auto waits = RunCommittedModels(TestPlacement());
  CHECK(waits.size() >= 10);
  for (const auto& [name, by_op] : waits) {
    INFO("model " << name);
    std::string ops;
    for (const auto& [op, n] : by_op) ops += " " + op + " " + std::to_string(n);
    INFO("waits:" << ops);
    if (nonzeros[name] > 0) {
      CHECK(ops == " Cast " + std::to_string(nonzeros[name]));
    } else {
      CHECK(by_op.empty());
    }
  }
}

TEST_CASE("The CUDA kernel table takes BatchNormalization in inference, not in training",
          "[runtime][device][cuda]") {
  ir::Graph g;
  g.opsets()[""] = 15;
  std::vector<ir::Value*> in;
  in.push_back(g.AddPlaceholder("x", ir::TensorType(ir::DType::kF32, {2, 3, 4})));
  for (const char* name : {"s", "b", "m", "v"}) {
    in.push_back(g.AddPlaceholder(name, ir::TensorType(ir::DType::kF32, {3})));
  }
  ir::Node* inference = g.AddCall("", "BatchNormalization", in, {"y"});
  ir::Node* training =
      g.AddCall("", "BatchNormalization", in, {"t", "tm", "tv"}, {{"training_mode", int64_t{1}}});
  for (ir::Node* n : {inference, training}) {
    for (ir::Value* v : n->outputs()) v->set_type(ir::TensorType(ir::DType::kF32, {3}));
  }
  CHECK(cuda::PlaceOnDevice(*inference, false).device);
  CHECK_FALSE(cuda::PlaceOnDevice(*training, false).device);
}

// `tp-run --list-kernels`: one CUDA line per CPU operator, `host` or the element types of
// its device kernel, and the device ones exactly those the table places somewhere.
TEST_CASE("The CUDA kernel listing covers every CPU operator once", "[runtime][device][cuda]") {
  std::map<std::string, std::string> cpu, cuda;
  for (const std::string& line : KernelListing()) {
    const size_t a = line.find(' '), b = line.rfind(' ');
    REQUIRE(a != std::string::npos);
    REQUIRE(b > a);
    const std::string backend = line.substr(0, a), op = line.substr(a + 1, b - a - 1);
    INFO(line);
    REQUIRE(op.find("::") != std::string::npos);
    auto& table = backend == "cpu" ? cpu : cuda;
    REQUIRE((backend == "cpu" || backend == "cuda"));
    CHECK(table.emplace(op, line.substr(b + 1)).second);
  }
  CHECK(cpu.size() > 150);
  for (const auto& [op, types] : cpu) {
    INFO(op);
    REQUIRE(cuda.count(op) == 1);
  }
  CHECK(cuda.size() == cpu.size());
  int device = 0;
  for (const auto& [op, types] : cuda) device += types != "host" ? 1 : 0;
  CHECK(device > 100);
  CHECK(cuda.at("ai.onnx::QuantizeLinear") == "f32>u8,i8,u16,i16,i32");
  CHECK(cuda.at("ai.onnx::Shape") == "host");
}

// The quantization kernels take f32 in and u8 i8 u16 i16 i32 out (Quantize), those
// integers in and the scale's float type out (Dequantize), 8- and 16-bit operands with f32
// scales (the integer products); anything else runs on the host.
TEST_CASE("The CUDA kernel table places linear quantization by element type",
          "[runtime][device][cuda]") {
  ir::Graph g;
  g.opsets()[""] = 21;
  int values = 0;
  // Input 0 of rank `rank` (a convolution's X: [N, C, spatial...]), the others [4].
  const auto node = [&](const char* op, std::vector<ir::DType> ins, std::vector<ir::DType> outs,
                        size_t rank = 1) {
    std::vector<ir::Value*> in;
    for (const ir::DType t : ins) {
      std::vector<ir::Dim> dims(in.empty() ? rank : 1, ir::Dim(4));
      in.push_back(g.AddPlaceholder("v" + std::to_string(values++), ir::TensorType(t, dims)));
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < outs.size(); ++i) names.push_back("o" + std::to_string(values++));
    ir::Node* n = g.AddCall("", op, in, names);
    for (size_t i = 0; i < outs.size(); ++i)
      n->outputs()[i]->set_type(ir::TensorType(outs[i], {4}));
    return cuda::PlaceOnDevice(*n, false).device;
  };
  using D = ir::DType;
  CHECK(node("QuantizeLinear", {D::kF32, D::kF32, D::kU8}, {D::kU8}));
  CHECK(node("QuantizeLinear", {D::kF32, D::kF32}, {D::kI16}));
  CHECK_FALSE(node("QuantizeLinear", {D::kF16, D::kF16, D::kI8}, {D::kI8}));
  CHECK_FALSE(node("QuantizeLinear", {D::kF32, D::kF32, D::kI64}, {D::kI64}));
  CHECK(node("DequantizeLinear", {D::kI8, D::kF16, D::kI8}, {D::kF16}));
  CHECK(node("DequantizeLinear", {D::kI32, D::kF32}, {D::kF32}));
  CHECK_FALSE(node("DequantizeLinear", {D::kU8, D::kF32, D::kI8}, {D::kF32}));
  CHECK_FALSE(node("DequantizeLinear", {D::kU8, D::kF32}, {D::kF16}));
  CHECK_FALSE(node("DequantizeLinear", {D::kU32, D::kF32}, {D::kF32}));
  CHECK(node("DynamicQuantizeLinear", {D::kF32}, {D::kU8, D::kF32, D::kU8}));
  CHECK_FALSE(node("DynamicQuantizeLinear", {D::kF64}, {D::kU8, D::kF64, D::kU8}));
  CHECK(node("MatMulInteger", {D::kU8, D::kI8, D::kU8, D::kI8}, {D::kI32}));
  CHECK_FALSE(node("MatMulInteger", {D::kI32, D::kI32}, {D::kI32}));
  CHECK(node("QLinearMatMul", {D::kU8, D::kF32, D::kU8, D::kU8, D::kF32, D::kU8, D::kF32, D::kU8},
             {D::kU8}));
  CHECK_FALSE(node("QLinearMatMul",
                   {D::kU8, D::kF16, D::kU8, D::kU8, D::kF16, D::kU8, D::kF16, D::kU8}, {D::kU8}));
  CHECK(node("ConvInteger", {D::kU8, D::kI8, D::kU8, D::kI8}, {D::kI32}, 4));
  CHECK_FALSE(node("ConvInteger", {D::kU8, D::kI8, D::kI8}, {D::kI32}, 4));  // x zp of w's type
  CHECK_FALSE(node("ConvInteger", {D::kU8, D::kI8}, {D::kI32}, 6));          // 4 spatial dims
  CHECK(node("QLinearConv",
             {D::kU8, D::kF32, D::kU8, D::kI8, D::kF32, D::kI8, D::kF32, D::kU8, D::kI32}, {D::kU8},
             4));
  CHECK_FALSE(node("QLinearConv",
                   {D::kU8, D::kF32, D::kU8, D::kI8, D::kF32, D::kI8, D::kF32, D::kU8, D::kF32},
                   {D::kU8}, 4));
  CHECK(node("Conv", {D::kF32, D::kF32}, {D::kF32}, 5));
  CHECK_FALSE(node("Conv", {D::kF32, D::kF32}, {D::kF32}, 6));
}
#endif

}  // namespace
}  // namespace tpc::runtime
