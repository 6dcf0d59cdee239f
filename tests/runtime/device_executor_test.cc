// The executor with a backend whose memory is not the host's, without a GPU: a fake
// device whose memory is host pages made inaccessible (mprotect) except while a "device"
// kernel or a copy runs. A host kernel that touched device memory, or a device kernel
// handed a value still on the host, would fault or differ; every committed model must
// give the CPU backend's outputs bit for bit (the fake device runs the same CPU kernels).
#include <sys/mman.h>
#include <unistd.h>

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

using testing::ModelsWithData;
using testing::OtherData;
using testing::ReadInputs;

// The CPU backend without kernel states, so that its MatMul by a constant weight takes
// BLAS, as a device copy of the weight does (oneDNN's packed weight serves only the
// constant's own bytes: PackedMatMul). oneDNN and OpenBLAS agree bit for bit on AVX-512
// cores, not on the SSE or AVX2 kernels OpenBLAS picks on a CPU it does not recognise
// (the lent H100's host): the fake device's results and the reference must come from one
// GEMM library for the bitwise comparisons below.
class BlasCpu final : public Backend {
 public:
  BlasCpu() : cpu_(MakeCpuBackend(1)) {}
  std::string name() const override { return cpu_->name(); }
  const Kernel* FindKernel(std::string_view domain, std::string_view op) const override {
    return cpu_->FindKernel(domain, op);
  }
  void* Allocate(size_t bytes) override { return cpu_->Allocate(bytes); }
  void Free(void* p) override { cpu_->Free(p); }
  void CopyFromHost(void* dst, const void* src, size_t n) override {
    cpu_->CopyFromHost(dst, src, n);
  }
  void CopyToHost(void* dst, const void* src, size_t n) override { cpu_->CopyToHost(dst, src, n); }
  void Copy(void* dst, const void* src, size_t n) override { cpu_->Copy(dst, src, n); }
  ThreadPool& pool() override { return cpu_->pool(); }

