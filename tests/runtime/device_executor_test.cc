// The executor with a backend whose memory is not the host's, without a GPU: a fake
// device whose memory is host pages made inaccessible (mprotect) except while a "device"
// kernel or a copy runs. A host kernel that touched device memory, or a device kernel
// handed a value still on the host, would fault or differ; every committed model must
// give the CPU backend's outputs bit for bit (the fake device runs the same CPU kernels).
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/backend.h"
#ifdef TPC_HAVE_CUDA
#include "tpc/runtime/cuda/cuda.h"
#endif
#include "tpc/runtime/executor.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

class FakeDevice;
FakeDevice* g_device = nullptr;  // the trampolines' backend (one at a time)

// Operators the fake device "has", with the inputs its kernels read on the host.
const std::map<std::string, uint32_t> kDeviceOps = {
    {"Add", 0},
    {"Cast", 0},
    {"Concat", 0},
    {"Div", 0},
    {"Erf", 0},
    {"Gather", 0},
    {"Gemm", 0},
    {"LayerNormalization", 0},
    {"MatMul", 0},
    {"Mul", 0},
    {"Pow", 0},
    {"Reshape", 1u << 1},
    {"Slice", 0x1eu},
    {"Softmax", 0},
    {"Sqrt", 0},
    {"Sub", 0},
    {"Tanh", 0},
    {"Transpose", 0},
    {"Unsqueeze", 1u << 1},
    {"Where", 0},
    {"Expand", 1u << 1},
    {"ReduceMean", 1u << 1},
    {"Split", 1u << 1},
    {"Sigmoid", 0},
};
const std::set<std::string> kMovement = {"Concat",    "Gather", "Reshape", "Slice", "Transpose",
                                         "Unsqueeze", "Where",  "Expand",  "Split"};

// Where a node runs: on the device, with the inputs its kernel reads on the host, or
// (nullopt) on the host.
using Placement = std::function<std::optional<uint32_t>(const ir::Node&)>;

std::optional<uint32_t> FakeTable(const ir::Node& node) {
  auto it = kDeviceOps.find(node.op_type());
  bool ok = it != kDeviceOps.end() && node.domain().empty();
  for (const ir::Value* v : node.outputs()) {
    ok = ok && (v->type().dtype == ir::DType::kF32 || kMovement.count(node.op_type()));
  }
  if (!ok) return std::nullopt;
  return it->second;
}

class FakeDevice final : public Backend {
 public:
  explicit FakeDevice(Placement place = FakeTable)
      : cpu_(MakeCpuBackend(1)), place_(std::move(place)) {
    g_device = this;
  }
  ~FakeDevice() override {
    for (auto& [p, n] : blocks_) munmap(p, n);
    g_device = nullptr;
  }
  std::string name() const override { return "fakedevice"; }
  bool host_memory() const override { return false; }
  ThreadPool& pool() override { return cpu_->pool(); }

  const Kernel* FindKernel(std::string_view domain, std::string_view op) const override {
    return FindHostKernel(domain, op);
  }
  const Kernel* FindKernelFor(const ir::Node& node) const override {
    const std::optional<uint32_t> host_inputs = place_(node);
    if (!host_inputs) return FindHostKernel(node.domain(), node.op_type());
    auto& k = device_kernels_[node.domain() + "::" + node.op_type()];
    k = Kernel{.fn = DeviceTrampoline, .any_float = true, .host_inputs = *host_inputs};
    return &k;
  }
  const Kernel* FindHostKernel(std::string_view domain, std::string_view op) const override {
    const Kernel* k = cpu_->FindKernel(domain, op);
    if (k == nullptr) return nullptr;
    auto& h = host_kernels_[std::string(domain) + "::" + std::string(op)];
    h = *k;
    h.fn = HostTrampoline;
    h.host = true;
    return &h;
  }

