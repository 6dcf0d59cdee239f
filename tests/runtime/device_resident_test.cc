// Values kept in a device backend's memory between runs (Executor::Resident), on the fake
// device (fake_device.h: its memory faults when the host touches it outside a copy):
// kept outputs come back in device memory in blocks of their own whatever produced them
// (a device kernel, a view of an intermediate, a host kernel), feed a later run without
// an upload, survive the executor, and are never recorded; a KV cache kept so generates
// the host's tokens while only the logits come to the host.
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "fake_device.h"
#include "model_data.h"
#include "one_op.h"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/generate.h"
#include "tpc/runtime/memory_plan.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;
using testing::BlasCpu;
using testing::FakeDevice;

Tensor Values(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t = Tensor::Allocate(DType::kF32, std::move(shape));
  REQUIRE(static_cast<size_t>(t.num_elements()) == v.size());
  if (!v.empty()) std::memcpy(t.raw(), v.data(), t.nbytes());
  return t;
}

// A device tensor's values, through the device's copy.
std::vector<float> Download(FakeDevice& device, const Tensor& t) {
  REQUIRE(t.dtype() == DType::kF32);
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  if (!v.empty()) device.CopyToHost(v.data(), t.raw(), t.nbytes());
  return v;
}

// present = Concat(past, x + x) and flat = Reshape(x + x) (device kernels), negated =
// Neg(x) (a host kernel: Neg is not on the fake device).
std::unique_ptr<ir::Graph> CacheGraph() {
  auto g = std::make_unique<ir::Graph>();
  g->opsets()[""] = 18;
  ir::Value* x = g->AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(4)}));
  ir::Value* past = g->AddPlaceholder("past", ir::TensorType(DType::kF32, {Dim::Symbol("p")}));
  ir::Value* y = g->AddCall("", "Add", {x, x}, {"y"})->output();
  ir::Value* present =
      g->AddCall("", "Concat", {past, y}, {"present"}, {{"axis", int64_t{0}}})->output();
  ir::Value* shape = g->AddConstant("shape", ir::Tensor::FromInt64({2}, {2, 2}));
  ir::Value* flat = g->AddCall("", "Reshape", {y, shape}, {"flat"})->output();
  ir::Value* negated = g->AddCall("", "Neg", {x}, {"negated"})->output();
  g->SetOutputs({present, flat, negated});
  REQUIRE(onnx::InferShapes(*g).ok());
  return g;
}

