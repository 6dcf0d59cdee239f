// Building an executor: the graph's nodes as steps of the backend's kernels, slots and
// lifetimes, constant sub-graphs folded, constants uploaded to a device backend.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor_parts.h"
#include "tpc/runtime/executor.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

Executor::Executor(const ir::Graph& graph, Backend& backend, Communicator* comm,
                   ExecutorOptions options)
    : graph_(graph),
      backend_(backend),
      comm_(comm),
      options_(options),
      device_(!backend.host_memory()) {}

Executor::~Executor() {
  if (arena_ != nullptr) backend_.Free(arena_);
}

bool Executor::AnyKernel(bool Kernel::*flag) const {
  for (const Step& step : steps_) {
    if (step.kernel != nullptr && step.kernel->*flag) return true;
  }
  return false;
}

int64_t Executor::FixedCacheRows(const std::string& name) const {
  int64_t rows = 0;
  for (const Step& step : steps_) {
    if (step.kernel == nullptr || step.kernel->fixed_cache_rows == nullptr) continue;
    for (int i = 0; i < step.node->num_inputs(); ++i) {
      const ir::Value* v = step.node->input(i);
      if (v != nullptr && v->name() == name) {
        rows = std::max(rows, step.kernel->fixed_cache_rows(*step.node, i));
      }
    }
  }
  return rows;
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const ir::Graph& graph, Backend& backend,
                                                           Communicator* comm,
                                                           ExecutorOptions options) {
  if (options.guard_bytes < 0 || options.guard_bytes > kMaxArenaGuard) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ExecutorOptions::guard_bytes ", options.guard_bytes, ": expected 0 to ", kMaxArenaGuard));
  }
  options.guard_bytes = (options.guard_bytes + 63) / 64 * 64;  // values stay aligned
  std::unique_ptr<Executor> ex(new Executor(graph, backend, comm, options));
  TPC_RETURN_IF_ERROR(ex->Build());
  return ex;
}