  void* Allocate(size_t bytes) override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t n = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    blocks_[p] = n;
    if (!open_) mprotect(p, n, PROT_NONE);
    return p;
  }
  void Free(void* p) override {
    auto it = blocks_.find(p);
    REQUIRE(it != blocks_.end());
    munmap(p, it->second);
    blocks_.erase(it);
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    Open();
    std::memcpy(dst, src, bytes);
    Close();
    ++uploads;
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    Open();
    std::memcpy(dst, src, bytes);
    Close();
    ++downloads;
  }
  // Within device memory only (a host kernel copies through the host backend).
  void Copy(void* dst, const void* src, size_t bytes) override {
    REQUIRE(InDevice(dst));
    REQUIRE(InDevice(src));
    std::memcpy(dst, src, bytes);
  }
  Backend& host_backend() override { return *cpu_; }

  int uploads = 0, downloads = 0, device_steps = 0, host_steps = 0;
  std::set<std::string> host_ops;  // op types of the host steps

 private:
  bool InDevice(const void* p) const {
    auto it = blocks_.upper_bound(const_cast<void*>(p));
    if (it == blocks_.begin()) return false;
    --it;
    return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
  }
  void Open() { Protect(PROT_READ | PROT_WRITE, true); }
  void Close() { Protect(PROT_NONE, false); }
  void Protect(int prot, bool open) {
    for (auto& [p, n] : blocks_) mprotect(p, n, prot);
    open_ = open;
  }
  static absl::Status Call(KernelContext& ctx) {
    return g_device->cpu_->FindKernel(ctx.node().domain(), ctx.node().op_type())->fn(ctx);
  }
  // A device kernel: the device's memory is open while it runs.
  static absl::Status DeviceTrampoline(KernelContext& ctx) {
    ++g_device->device_steps;
    g_device->Open();
    absl::Status s = Call(ctx);
    g_device->Close();
    return s;
  }
  // A host kernel: the device's memory stays closed (touching it faults).
  static absl::Status HostTrampoline(KernelContext& ctx) {
    ++g_device->host_steps;
    g_device->host_ops.insert(ctx.node().op_type());
    return Call(ctx);
  }

  std::unique_ptr<Backend> cpu_;
  Placement place_;
  std::map<void*, size_t> blocks_;
  bool open_ = false;
  mutable std::map<std::string, Kernel> device_kernels_, host_kernels_;
};

std::map<std::string, Tensor> ReadInputs(const std::string& data) {
  std::map<std::string, Tensor> inputs;
  for (int k = 0; std::filesystem::exists(data + "/input_" + std::to_string(k) + ".pb"); ++k) {
    auto t = ReadTensorProtoFile(data + "/input_" + std::to_string(k) + ".pb");
    REQUIRE(t.ok());
    inputs[t->name] = t->tensor;
  }
  return inputs;
}

// Runs every committed model with test data on a fake device placing nodes by `place`,
// twice (the second run reuses the plan and the arena), and checks the outputs equal the
// CPU backend's bit for bit. Returns each model's host waits (RunStats::host_waits).
std::map<std::string, int> RunCommittedModels(const Placement& place) {
  std::map<std::string, int> waits;
  for (const auto& entry : std::filesystem::directory_iterator(testing::SourcePath("models"))) {
    if (entry.path().extension() != ".onnx") continue;
    const std::string name = entry.path().stem().string();
    const std::string data = testing::SourcePath("models/" + name + "/test_data_set_0");
    if (!std::filesystem::exists(data)) continue;
    INFO("model " << name);
    auto g = onnx::ImportModel(entry.path().string());
    REQUIRE(g.ok());
    const auto inputs = ReadInputs(data);
    auto cpu = MakeCpuBackend(1);
    auto cpu_ex = Executor::Create(**g, *cpu, nullptr);
    REQUIRE(cpu_ex.ok());
    auto want = (*cpu_ex)->Run(inputs);
    REQUIRE(want.ok());
    FakeDevice device(place);
    auto ex = Executor::Create(**g, device, nullptr);
    INFO(ex.status().ToString());
    REQUIRE(ex.ok());
    for (int run = 0; run < 2; ++run) {
      auto got = (*ex)->Run(inputs);
      INFO(got.status().ToString());
      REQUIRE(got.ok());
      REQUIRE(got->size() == want->size());
      for (size_t k = 0; k < got->size(); ++k) {
        INFO("output " << k);
        REQUIRE((*got)[k].shape() == (*want)[k].shape());
        REQUIRE((*got)[k].dtype() == (*want)[k].dtype());
        REQUIRE(std::memcmp((*got)[k].raw(), (*want)[k].raw(), (*got)[k].nbytes()) == 0);
      }
    }
    CHECK(device.device_steps > 0);
    CHECK(device.uploads > 0);    // constants and inputs
    CHECK(device.downloads > 0);  // outputs
    waits[name] = (*ex)->last_stats().host_waits;
    std::string ops;
    for (const std::string& op : device.host_ops) ops += " " + op;
    WARN(name << ": host steps " << device.host_steps / 2 << ":" << ops);
  }
  return waits;
}

TEST_CASE(
    "A device backend's executor keeps host and device values apart and gets the CPU's "
    "outputs",
    "[runtime][executor][device]") {
  const std::map<std::string, int> waits = RunCommittedModels(FakeTable);
  CHECK(waits.size() >= 10);
}

#ifdef TPC_HAVE_CUDA
TEST_CASE("The CUDA kernel table places the committed models' steps without host waits",
          "[runtime][executor][device][cuda]") {
  const std::map<std::string, int> waits =
      RunCommittedModels([](const ir::Node& node) -> std::optional<uint32_t> {
        const cuda::DevicePlacement p = cuda::PlaceOnDevice(node, false);
        if (!p.device) return std::nullopt;
        return p.host_inputs;
      });
  for (const auto& [name, n] : waits) {
    INFO("model " << name);
    WARN(name << ": " << n);
  }
}
#endif

}  // namespace
}  // namespace tpc::runtime