TEST_CASE("Kept outputs stay in device memory and feed the next run without a copy",
          "[runtime][executor][device][resident]") {
  auto g = CacheGraph();
  FakeDevice device;
  device.capture = true;  // never used for runs with resident values
  {
    ExecutorOptions options;
    options.capture = true;
    auto ex = Executor::Create(*g, device, nullptr, options);
    REQUIRE(ex.ok());
    Executor::Resident resident;
    resident.keep = {"present", "flat", "negated"};
    std::vector<Tensor> kept;
    {
      auto out =
          (*ex)->Run({{"x", Values({4}, {1, 2, 3, 4})}, {"past", Values({0}, {})}}, resident);
      INFO(out.status().ToString());
      REQUIRE(out.ok());
      // Each in device memory: device kernels' outputs (their own blocks), a host
      // kernel's (uploaded).
      for (const Tensor& t : *out) CHECK(device.Holds(t.raw()));
      CHECK(Download(device, (*out)[0]) == std::vector<float>{2, 4, 6, 8});
      CHECK(Download(device, (*out)[1]) == std::vector<float>{2, 4, 6, 8});
      CHECK((*out)[1].shape() == std::vector<int64_t>{2, 2});
      CHECK(Download(device, (*out)[2]) == std::vector<float>{-1, -2, -3, -4});
      kept = std::move(*out);
    }
    // Three more steps, each fed the last present where it is: uploads are x only.
    for (int step = 1; step <= 3; ++step) {
      INFO("step " << step);
      resident.keep = {"present"};
      resident.inputs = {{"past", kept[0]}};
      const int64_t up = device.uploaded_bytes, down = device.downloaded_bytes;
      auto out = (*ex)->Run({{"x", Values({4}, {1, 1, 1, static_cast<float>(step)})}}, resident);
      INFO(out.status().ToString());
      REQUIRE(out.ok());
      CHECK(device.uploaded_bytes - up == 4 * 4);
      // The outputs not kept are the host's: `flat` downloaded, `negated` computed there.
      // The present is not downloaded.
      CHECK(device.downloaded_bytes - down == 4 * 4);
      CHECK(!device.Holds((*out)[1].raw()));
      CHECK(!device.Holds((*out)[2].raw()));
      REQUIRE(device.Holds((*out)[0].raw()));
      const std::vector<float> present = Download(device, (*out)[0]);
      REQUIRE(present.size() == static_cast<size_t>(4 * (step + 1)));
      CHECK(std::vector<float>(present.end() - 4, present.end()) ==
            std::vector<float>{2, 2, 2, 2.0f * static_cast<float>(step)});
      CHECK(std::vector<float>(present.begin(), present.begin() + 4) ==
            std::vector<float>{2, 4, 6, 8});
      CHECK((*ex)->last_stats().device_work == RunStats::Device::kQueued);
      CHECK((*ex)->last_stats().device_bytes == static_cast<int64_t>(device.held_bytes()));
      CHECK((*ex)->last_stats().device_bytes > 0);
      kept[0] = (*out)[0];
    }
    // The same shapes again and again: still queued, never recorded.
    for (int run = 0; run < 3; ++run) {
      resident.inputs = {{"past", kept[0]}};
      auto out = (*ex)->Run({{"x", Values({4}, {0, 0, 0, 0})}}, resident);
      REQUIRE(out.ok());
      CHECK((*ex)->last_stats().device_work == RunStats::Device::kQueued);
    }
    CHECK(device.captures == 0);
    // Refused: a name given twice, a kept output the graph does not have.
    resident.inputs = {{"past", kept[0]}};
    auto twice =
        (*ex)->Run({{"x", Values({4}, {0, 0, 0, 0})}, {"past", Values({0}, {})}}, resident);
    REQUIRE(!twice.ok());
    CHECK(twice.status().message().find("'past' is given both") != std::string::npos);
    resident.keep = {"logits"};
    auto unknown = (*ex)->Run({{"x", Values({4}, {0, 0, 0, 0})}}, resident);
    REQUIRE(!unknown.ok());
    CHECK(unknown.status().message().find("no output 'logits'") != std::string::npos);
    ex->reset();  // the kept tensors outlive the executor
    CHECK(Download(device, kept[1]) == std::vector<float>{2, 4, 6, 8});
  }
  // Every block, the kept ones included, went back to the device exactly once (Free
  // requires a live block).
  CHECK(device.live_blocks() == 0);
}

TEST_CASE("Kept outputs that are inputs, constants or one value twice are copies of their own",
          "[runtime][executor][device][resident]") {
  auto g = std::make_unique<ir::Graph>();
  g->opsets()[""] = 18;
  ir::Value* x = g->AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(4)}));
  ir::Value* past = g->AddPlaceholder("past", ir::TensorType(DType::kF32, {Dim(2)}));
  ir::Value* y = g->AddCall("", "Add", {x, x}, {"y"})->output();
  ir::Value* c = g->AddConstant("c", ir::Tensor::FromFloat({3}, {7, 8, 9}));
  g->SetOutputs({y, y, x, past, c});
  REQUIRE(onnx::InferShapes(*g).ok());
  FakeDevice device;
  {
    auto ex = Executor::Create(*g, device, nullptr);
    REQUIRE(ex.ok());
    Executor::Resident resident;
    resident.keep = {"y", "x", "past", "c"};
    // `past` resident: a device copy of host values first.
    Tensor past_on_device = Values({2}, {5, 6});
    {
      void* p = device.Allocate(past_on_device.nbytes());
      device.CopyFromHost(p, past_on_device.raw(), past_on_device.nbytes());
      Tensor t(DType::kF32, {2}, p);
      FakeDevice* d = &device;
      t.set_owner(std::shared_ptr<void>(p, [d](void* q) { d->Free(q); }));
      resident.inputs = {{"past", t}};
    }
    auto out = (*ex)->Run({{"x", Values({4}, {1, 2, 3, 4})}}, resident);
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    std::set<const void*> blocks;
    for (const Tensor& t : *out) {
      CHECK(device.Holds(t.raw()));
      blocks.insert(t.raw());
    }
    CHECK(blocks.size() == out->size());  // no two outputs share a block
    CHECK(!blocks.count(resident.inputs["past"].raw()));
    CHECK(Download(device, (*out)[0]) == std::vector<float>{2, 4, 6, 8});
    CHECK(Download(device, (*out)[1]) == std::vector<float>{2, 4, 6, 8});
    CHECK(Download(device, (*out)[2]) == std::vector<float>{1, 2, 3, 4});
    CHECK(Download(device, (*out)[3]) == std::vector<float>{5, 6});
    CHECK(Download(device, (*out)[4]) == std::vector<float>{7, 8, 9});
    CHECK(device.device_copies >= 4);  // y twice, x's upload, past
    resident.inputs.clear();
  }
  CHECK(device.live_blocks() == 0);
}