absl::Status Executor::Build() {
  // Values already in host memory (device backends): graph inputs, constants, outputs
  // of host steps. A step on such values with no float output (shape arithmetic) runs
  // on the host too, so that shapes never go to the device and back.
  std::set<const ir::Value*> host_resident;
  auto is_float = [](ir::DType t) {
    return t == ir::DType::kF32 || t == ir::DType::kF16 || t == ir::DType::kBF16 ||
           t == ir::DType::kF64;
  };
  auto slot_for = [&](const ir::Value* v) {
    auto [it, inserted] = slot_of_.emplace(v, static_cast<int>(slot_values_.size()));
    if (inserted) slot_values_.push_back(v);
    return it->second;
  };
  for (ir::Node* n : graph_.nodes()) {
    switch (n->kind()) {
      case ir::NodeKind::kPlaceholder:
        input_slots_.push_back(slot_for(n->output()));
        host_resident.insert(n->output());
        inputs_.push_back({n->output()->name(), n->output()->type()});
        break;
      case ir::NodeKind::kConstant: {
        const ir::Tensor& t = n->tensor();
        if (!t.has_data()) {
          return absl::InvalidArgumentError(
              absl::StrCat("constant '", n->output()->name(), "' has no data (elided)"));
        }
        Tensor view(t.dtype(), t.shape(), const_cast<uint8_t*>(t.data()));
        const int64_t esize = std::max<int64_t>(ir::DTypeSize(t.dtype()), 1);
        if (reinterpret_cast<uintptr_t>(t.data()) % static_cast<uintptr_t>(esize) != 0) {
          // Embedded raw_data can sit at any offset of the model file: copy it once.
          Tensor copy = Tensor::Allocate(t.dtype(), t.shape());
          std::memcpy(copy.raw(), t.data(), t.nbytes());
          view = copy;
        }
        Constant c{slot_for(n->output()), {}, {}};
        (device_ ? c.host : c.mem) = view;
        constants_.push_back(std::move(c));
        host_resident.insert(n->output());
        constant_refs_.push_back(t);
        break;
      }
      case ir::NodeKind::kCall: {
        Step step;
        step.node = n;
        step.kernel = backend_.FindKernelFor(*n);
        if (device_ && step.kernel != nullptr && !step.kernel->host) {
          bool shape_math = true;
          for (const ir::Value* in : n->inputs()) {
            shape_math = shape_math && (in == nullptr || host_resident.count(in) > 0);
          }
          for (const ir::Value* out : n->outputs()) {
            shape_math = shape_math && !is_float(out->type().dtype);
          }
          const Kernel* host =
              shape_math ? backend_.FindHostKernel(n->domain(), n->op_type()) : nullptr;
          if (host != nullptr) step.kernel = host;
        }
        if (step.kernel == nullptr) {
          return absl::UnimplementedError(
              absl::StrCat(n->Describe(), ": the ", backend_.name(), " backend has no kernel for ",
                           n->domain().empty() ? "" : n->domain() + "::", n->op_type()));
        }
        step.on_host = device_ && step.kernel->host;
        // Views on the host backend only (a device kernel's copy is cheap and ordered).
        step.view = step.kernel->view && !device_ && n->num_inputs() >= 1 &&
                    n->input(0) != nullptr && n->num_outputs() >= 1;
        if (step.on_host) {
          for (const ir::Value* out : n->outputs()) host_resident.insert(out);
        }
        if (device_ && !step.on_host && !step.kernel->any_float) {
          return absl::InternalError(absl::StrCat(n->Describe(), ": the ", backend_.name(),
                                                  " kernel must handle every float type"));
        }
        for (ir::Value* in : n->inputs()) step.in_slots.push_back(in ? slot_for(in) : -1);
        for (ir::Value* out : n->outputs()) {
          step.out_slots.push_back(slot_for(out));
          step.wanted.push_back(out->has_uses());
        }
        steps_.push_back(std::move(step));
        break;
      }
      case ir::NodeKind::kOutput:
        for (ir::Value* v : n->inputs()) {
          output_slots_.push_back(slot_for(v));
          outputs_.push_back({v->name(), v->type()});
        }
        break;
    }
  }
  TPC_RETURN_IF_ERROR(FoldConstantSteps());
  if (device_) TPC_RETURN_IF_ERROR(UploadConstants());
  TPC_RETURN_IF_ERROR(PrepareSteps());
  std::set<std::string> seen;
  for (const ir::Value* v : slot_values_) {
    if (!v->type().shape) continue;
    for (const ir::Dim& d : *v->type().shape) {
      if (IsFractional(d) && seen.insert(d.ToString()).second) split_dims_.emplace_back(v, d);
    }
  }
  // Lifetimes: the last step that reads each slot; graph outputs are pinned.
  last_use_.assign(slot_values_.size(), -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].in_slots) {
      if (s >= 0) last_use_[static_cast<size_t>(s)] = static_cast<int64_t>(i);
    }
  }
  for (int s : output_slots_) last_use_[static_cast<size_t>(s)] = kPinned;
  // A view's bytes are its root's (the first value of a chain of views): the root lives
  // as long as its last view is read.
  std::vector<int> root(slot_values_.size());
  for (size_t s = 0; s < root.size(); ++s) root[s] = static_cast<int>(s);
  for (const Step& step : steps_) {
    if (step.view) {
      root[static_cast<size_t>(step.out_slots[0])] = root[static_cast<size_t>(step.in_slots[0])];
    }
  }
  for (size_t s = 0; s < root.size(); ++s) {
    int64_t& r = last_use_[static_cast<size_t>(root[s])];
    if (root[s] != static_cast<int>(s)) r = std::max(r, last_use_[s]);
  }
  for (Step& step : steps_) {
    for (size_t k = 0; k < step.out_slots.size(); ++k) {
      if (last_use_[static_cast<size_t>(step.out_slots[k])] == kPinned) step.wanted[k] = true;
    }
  }
  // A slot is dropped after its last use (a view's root after its last view's, which
  // need not read the root itself); a value nothing reads, right after its step.
  for (size_t s = 0; s < last_use_.size(); ++s) {
    const int64_t last = last_use_[s];
    if (last >= 0 && last != kPinned)
      steps_[static_cast<size_t>(last)].frees.push_back(static_cast<int>(s));
  }
  for (Step& step : steps_) {
    for (int s : step.out_slots) {
      if (last_use_[static_cast<size_t>(s)] == -1) step.frees.push_back(s);
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::FoldConstantSteps() {
  // Steps whose inputs are all constants (a transposed weight, a mask) run once here;
  // their outputs become constants. Collectives never fold: every rank must call them.
  std::vector<bool> is_const(slot_values_.size(), false);
  Values values(slot_values_.size());
  for (const Constant& c : constants_) {
    is_const[static_cast<size_t>(c.slot)] = true;
    values.mem[static_cast<size_t>(c.slot)] = c.mem;
    values.host[static_cast<size_t>(c.slot)] = c.host;
  }
  Plan unplanned;
  unplanned.offsets.assign(slot_values_.size(), -1);
  std::vector<Step> kept;
  for (Step& step : steps_) {
    bool foldable = step.node->domain() != "tpc";
    for (int s : step.in_slots) foldable = foldable && (s < 0 || is_const[static_cast<size_t>(s)]);
    if (!foldable) {
      kept.push_back(std::move(step));
      continue;
    }
    TPC_RETURN_IF_ERROR(RunStep(step, unplanned, values));
    for (int s : step.out_slots) {
      is_const[static_cast<size_t>(s)] = true;
      constants_.push_back(
          {s, values.mem[static_cast<size_t>(s)], values.host[static_cast<size_t>(s)]});
    }
  }
  steps_ = std::move(kept);
  return absl::OkStatus();
}

namespace {

// Kernel::prepare's contexts have no outputs.
class NoOutputs : public OutputAllocator {
 public:
  absl::StatusOr<Tensor> AllocateOutput(int, ir::DType, const std::vector<int64_t>&) override {
    return absl::InternalError("a kernel's prepare allocated an output");
  }
};

}  // namespace

absl::Status Executor::PrepareSteps() {
  // Each constant where a step reads it: the backend's memory, or the host's for a host
  // step (a device backend's constants may have only one of the two).
  std::vector<const Tensor*> mem(slot_values_.size(), nullptr), host(slot_values_.size(), nullptr);
  for (const Constant& c : constants_) {
    const auto s = static_cast<size_t>(c.slot);
    if (c.mem.dtype() != ir::DType::kUndefined) mem[s] = &c.mem;
    if (c.host.dtype() != ir::DType::kUndefined) host[s] = &c.host;
  }
  NoOutputs no_outputs;
  for (const Step& step : steps_) {
    if (step.kernel->prepare == nullptr) continue;
    std::vector<const Tensor*> ins;
    std::vector<Tensor> converted;  // f32 stand-ins of half constants, as RunStep's
    converted.reserve(step.in_slots.size());
    for (const int s : step.in_slots) {
      const Tensor* t = s < 0 ? nullptr : (step.on_host ? host : mem)[static_cast<size_t>(s)];
      if (t != nullptr && !step.kernel->any_float && IsHalfType(t->dtype())) {
        converted.push_back(ConvertFloats(*t, ir::DType::kF32));
        t = &converted.back();
      }
      ins.push_back(t);
    }
    KernelContext ctx(*step.node, std::move(ins), {}, no_outputs, comm_,
                      step.on_host ? backend_.host_backend() : backend_, graph_.onnx_opset());
    TPC_RETURN_IF_ERROR(step.kernel->prepare(ctx));
  }
  return absl::OkStatus();
}

namespace {

// A block of `bytes` of `backend`'s memory for a tensor of `t`'s type and shape, given
// back with its last holder.
absl::StatusOr<Tensor> BlockFor(Backend& backend, const Tensor& t, size_t bytes,
                                const std::string& what) {
  void* p = backend.Allocate(bytes);
  if (p == nullptr) return OutOfMemory(backend, what, static_cast<int64_t>(bytes));
  Tensor out(t.dtype(), t.shape(), p);
  Backend* owner = &backend;
  out.set_owner(std::shared_ptr<void>(p, [owner](void* q) { owner->Free(q); }));
  return out;
}

}  // namespace

absl::StatusOr<Tensor> Executor::ToBackend(const Tensor& t, const std::string& what,
                                           bool size_class) {
  const size_t bytes = std::max<size_t>(t.nbytes(), 1);
  TPC_ASSIGN_OR_RETURN(
      Tensor out,
      BlockFor(backend_, t,
               size_class ? static_cast<size_t>(SizeClass(static_cast<int64_t>(bytes))) : bytes,
               what));
  if (t.nbytes() > 0) backend_.CopyFromHost(out.raw(), t.raw(), t.nbytes());
  return out;
}

absl::StatusOr<Tensor> Executor::BackendCopy(const Tensor& t, const std::string& what) {
  TPC_ASSIGN_OR_RETURN(
      Tensor out, BlockFor(backend_, t,
                           static_cast<size_t>(SizeClass(static_cast<int64_t>(t.nbytes()))), what));
  if (t.nbytes() > 0) backend_.Copy(out.raw(), t.raw(), t.nbytes());
  return out;
}

absl::Status Executor::UploadConstants() {
  // Constants a device kernel reads get one device copy, made here and kept; the others
  // (shape arithmetic, host kernels' inputs) stay in host memory only.
  std::vector<bool> on_device(slot_values_.size(), false), on_host(slot_values_.size(), false);
  for (const Step& step : steps_) {
    if (step.kernel->shape_only) continue;
    for (size_t k = 0; k < step.in_slots.size(); ++k) {
      const int s = step.in_slots[k];
      if (s < 0) continue;
      const bool host = step.on_host || (k < 32 && ((step.kernel->host_inputs >> k) & 1u));
      (host ? on_host : on_device)[static_cast<size_t>(s)] = true;
    }
  }
  for (const int s : output_slots_) {
    on_device[static_cast<size_t>(s)] = false;
    on_host[static_cast<size_t>(s)] = true;
  }
  for (Constant& c : constants_) {
    const std::string& name = slot_values_[static_cast<size_t>(c.slot)]->name();
    if (c.host.dtype() == ir::DType::kUndefined && on_host[static_cast<size_t>(c.slot)]) {
      TPC_ASSIGN_OR_RETURN(c.host, Tensor::Create(c.mem.dtype(), c.mem.shape(), name));
      if (c.mem.nbytes() > 0) backend_.CopyToHost(c.host.raw(), c.mem.raw(), c.mem.nbytes());
    }
    if (on_device[static_cast<size_t>(c.slot)] && c.mem.dtype() == ir::DType::kUndefined) {
      TPC_ASSIGN_OR_RETURN(c.mem, ToBackend(c.host, absl::StrCat("constant '", name, "'")));
    }
  }
  return backend_.Synchronize();
}

}  // namespace tpc::runtime