 private:
  std::unique_ptr<Backend> cpu_;
};

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
      : cpu_(std::make_unique<BlasCpu>()), place_(std::move(place)) {
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
    if (recording_ != nullptr) {
      recording_->pinned.push_back(p);
      ++pinned_[p];
    }
    return p;
  }
  void Free(void* p) override {
    auto it = blocks_.find(p);
    REQUIRE(it != blocks_.end());
    REQUIRE(freed_.count(p) == 0);
    if (pinned_.count(p) > 0) {  // a record uses it: mapped until the record goes
      freed_.insert(p);
      return;
    }
    munmap(p, it->second);
    blocks_.erase(it);
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    ++uploads;
    if (refilling_ != nullptr) {  // a replay's upload refills the recorded one
      while (next_ < refilling_->ops.size() && refilling_->ops[next_].node != nullptr) ++next_;
      if (next_ == refilling_->ops.size() || refilling_->ops[next_].dst != dst ||
          refilling_->ops[next_].bytes.size() != bytes) {
        refill_error_ = true;
        return;
      }
      std::memcpy(refilling_->ops[next_++].bytes.data(), src, bytes);
      return;
    }
    if (recording_ != nullptr) {
      Op op;
      op.dst = dst;
      op.bytes.assign(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + bytes);
      recording_->ops.push_back(std::move(op));
    }
    Open();
    std::memcpy(dst, src, bytes);
    Close();
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (recording_ != nullptr) recording_failed_ = true;  // a wait inside a recording
    Open();
    std::memcpy(dst, src, bytes);
    Close();
    ++downloads;
  }

  // Capture as a CUDA backend does it, with one difference the executor must not see:
  // kernels compute while they are recorded (the CPU kernels allocate their outputs as
  // they compute), and EndCapture then overwrites everything they and the uploads wrote,
  // so that only a Launch, which runs the record again on the recorded memory, gives
  // the run's results.
  bool can_capture() const override { return capture; }
  absl::Status Synchronize() override {
    if (recording_ != nullptr) return absl::FailedPreconditionError("synchronise while recording");
    return absl::OkStatus();
  }
  absl::Status BeginCapture() override {
    REQUIRE(recording_ == nullptr);
    recording_ = new Record(this);
    recording_failed_ = false;
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Captured>> EndCapture() override {
    std::unique_ptr<Record> r(recording_);
    recording_ = nullptr;
    if (recording_failed_) return absl::FailedPreconditionError("a download while recording");
    Open();
    for (const Op& op : r->ops) {
      if (op.node == nullptr) std::memset(op.dst, 0x7f, op.bytes.size());
      for (const Tensor& t : op.outputs) {
        if (t.raw() != nullptr) std::memset(t.raw(), 0x7f, t.nbytes());
      }
    }
    Close();
    ++captures;
    return std::unique_ptr<Captured>(std::move(r));
  }
  void BeginReplay(Captured& c) override {
    refilling_ = &static_cast<Record&>(c);
    next_ = 0;
    refill_error_ = false;
  }
  absl::Status EndReplay() override {
    Record* r = refilling_;
    refilling_ = nullptr;
    while (next_ < r->ops.size() && r->ops[next_].node != nullptr) ++next_;
    if (refill_error_ || next_ != r->ops.size()) {
      return absl::InternalError("the replay's uploads differ from the record's");
    }
    return absl::OkStatus();
  }
  absl::Status Launch(Captured& c) override {
    ++launches;
    Open();
    absl::Status s;
    for (const Op& op : static_cast<Record&>(c).ops) {
      if (op.node == nullptr) {
        std::memcpy(op.dst, op.bytes.data(), op.bytes.size());
        continue;
      }
      std::vector<const Tensor*> ins;
      for (const Tensor& t : op.inputs)
        ins.push_back(t.dtype() == ir::DType::kUndefined ? nullptr : &t);
      RecordedOutputs alloc(op.outputs);
      KernelContext ctx(*op.node, ins, op.out_types, alloc, nullptr, *cpu_, op.opset);
      ctx.set_wanted(op.wanted);
      s.Update(cpu_->FindKernel(op.node->domain(), op.node->op_type())->fn(ctx));
      for (size_t k = 0; k < op.outputs.size() && s.ok(); ++k) {
        if (op.outputs[k].raw() != ctx.output(static_cast<int>(k)).raw()) {
          s = absl::InternalError(op.node->Describe() + ": an output moved in the replay");
        }
      }
    }
    Close();
    return s;
  }
  // Within device memory only (a host kernel copies through the host backend).
  void Copy(void* dst, const void* src, size_t bytes) override {
    REQUIRE(InDevice(dst));
    REQUIRE(InDevice(src));
    std::memcpy(dst, src, bytes);
  }
  Backend& host_backend() override { return *cpu_; }

  bool capture = false;  // can_capture()
  int uploads = 0, downloads = 0, device_steps = 0, host_steps = 0, captures = 0, launches = 0;

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
    if (Record* r = g_device->recording_; r != nullptr && s.ok()) {
      Op op;
      op.node = &ctx.node();
      op.opset = ctx.opset();
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const Tensor* t = ctx.optional_input(i);
        if (t == nullptr) {
          op.inputs.emplace_back();
        } else if (g_device->InDevice(t->raw()) || t->nbytes() == 0) {
          op.inputs.emplace_back(t->dtype(), t->shape(), t->raw());
        } else {
          // A value the kernel read on the host (a shape): a real kernel takes it into
          // its launch; the record keeps a copy.
          Tensor c = Tensor::Allocate(t->dtype(), t->shape());
          std::memcpy(c.raw(), t->raw(), t->nbytes());
          op.inputs.push_back(c);
        }
      }
      for (int k = 0; k < ctx.num_outputs(); ++k) {
        const Tensor& t = ctx.output(k);
        op.out_types.push_back(ctx.output_dtype(k));
        op.outputs.push_back(Tensor(t.dtype(), t.shape(), t.raw()));
        op.wanted.push_back(ctx.wants_output(k));
      }
      r->ops.push_back(std::move(op));
    }
    return s;
  }
  // A host kernel: the device's memory stays closed (touching it faults).
  static absl::Status HostTrampoline(KernelContext& ctx) {
    ++g_device->host_steps;
    return Call(ctx);
  }

  // One recorded upload (node null) or kernel.
  struct Op {
    const ir::Node* node = nullptr;
    int64_t opset = 0;
    std::vector<Tensor> inputs;  // undefined: omitted
    std::vector<ir::DType> out_types;
    std::vector<Tensor> outputs;
    std::vector<bool> wanted;
    void* dst = nullptr;
    std::vector<uint8_t> bytes;  // an upload's source, refilled by replays
  };
  struct Record final : Captured {
    explicit Record(FakeDevice* d) : device(d) {}
    ~Record() override { device->Unpin(pinned); }
    FakeDevice* device;
    std::vector<Op> ops;
    std::vector<void*> pinned;
  };
  // A replayed kernel's outputs: the recorded memory.
  class RecordedOutputs final : public OutputAllocator {
   public:
    explicit RecordedOutputs(const std::vector<Tensor>& outs) : outs_(outs) {}
    absl::StatusOr<Tensor> AllocateOutput(int index, ir::DType dtype,
                                          const std::vector<int64_t>& shape) override {
      const Tensor& t = outs_[static_cast<size_t>(index)];
      if (t.dtype() != dtype || t.shape() != shape) {
        return absl::InternalError("a replayed kernel's output differs from the recorded one");
      }
      return t;
    }

   private:
    const std::vector<Tensor>& outs_;
  };
  void Unpin(const std::vector<void*>& blocks) {
    for (void* p : blocks) {
      if (--pinned_[p] > 0) continue;
      pinned_.erase(p);
      if (freed_.erase(p) > 0) {
        munmap(p, blocks_[p]);
        blocks_.erase(p);
      }
    }
  }

  std::unique_ptr<Backend> cpu_;
  Placement place_;
  Record* recording_ = nullptr;
  bool recording_failed_ = false;
  Record* refilling_ = nullptr;
  size_t next_ = 0;
  bool refill_error_ = false;
  std::map<void*, int> pinned_;  // blocks records use, with their count
  std::set<void*> freed_;        // pinned blocks the executor freed
  std::map<void*, size_t> blocks_;
  bool open_ = false;
  mutable std::map<std::string, Kernel> device_kernels_, host_kernels_;
};