TEST_CASE("Device memory running out fails the run naming the shapes and the device's memory",
          "[runtime][executor][device]") {
  auto g = CacheGraph();
  FakeDevice device;
  {
    auto ex = Executor::Create(*g, device, nullptr);
    REQUIRE(ex.ok());
    device.limit_bytes = device.held_bytes() + 1;  // not one more page
    auto out = (*ex)->Run({{"x", Values({4}, {1, 2, 3, 4})}, {"past", Values({0}, {})}});
    REQUIRE(!out.ok());
    INFO(out.status().ToString());
    CHECK(out.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK(out.status().message().find("the arena of the values for input shapes p=0: cannot "
                                      "allocate") != std::string::npos);
    CHECK(out.status().message().find("of fakedevice memory: the fake device holds") !=
          std::string::npos);
    // With room again, the same executor runs.
    device.limit_bytes = 0;
    auto again = (*ex)->Run({{"x", Values({4}, {1, 2, 3, 4})}, {"past", Values({0}, {})}});
    REQUIRE(again.ok());
    CHECK(again->at(0).num_elements() == 4);
  }
  CHECK(device.live_blocks() == 0);
}

TEST_CASE("Shapes that found no room leave the executor able to run the shapes before",
          "[runtime][executor][device]") {
  auto g = std::make_unique<ir::Graph>();
  g->opsets()[""] = 18;
  ir::Value* x = g->AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim::Symbol("n")}));
  ir::Value* y = g->AddCall("", "Add", {x, x}, {"y"})->output();  // in the arena
  g->SetOutputs({g->AddCall("", "Mul", {y, y}, {"z"})->output()});
  REQUIRE(onnx::InferShapes(*g).ok());
  FakeDevice device;
  {
    auto ex = Executor::Create(*g, device, nullptr);
    REQUIRE(ex.ok());
    auto small = (*ex)->Run({{"x", Values({2}, {1, 2})}});
    REQUIRE(small.ok());
    CHECK(testing::Floats(small->at(0)) == std::vector<float>{4, 16});
    // A larger arena does not fit: the old one is gone too.
    device.limit_bytes = device.held_bytes() + 1;
    auto large = (*ex)->Run({{"x", Values({100000}, std::vector<float>(100000, 1.0f))}});
    REQUIRE(!large.ok());
    CHECK(large.status().code() == absl::StatusCode::kResourceExhausted);
    device.limit_bytes = 0;
    auto again = (*ex)->Run({{"x", Values({2}, {3, 4})}});
    INFO(again.status().ToString());
    REQUIRE(again.ok());
    CHECK(testing::Floats(again->at(0)) == std::vector<float>{36, 64});
  }
  CHECK(device.live_blocks() == 0);
}

