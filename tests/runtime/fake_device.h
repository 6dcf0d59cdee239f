// A device backend without a GPU for the executor's tests: a fake device whose memory is
// host pages made inaccessible (mprotect) except while a "device" kernel or a copy runs,
// so a host kernel that touched device memory, or a device kernel handed a value still
// on the host, faults; it records and replays runs as a CUDA backend does. Its kernels
// are the CPU backend's (BlasCpu), so its outputs equal the CPU's bit for bit.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/backends.h"
#ifdef TPC_HAVE_CUDA
#include "tpc/runtime/cuda/cuda.h"
#endif
#include "tpc/runtime/kernel.h"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime::testing {

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
inline FakeDevice* g_device = nullptr;  // the trampolines' backend (one at a time)

// Operators the fake device "has", with the inputs its kernels read on the host.
inline const std::map<std::string, uint32_t> kDeviceOps = {
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
inline const std::set<std::string> kMovement = {
    "Concat", "Gather", "Reshape", "Slice", "Transpose", "Unsqueeze", "Where", "Expand", "Split"};

// Where a node runs: on the device, with the inputs its kernel reads on the host, or
// (nullopt) on the host.
using Placement = std::function<std::optional<uint32_t>(const ir::Node&)>;

inline std::optional<uint32_t> FakeTable(const ir::Node& node) {
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
    sizes_requested.insert(bytes);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t n = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
    if (limit_bytes > 0 && held_bytes() + n > limit_bytes) return nullptr;  // "out of memory"
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
    uploaded_bytes += static_cast<int64_t>(bytes);
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
    const bool was_open = open_;  // inside a device kernel (the arena's guards, written
    if (!was_open) Open();        // when the kernel allocates its output)
    std::memcpy(dst, src, bytes);
    if (!was_open) Close();
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (recording_ != nullptr) recording_failed_ = true;  // a wait inside a recording
    const bool was_open = open_;
    if (!was_open) Open();
    std::memcpy(dst, src, bytes);
    if (!was_open) Close();
    ++downloads;
    downloaded_bytes += static_cast<int64_t>(bytes);
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
    const bool was_open = open_;  // inside a device kernel, or a copy of the executor's
    if (!was_open) Open();
    std::memcpy(dst, src, bytes);
    if (!was_open) Close();
    ++device_copies;
  }
  Backend& host_backend() override { return *cpu_; }

  bool capture = false;  // can_capture()
  int uploads = 0, downloads = 0, device_steps = 0, host_steps = 0, captures = 0, launches = 0;
  int64_t uploaded_bytes = 0, downloaded_bytes = 0;
  int device_copies = 0;             // Copy calls
  std::set<size_t> sizes_requested;  // every Allocate's size
  // Whether `p` is in the device's memory; the blocks allocated and not freed.
  bool Holds(const void* p) const { return InDevice(p); }
  size_t live_blocks() const { return blocks_.size() - freed_.size(); }
  size_t held_bytes() const {
    size_t n = 0;
    for (const auto& [p, size] : blocks_) n += size;
    return n;
  }
  int64_t device_bytes() const override { return static_cast<int64_t>(held_bytes()); }
  size_t limit_bytes = 0;  // > 0: Allocate fails past this many bytes held
  std::string MemoryReport() const override {
    return "the fake device holds " + std::to_string(held_bytes()) + " bytes of " +
           std::to_string(limit_bytes);
  }

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
inline void RequireSame(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
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

// The CUDA backend's placement of nodes (cuda::PlaceOnDevice: which run on the device, and
// which inputs their kernels read on the host), or FakeTable in a build without CUDA.
inline Placement TestPlacement() {
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

}  // namespace tpc::runtime::testing