// Requires `got` to equal `want` bit for bit; a failure names the output, the first
// differing element and, for f32, both values (not the buffers: they can be megabytes).
void RequireSame(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("output " << k);
    REQUIRE(got[k].shape() == want[k].shape());
    REQUIRE(got[k].dtype() == want[k].dtype());
    const auto* g = static_cast<const uint8_t*>(got[k].raw());
    const auto* w = static_cast<const uint8_t*>(want[k].raw());
    const size_t n = got[k].nbytes();
    const size_t first = static_cast<size_t>(std::mismatch(g, g + n, w).first - g);
    const size_t element =
        first / static_cast<size_t>(std::max<int64_t>(1, ir::DTypeSize(got[k].dtype())));
    std::ostringstream values;
    values.precision(9);
    if (first < n && got[k].dtype() == ir::DType::kF32) {
      values << ": got " << got[k].data<float>()[element] << ", want "
             << want[k].data<float>()[element];
    }
    INFO("first differing byte " << first << " of " << n << " (element " << element << ")"
                                 << values.str());
    REQUIRE(first == n);
  }
}

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

Placement TestPlacement() {
#ifdef TPC_HAVE_CUDA
  return [](const ir::Node& node) -> std::optional<uint32_t> {
    const cuda::DevicePlacement p = cuda::PlaceOnDevice(node, false);
    if (!p.device) return std::nullopt;
    return p.host_inputs;
  };
#else
  return FakeTable;
#endif
}

TEST_CASE("A recorded run replays with new data and equals the queued runs",
          "[runtime][executor][device][capture]") {
  int replayed_models = 0;
  for (const auto& [name, path, data] : ModelsWithData()) {
    INFO("model " << name);
    auto g = onnx::ImportModel(path);
    REQUIRE(g.ok());
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
    auto ex = Executor::Create(**g, device, nullptr, {.capture = true});
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
    CHECK(!waited);  // the CUDA table has a device kernel for every wait
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
  auto ex = Executor::Create(*g, device, nullptr, {.capture = true});
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
    auto ex2 = Executor::Create(*g, many, nullptr, {.capture = true});
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
    auto ex2 = Executor::Create(*g, rank_device, &comm, {.capture = true});
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
    auto ex2 = Executor::Create(*g, plain, nullptr, {.capture = true});
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
  // waits for the device, so every run can be recorded as a CUDA graph.
  const auto waits = RunCommittedModels(TestPlacement());
  CHECK(waits.size() >= 10);
  for (const auto& [name, by_op] : waits) {
    INFO("model " << name);
    std::string ops;
    for (const auto& [op, n] : by_op) ops += " " + op + " " + std::to_string(n);
    INFO("waits:" << ops);
    CHECK(by_op.empty());
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