TEST_CASE("LastAlong brings the last entry along an axis to the host",
          "[runtime][executor][device][resident]") {
  auto g = CacheGraph();
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const Tensor host = Values({2, 3, 4}, v);
  FakeDevice device;
  auto cpu = MakeCpuBackend(1);
  for (Backend* backend : {static_cast<Backend*>(&device), cpu.get()}) {
    INFO(backend->name());
    auto ex = Executor::Create(*g, *backend, nullptr);
    REQUIRE(ex.ok());
    Tensor t = host;
    if (backend == &device) {  // as a kept output: in device memory
      void* p = device.Allocate(host.nbytes());
      device.CopyFromHost(p, host.raw(), host.nbytes());
      t = Tensor(DType::kF32, {2, 3, 4}, p);
      t.set_owner(std::shared_ptr<void>(p, [&device](void* q) { device.Free(q); }));
    }
    auto seq = (*ex)->LastAlong(t, 1);
    REQUIRE(seq.ok());
    CHECK(seq->shape() == std::vector<int64_t>{2, 1, 4});
    CHECK(testing::Floats(*seq) == std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23});
    auto batch = (*ex)->LastAlong(t, 0);
    REQUIRE(batch.ok());
    CHECK(testing::Floats(*batch) == std::vector<float>(v.begin() + 12, v.end()));
    auto last = (*ex)->LastAlong(t, 2);
    REQUIRE(last.ok());
    CHECK(testing::Floats(*last) == std::vector<float>{3, 7, 11, 15, 19, 23});
    CHECK(!(*ex)->LastAlong(t, 3).ok());
    // A dim of 1 already (a decode step's logits): the whole tensor.
    Tensor one(t.dtype(), {2, 1, 12}, t.raw());
    one.set_owner(t.owner());
    auto whole = (*ex)->LastAlong(one, 1);
    REQUIRE(whole.ok());
    CHECK(whole->shape() == std::vector<int64_t>{2, 1, 12});
    CHECK(testing::Floats(*whole) == v);
  }
}

TEST_CASE("SizeClass rounds to 512 bytes, then to eighths of a power of two", "[runtime][memory]") {
  CHECK(SizeClass(0) == 512);
  CHECK(SizeClass(1) == 512);
  CHECK(SizeClass(513) == 1024);
  CHECK(SizeClass(4096) == 4096);
  CHECK(SizeClass(4097) == 4096 + 512);
  CHECK(SizeClass(int64_t{1} << 21) == int64_t{1} << 21);
  CHECK(SizeClass((int64_t{1} << 21) + 1) == (int64_t{1} << 21) + (int64_t{1} << 18));
  for (int64_t b = 1; b < (int64_t{1} << 40); b = b * 5 / 4 + 7) {
    const int64_t c = SizeClass(b);
    INFO(b << " -> " << c);
    CHECK(c >= b);
    CHECK(c % 512 == 0);
    CHECK((c <= 4096 ? c - b < 512 : c * 8 <= b * 9));
    CHECK(SizeClass(c) == c);  // a class is its own class
  }
}

TEST_CASE("A value growing each run takes a few size classes, and the plans stay bounded",
          "[runtime][executor][device][resident]") {
  // The cache graph's present grows by 16 KiB a run (x of 4096 floats).
  auto g = std::make_unique<ir::Graph>();
  g->opsets()[""] = 18;
  ir::Value* x = g->AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(4096)}));
  ir::Value* past = g->AddPlaceholder("past", ir::TensorType(DType::kF32, {Dim::Symbol("p")}));
  ir::Value* y = g->AddCall("", "Add", {x, x}, {"y"})->output();
  ir::Value* present =
      g->AddCall("", "Concat", {past, y}, {"present"}, {{"axis", int64_t{0}}})->output();
  g->SetOutputs({present});
  REQUIRE(onnx::InferShapes(*g).ok());
  FakeDevice device;
  {
    auto ex = Executor::Create(*g, device, nullptr);
    REQUIRE(ex.ok());
    Executor::Resident resident;
    resident.keep = {"present"};
    std::vector<float> ones(4096, 1.0f);
    const int runs = 200;
    Tensor kept = Values({0}, {});
    for (int run = 0; run < runs; ++run) {
      if (run == 0) device.sizes_requested.clear();
      std::map<std::string, Tensor> host = {{"x", Values({4096}, ones)}};
      resident.inputs.clear();
      (run == 0 ? host : resident.inputs)["past"] = kept;
      auto out = (*ex)->Run(host, resident);
      REQUIRE(out.ok());
      kept = (*out)[0];
      CHECK((*ex)->last_stats().plans <= 32);
    }
    CHECK((*ex)->last_stats().plans == 32);  // one per past length, the oldest dropped
    REQUIRE(kept.num_elements() == int64_t{4096} * runs);
    // From 16 KiB to 3.2 MiB: at most 8·log2(200) ≈ 61 classes for the present (and the
    // arena's y, one size), where exact sizes would be 200.
    INFO(device.sizes_requested.size() << " sizes requested");
    CHECK(device.sizes_requested.size() <= 64);
  }
  CHECK(device.live_blocks() == 0);
}

// Generation of `steps` tokens from `prompt` on `backend`, the presents kept in its
// memory (`resident`) or brought to the host and back each step.
GenerateResult GenerateOn(const ir::Graph& g, Backend& backend, const Tensor& prompt, int64_t steps,
                          bool resident) {
  auto ex = Executor::Create(g, backend, nullptr);
  REQUIRE(ex.ok());
  auto io = FindDecoderIo((*ex)->inputs(), (*ex)->outputs());
  REQUIRE(io.ok());
  io->pad_right = (*ex)->AnyKernel(&Kernel::rows_from_start);
  Executor::Resident kept;
  std::set<std::string> pasts;
  for (const DecoderIo::Cache& c : io->cache) {
    if (resident) kept.keep.insert(c.present);
    pasts.insert(c.past);
  }
  if (resident) kept.keep.insert(io->logits);  // its last position only comes to the host
  RankStep step = [&](const std::map<std::string, Tensor>& feed,
                      const StepKind& kind) -> absl::StatusOr<std::map<std::string, Tensor>> {
    REQUIRE_FALSE(kind.every_position);  // unpadded prompts
    std::map<std::string, Tensor> host;
    kept.inputs.clear();
    for (const auto& [name, t] : feed) {
      (resident && pasts.count(name) > 0 && t.num_elements() > 0 ? kept.inputs : host)[name] = t;
    }
    TPC_ASSIGN_OR_RETURN(auto out, (*ex)->Run(host, kept));
    std::map<std::string, Tensor> named;
    for (size_t k = 0; k < out.size(); ++k) {
      const std::string& name = (*ex)->outputs()[k].name;
      if (resident && name == io->logits) {
        TPC_ASSIGN_OR_RETURN(out[k], (*ex)->LastAlong(out[k], 1));
      }
      named[name] = std::move(out[k]);
    }
    return named;
  };
  auto r = Generate(*io, (*ex)->inputs(), (*ex)->outputs(), prompt, steps, step);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *std::move(r);
}

TEST_CASE("A KV cache kept on the device generates the host's tokens, never downloaded",
          "[runtime][executor][device][resident][generate]") {
  // tpc's own GPT-2, and the real exports: Optimum's (past_key_values.*, an attention
  // mask and positions) and onnxruntime-genai's (GroupQueryAttention, int4 MatMulNBits),
  // their nodes placed as the CUDA backend places them.
  for (const char* model :
       {"models/gpt2_kv.onnx", "models/optimum/llama/model.onnx", "models/optimum/gemma/model.onnx",
        "models/genai/llama_fp32/model.onnx", "models/genai/gemma_int4/model.onnx"}) {
    INFO(model);
    auto g = onnx::ImportModel(tpc::testing::SourcePath(model));
    REQUIRE(g.ok());
    Tensor prompt = Tensor::Allocate(DType::kI64, {2, 5});
    for (int64_t i = 0; i < prompt.num_elements(); ++i)
      prompt.data<int64_t>()[i] = (7 * i + 3) % 50;
    const int64_t steps = 6;
    BlasCpu cpu;
    const GenerateResult want = GenerateOn(**g, cpu, prompt, steps, false);
    int64_t down[2] = {0, 0};
    for (const bool resident : {false, true}) {
      INFO((resident ? "kept on the device" : "through the host"));
      FakeDevice device(testing::TestPlacement());
      const int64_t before = device.downloaded_bytes;
      const GenerateResult got = GenerateOn(**g, device, prompt, steps, resident);
      down[resident ? 1 : 0] = device.downloaded_bytes - before;
      CHECK(got.tokens == want.tokens);
      REQUIRE(got.last_logits.nbytes() == want.last_logits.nbytes());
      CHECK(std::memcmp(got.last_logits.raw(), want.last_logits.raw(), want.last_logits.nbytes()) ==
            0);
      CHECK(device.live_blocks() == 0);
    }
    // Kept: the logits' last positions (and the host's shape values) only. Through the
    // host: the caches and every position's logits, every step. (Where the build has no
    // CUDA, FakeTable leaves attention operators on the host, which read the cache there.)
    INFO("downloaded " << down[0] << " bytes through the host, " << down[1] << " kept");
    CHECK(down[1] > 0);
#ifdef TPC_HAVE_CUDA
    CHECK(down[1] * 4 < down[0]);
#else
    if (std::string(model) == "models/gpt2_kv.onnx") CHECK(down[1] * 4 < down[0]);
#endif
  }
}

}  // namespace
}  // namespace tpc::runtime
