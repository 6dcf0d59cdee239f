#include "tpc/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor_parts.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

// `t`'s bytes and shape without its owner (a record's view of device memory).
Tensor Unowned(const Tensor& t) { return Tensor(t.dtype(), t.shape(), t.raw()); }

Tensor HostCopy(const Tensor& t) {
  Tensor copy = Tensor::Allocate(t.dtype(), t.shape());
  if (t.nbytes() > 0) std::memcpy(copy.raw(), t.raw(), t.nbytes());
  return copy;
}

bool SameHostValue(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

}  // namespace

// Outputs of one step: the planned arena slot when the shape matches the plan.
class Executor::StepAllocator final : public OutputAllocator {
 public:
  StepAllocator(Executor& ex, const Step& step, const Plan& plan, const Tensor* view_of)
      : ex_(ex), step_(step), plan_(plan), view_of_(view_of) {}

  absl::StatusOr<Tensor> AllocateOutput(int index, ir::DType dtype,
                                        const std::vector<int64_t>& shape) override {
    if (step_.on_host) return Tensor::Create(dtype, shape, step_.node->Describe());
    if (index == 0 && view_of_ != nullptr && dtype == view_of_->dtype() &&
        Tensor(dtype, shape, nullptr).num_elements() == view_of_->num_elements()) {
      // Input 0's bytes under a new shape; the view keeps their owner alive.
      Tensor view(dtype, shape, view_of_->raw());
      view.set_owner(view_of_->owner());
      return view;
    }
    const int slot = step_.out_slots[static_cast<size_t>(index)];
    const ir::Value* v = ex_.slot_values_[static_cast<size_t>(slot)];
    Tensor t(dtype, shape, nullptr);
    const int64_t offset = plan_.offsets[static_cast<size_t>(slot)];
    if (offset >= 0 && dtype == v->type().dtype) {
      if (static_cast<int64_t>(t.nbytes()) != plan_.bytes[static_cast<size_t>(slot)]) {
        return absl::InternalError(
            absl::StrCat(step_.node->Describe(), ": output '", v->name(), "' is ", t.TypeString(),
                         " at run time, but shape inference planned ", v->type().ToString(), " = ",
                         ShapeString(*plan_.shapes[static_cast<size_t>(slot)])));
      }
      uint8_t* p = ex_.arena_ + offset;
      if (ex_.options_.guard_bytes > 0) {
        WriteGuards(ex_.backend_, p, static_cast<int64_t>(t.nbytes()), ex_.options_.guard_bytes);
      }
      return Tensor(dtype, shape, p);
    }
    // Not planned (dynamic shape, graph output, or an f32 stand-in for a half output).
    const size_t bytes = std::max<size_t>(t.nbytes(), 1);
    if (!ex_.device_ && static_cast<size_t>(slot) < ex_.last_use_.size() &&
        ex_.last_use_[static_cast<size_t>(slot)] == kPinned) {
      // Host memory that lives to the end of the run (a graph output, or a view's root):
      // its own block, freed by its last holder and not by the executor, so that Run can
      // hand it to the caller as it is instead of copying it.
      void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (p == nullptr) {
        return OutOfMemory(ex_.backend_, step_.node->Describe(), static_cast<int64_t>(bytes));
      }
      ex_.unplanned_live_ += static_cast<int64_t>(bytes);
      ex_.unplanned_peak_ = std::max(ex_.unplanned_peak_, ex_.unplanned_live_);
      Tensor out(dtype, shape, p);
      out.set_owner(std::shared_ptr<void>(p, [](void* q) { std::free(q); }));
      return out;
    }
    // On a device, a block of the value's size class (SizeClass), found again in the
    // backend's cache when the value has grown a little since the last run.
    void* p = ex_.backend_.Allocate(
        ex_.device_ ? static_cast<size_t>(SizeClass(static_cast<int64_t>(bytes))) : bytes);
    if (p == nullptr) {
      return OutOfMemory(ex_.backend_, step_.node->Describe(), static_cast<int64_t>(bytes));
    }
    Tensor out(dtype, shape, p);
    ex_.unplanned_live_ += static_cast<int64_t>(bytes);
    ex_.unplanned_peak_ = std::max(ex_.unplanned_peak_, ex_.unplanned_live_);
    if (static_cast<size_t>(slot) < ex_.kept_slots_.size() &&
        ex_.kept_slots_[static_cast<size_t>(slot)]) {
      // An output the caller keeps in backend memory: it outlives the run (and may
      // outlive the executor), so its release reaches the backend only.
      Backend* backend = &ex_.backend_;
      out.set_owner(std::shared_ptr<void>(p, [backend](void* q) { backend->Free(q); }));
      ex_.kept_blocks_.insert(p);
      return out;
    }
    // Values of a run never outlive it (outputs are copied out), so `ex_` is alive here.
    Executor* ex = &ex_;
    out.set_owner(std::shared_ptr<void>(p, [ex, bytes](void* q) {
      ex->backend_.Free(q);
      ex->unplanned_live_ -= static_cast<int64_t>(bytes);
    }));
    return out;
  }

 private:
  Executor& ex_;
  const Step& step_;
  const Plan& plan_;
  const Tensor* view_of_;
};

absl::StatusOr<const Tensor*> Executor::Fetch(int s, bool want_host, bool shape_only,
                                              Values& values, Capture* capture, bool replaying) {
  Tensor& mem = values.mem[static_cast<size_t>(s)];
  if (!device_) return &mem;
  Tensor& host = values.host[static_cast<size_t>(s)];
  const bool have_mem = mem.dtype() != ir::DType::kUndefined;
  const bool have_host = host.dtype() != ir::DType::kUndefined;
  if (shape_only) return have_mem ? &mem : &host;
  const std::string& name = slot_values_[static_cast<size_t>(s)]->name();
  if (want_host && !have_host && have_mem) {
    if (replaying) {
      return absl::InternalError(absl::StrCat("replaying a recorded run: value '", name,
                                              "' is wanted on the host before the replay"));
    }
    TPC_ASSIGN_OR_RETURN(host, Tensor::Create(mem.dtype(), mem.shape(), name));
    if (mem.nbytes() > 0) backend_.CopyToHost(host.raw(), mem.raw(), mem.nbytes());
    ++stats_.host_waits;
    // A failed copy (an earlier kernel's fault, a collective that timed out) must not
    // hand the host kernel an unwritten buffer: its error is the run's.
    TPC_RETURN_IF_ERROR(backend_.Synchronize());
  } else if (!want_host && !have_mem && have_host) {
    if (replaying) {
      // The recorded upload's memory, refilled (Backend::BeginReplay).
      const Tensor& recorded = capture->mem[static_cast<size_t>(s)];
      if (recorded.dtype() != host.dtype() || recorded.shape() != host.shape()) {
        return absl::InternalError(absl::StrCat("replaying a recorded run: value '", name,
                                                "' differs from the recorded one"));
      }
      mem = recorded;
      if (mem.nbytes() > 0) backend_.CopyFromHost(mem.raw(), host.raw(), mem.nbytes());
    } else {
      TPC_ASSIGN_OR_RETURN(mem, ToBackend(host, absl::StrCat("value '", name, "'"),
                                          /*size_class=*/true));
      if (capture != nullptr) capture->mem[static_cast<size_t>(s)] = Unowned(mem);
    }
  }
  return want_host ? &host : &mem;
}

absl::StatusOr<SymbolBindings> Executor::CheckInputs(
    const std::map<std::string, Tensor>& inputs) const {
  SymbolBindings bindings;
  for (const auto& entry : inputs) {
    const std::string& name = entry.first;  // not a structured binding: the lambda reads it
    if (std::none_of(inputs_.begin(), inputs_.end(),
                     [&](const IoSpec& s) { return s.name == name; })) {
      std::vector<std::string> names;
      for (const IoSpec& s : inputs_) names.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown input '", name, "' (the model's inputs: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  for (const IoSpec& spec : inputs_) {
    auto it = inputs.find(spec.name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input '", spec.name, "' (", spec.type.ToString(), ")"));
    }
    TPC_RETURN_IF_ERROR(
        BindInput(spec.name, spec.type, it->second.dtype(), it->second.shape(), bindings));
  }
  for (const auto& [v, dim] : split_dims_) {
    TPC_RETURN_IF_ERROR(CheckWholeDim(v->name(), v->type(), dim, bindings));
  }
  return bindings;
}

absl::StatusOr<Executor::Plan*> Executor::PlanFor(const SymbolBindings& bindings) {
  const std::string key = BindingsKey(bindings);
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    it->second->last_used = ++plan_clock_;
    return it->second.get();
  }
  auto plan = std::make_unique<Plan>();
  plan->last_used = ++plan_clock_;
  const size_t n = slot_values_.size();
  plan->shapes.resize(n);
  plan->offsets.assign(n, -1);
  plan->bytes.assign(n, 0);
  std::vector<BufferRequest> requests;
  std::vector<int> request_slots;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].on_host) continue;  // host memory, not the arena
    for (int s : steps_[i].out_slots) {
      const ir::Value* v = slot_values_[static_cast<size_t>(s)];
      plan->shapes[static_cast<size_t>(s)] = EvaluateShape(v->type(), bindings);
      if (steps_[i].view && s == steps_[i].out_slots[0]) continue;  // its input's memory
      const int64_t last = last_use_[static_cast<size_t>(s)];
      if (!options_.plan_memory || !plan->shapes[static_cast<size_t>(s)] || last == kPinned)
        continue;
      // A size past the limit is left unplanned: the kernel's Output() refuses it with
      // the node's name.
      auto checked =
          TensorBytes(*plan->shapes[static_cast<size_t>(s)], ir::DTypeSize(v->type().dtype));
      if (!checked) continue;
      const int64_t bytes = *checked;
      plan->bytes[static_cast<size_t>(s)] = bytes;
      // With guards (ExecutorOptions::guard_bytes), the value's offset is past the first.
      requests.push_back({bytes + 2 * options_.guard_bytes, static_cast<int64_t>(i),
                          std::max<int64_t>(last, static_cast<int64_t>(i))});
      request_slots.push_back(s);
    }
  }
  plan->memory = PlanMemory(requests);
  for (size_t r = 0; r < requests.size(); ++r) {
    plan->offsets[static_cast<size_t>(request_slots[r])] =
        plan->memory.offsets[r] + options_.guard_bytes;
  }
  if (plan->memory.arena_bytes > arena_capacity_) {
    // Records of earlier runs point into the arena that goes.
    for (auto& [k, p] : plans_) p->capture.reset();
    records_ = 0;
    if (arena_ != nullptr) backend_.Free(arena_);
    // On a device, a size class (SizeClass): an arena that grows a little each run (a
    // decode step's) is reallocated every few runs, not every run.
    const int64_t capacity =
        device_ ? SizeClass(plan->memory.arena_bytes) : plan->memory.arena_bytes;
    arena_ = static_cast<uint8_t*>(backend_.Allocate(static_cast<size_t>(capacity)));
    arena_capacity_ = arena_ != nullptr ? capacity : 0;
    if (arena_ == nullptr) {
      // The plans made for the old arena would run without one: planned again next time.
      plans_.clear();
      return OutOfMemory(
          backend_,
          absl::StrCat("the arena of the values for input shapes ", key.empty() ? "(fixed)" : key),
          capacity);
    }
  }
  // At most kMaxPlans: the least recently used goes (a generation makes one a step).
  if (plans_.size() >= kMaxPlans) {
    auto oldest = std::min_element(plans_.begin(), plans_.end(), [](const auto& a, const auto& b) {
      return a.second->last_used < b.second->last_used;
    });
    if (oldest->second->capture != nullptr) --records_;
    plans_.erase(oldest);
  }
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

absl::Status Executor::RunStep(const Step& step, const Plan& plan, Values& values,
                               Capture* capture) {
  const ir::Node& node = *step.node;
  std::vector<const Tensor*> ins;
  std::vector<Tensor> converted;  // f32 stand-ins of half inputs
  converted.reserve(step.in_slots.size());
  for (size_t k = 0; k < step.in_slots.size(); ++k) {
    const int s = step.in_slots[k];
    const bool want_host = step.on_host || (k < 32 && ((step.kernel->host_inputs >> k) & 1u));
    const Tensor* t = nullptr;
    if (s >= 0) {
      const int waits = stats_.host_waits;
      TPC_ASSIGN_OR_RETURN(t, Fetch(s, want_host, step.kernel->shape_only, values, capture));
      if (stats_.host_waits != waits) ++stats_.host_waits_by_op[node.op_type()];
      if (capture != nullptr && want_host && !step.on_host) {
        capture->host_read[static_cast<size_t>(s)] = HostCopy(*t);
      }
    }
    if (t != nullptr && t->raw() == nullptr && t->num_elements() > 0) {
      return absl::InternalError(absl::StrCat(node.Describe(), ": input ", k, " ('",
                                              slot_values_[static_cast<size_t>(s)]->name(),
                                              "') has no data"));
    }
    if (t != nullptr && !step.kernel->any_float && IsHalfType(t->dtype())) {
      converted.push_back(ConvertFloats(*t, ir::DType::kF32));
      t = &converted.back();
    }
    ins.push_back(t);
  }
  std::vector<ir::DType> out_types;
  for (int s : step.out_slots) {
    ir::DType t = slot_values_[static_cast<size_t>(s)]->type().dtype;
    out_types.push_back(!step.kernel->any_float && IsHalfType(t) ? ir::DType::kF32 : t);
  }
  StepAllocator alloc(*this, step, plan, step.view && !ins.empty() ? ins[0] : nullptr);
  KernelContext ctx(node, std::move(ins), std::move(out_types), alloc, comm_,
                    step.on_host ? backend_.host_backend() : backend_, graph_.onnx_opset());
  ctx.set_wanted(step.wanted);
  TPC_RETURN_IF_ERROR(step.kernel->fn(ctx));
  for (size_t k = 0; k < step.out_slots.size(); ++k) {
    Tensor& out = ctx.output(static_cast<int>(k));
    const ir::Value* v = slot_values_[static_cast<size_t>(step.out_slots[k])];
    if (out.dtype() == ir::DType::kUndefined) {
      if (step.wanted[k]) {
        return absl::InternalError(
            absl::StrCat(node.Describe(), ": the kernel produced no output ", k));
      }
      continue;
    }
    if (out.dtype() != v->type().dtype && IsHalfType(v->type().dtype)) {
      TPC_ASSIGN_OR_RETURN(Tensor half,
                           alloc.AllocateOutput(static_cast<int>(k), v->type().dtype, out.shape()));
      ConvertFloats(out, half);
      out = half;
    }
    if (capture != nullptr && !step.on_host) {
      capture->mem[static_cast<size_t>(step.out_slots[k])] = Unowned(out);
    }
    (step.on_host ? values.host : values.mem)[static_cast<size_t>(step.out_slots[k])] =
        std::move(out);
  }
  return absl::OkStatus();
}

Executor::Values Executor::StartValues(const std::map<std::string, Tensor>& inputs,
                                       const std::map<std::string, Tensor>& resident) const {
  // Inputs are host tensors: the backend's memory, or a host copy moved on first need;
  // resident ones are in the backend's memory.
  Values values(slot_values_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const auto s = static_cast<size_t>(input_slots_[i]);
    auto it = resident.find(inputs_[i].name);
    if (it != resident.end()) {
      values.mem[s] = it->second;
    } else {
      (device_ ? values.host : values.mem)[s] = inputs.at(inputs_[i].name);
    }
  }
  for (const Constant& c : constants_) {
    values.mem[static_cast<size_t>(c.slot)] = c.mem;
    values.host[static_cast<size_t>(c.slot)] = c.host;
  }
  return values;
}

absl::Status Executor::RunSteps(const Plan& plan, Values& values, Capture* capture) {
  for (const Step& step : steps_) {
    const auto ts = Clock::now();
    absl::Status s = RunStep(step, plan, values, capture);
    if (s.ok() && options_.guard_bytes > 0) s = CheckGuardsOf(step, plan, values);
    if (!s.ok()) {
      // The queued work and its checks belong to this run, not to the next one (a
      // recording is ended by the caller).
      if (device_ && capture == nullptr) (void)backend_.Synchronize();
      return s;
    }
    if (options_.profile) {
      if (device_) TPC_RETURN_IF_ERROR(backend_.Synchronize());
      const std::string& type = step.node->op_type();
      stats_.op_seconds[type] += std::chrono::duration<double>(Clock::now() - ts).count();
      ++stats_.op_calls[type];
      size_t largest = 0;
      for (const std::vector<int>* slots : {&step.in_slots, &step.out_slots}) {
        for (int v : *slots) {
          if (v < 0) continue;
          largest = std::max({largest, values.mem[static_cast<size_t>(v)].nbytes(),
                              values.host[static_cast<size_t>(v)].nbytes()});
        }
      }
      stats_.op_bytes[type] += static_cast<int64_t>(largest);
    }
    for (int f : step.frees) values.Clear(f);
  }
  return absl::OkStatus();
}

absl::Status Executor::CheckGuardsOf(const Step& step, const Plan& plan, const Values& values) {
  for (const std::vector<int>* slots : {&step.out_slots, &step.in_slots}) {
    for (int s : *slots) {
      if (s < 0) continue;
      const int64_t offset = plan.offsets[static_cast<size_t>(s)];
      const Tensor& t = values.mem[static_cast<size_t>(s)];
      // Only the values in their planned place (not views, constants or inputs).
      if (offset < 0 || t.raw() != arena_ + offset) continue;
      TPC_RETURN_IF_ERROR(CheckGuards(
          backend_, arena_ + offset, static_cast<int64_t>(t.nbytes()), options_.guard_bytes,
          slots == &step.out_slots
              ? absl::StrCat(step.node->Describe(), " writing '",
                             slot_values_[static_cast<size_t>(s)]->name(), "'")
              : absl::StrCat(step.node->Describe(), " reading '",
                             slot_values_[static_cast<size_t>(s)]->name(),
                             "' (this step, or one since the value was written)")));
    }
  }
  if (!backend_.host_memory()) return absl::OkStatus();  // each check waits for a device
  // On the host, every other value alive in the arena too: a stray write far from the
  // step's own values (into another's guard) is named as this step's.
  for (size_t s = 0; s < slot_values_.size(); ++s) {
    const int64_t offset = plan.offsets[s];
    const Tensor& t = values.mem[s];
    if (offset < 0 || t.raw() != arena_ + offset) continue;
    const int slot = static_cast<int>(s);
    if (std::count(step.out_slots.begin(), step.out_slots.end(), slot) > 0 ||
        std::count(step.in_slots.begin(), step.in_slots.end(), slot) > 0) {
      continue;  // checked above
    }
    TPC_RETURN_IF_ERROR(CheckGuards(
        backend_, arena_ + offset, static_cast<int64_t>(t.nbytes()), options_.guard_bytes,
        absl::StrCat(step.node->Describe(), " (while '", slot_values_[s]->name(), "' was alive)")));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Executor::ReplaySteps(const Plan& plan, Capture& capture, Values& values) {
  for (const Step& step : steps_) {
    if (step.on_host) {
      // Host kernels run as in any run; the recorded run had every value they read on
      // the host (no waits), so a value only on the device means another run.
      for (int s : step.in_slots) {
        if (s >= 0 && !step.kernel->shape_only &&
            values.host[static_cast<size_t>(s)].dtype() == ir::DType::kUndefined) {
          return false;
        }
      }
      TPC_RETURN_IF_ERROR(RunStep(step, plan, values));
    } else {
      for (size_t k = 0; k < step.in_slots.size(); ++k) {
        const int s = step.in_slots[k];
        if (s < 0 || step.kernel->shape_only) continue;
        const Tensor& host = values.host[static_cast<size_t>(s)];
        const bool want_host = k < 32 && ((step.kernel->host_inputs >> k) & 1u);
        if (want_host) {
          // The record was made for these values (a shape the kernel read).
          const Tensor& recorded = capture.host_read[static_cast<size_t>(s)];
          if (host.dtype() == ir::DType::kUndefined || !SameHostValue(host, recorded)) {
            return false;
          }
        } else if (values.mem[static_cast<size_t>(s)].dtype() == ir::DType::kUndefined) {
          const Tensor& recorded = capture.mem[static_cast<size_t>(s)];
          if (host.dtype() == ir::DType::kUndefined || recorded.dtype() != host.dtype() ||
              recorded.shape() != host.shape()) {
            return false;
          }
          TPC_RETURN_IF_ERROR(Fetch(s, false, false, values, &capture, true).status());
        }
      }
      for (int out : step.out_slots) {
        values.mem[static_cast<size_t>(out)] = capture.mem[static_cast<size_t>(out)];
      }
    }
    for (int f : step.frees) values.Clear(f);
  }
  return true;
}

absl::StatusOr<std::vector<Tensor>> Executor::Run(const std::map<std::string, Tensor>& inputs) {
  return Run(inputs, Resident());
}

absl::StatusOr<std::vector<Tensor>> Executor::Run(const std::map<std::string, Tensor>& inputs,
                                                  const Resident& resident) {
  const auto t0 = Clock::now();
  const int64_t allocations_before = backend_.device_allocations();
  // The inputs checked: both maps, merged only when there are resident ones.
  std::map<std::string, Tensor> all;
  if (!resident.inputs.empty()) {
    all = inputs;
    for (const auto& [name, t] : resident.inputs) {
      if (!all.emplace(name, t).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", name, "' is given both on the host and resident"));
      }
    }
  }
  absl::Cleanup forget_kept = [this] {
    kept_slots_.clear();
    kept_blocks_.clear();
  };
  TPC_ASSIGN_OR_RETURN(const std::vector<bool> keep, KeptOutputs(resident.keep));
  const bool resident_io = device_ && (!resident.inputs.empty() || !resident.keep.empty());
  TPC_ASSIGN_OR_RETURN(SymbolBindings bindings,
                       CheckInputs(resident.inputs.empty() ? inputs : all));
  TPC_ASSIGN_OR_RETURN(Plan * planned, PlanFor(bindings));
  Plan& plan = *planned;
  stats_ = RunStats();
  stats_.arena_bytes = plan.memory.arena_bytes;
  stats_.planned_total_bytes = plan.memory.total_bytes;
  for (int64_t o : plan.offsets) (o >= 0 ? stats_.planned_values : stats_.unplanned_values)++;
  stats_.unplanned_values -= static_cast<int>(input_slots_.size() + constants_.size());

  Values values = StartValues(inputs, resident.inputs);
  unplanned_live_ = 0;
  unplanned_peak_ = 0;
  TPC_RETURN_IF_ERROR(RunDeviceWork(
      plan, values, [&] { return StartValues(inputs, resident.inputs); }, resident_io));
  stats_.compute_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  TPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, CollectOutputs(values, keep));
  stats_.unplanned_peak_bytes = unplanned_peak_;
  stats_.device_allocations = backend_.device_allocations() - allocations_before;
  stats_.device_bytes = backend_.device_bytes();
  stats_.plans = static_cast<int>(plans_.size());
  if (resident_io) {
    // Not a run of these shapes as a record would see it (its waits may be a host
    // kernel reading a resident input): ordinary runs decide on recording alone.
    if (options_.capture) stats_.capture_error = "runs with resident values are never recorded";
  } else {
    ++plan.runs;
    plan.waited = plan.waited || stats_.host_waits > 0;
    if (device_ && options_.capture) stats_.capture_error = WhyNotRecorded(plan);
  }
  stats_.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return outputs;
}

absl::StatusOr<std::vector<bool>> Executor::KeptOutputs(const std::set<std::string>& names) {
  kept_slots_.clear();
  if (device_ && !names.empty()) kept_slots_.assign(slot_values_.size(), false);
  for (const std::string& name : names) {
    const auto it = std::find_if(outputs_.begin(), outputs_.end(),
                                 [&](const IoSpec& o) { return o.name == name; });
    if (it == outputs_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no output '", name, "' to keep"));
    }
    if (device_) kept_slots_[static_cast<size_t>(output_slots_[it - outputs_.begin()])] = true;
  }
  // Every position of a kept value (a value may be several outputs).
  std::vector<bool> keep(output_slots_.size(), false);
  for (size_t k = 0; k < keep.size() && !kept_slots_.empty(); ++k) {
    keep[k] = kept_slots_[static_cast<size_t>(output_slots_[k])];
  }
  return keep;
}

bool Executor::OneRank() const { return comm_ == nullptr || comm_->size() == 1; }

absl::Status Executor::RunDeviceWork(Plan& plan, Values& values,
                                     const std::function<Values()>& start_values,
                                     bool resident_io) {
  // One rank only: NCCL wants every rank of a communicator to agree, launch by launch,
  // on whether its collectives are recorded (and cannot finalize a communicator while a
  // record holds them); the in-process group waits on the host inside its collectives.
  const bool may_capture = device_ && options_.capture && !options_.profile &&
                           options_.guard_bytes == 0 && OneRank() && !resident_io &&
                           backend_.can_capture() && !plan.capture_failed;
  bool queued = false;  // the run's device work is queued
  if (may_capture && plan.capture != nullptr) {
    backend_.BeginReplay(*plan.capture->record);
    absl::StatusOr<bool> same = ReplaySteps(plan, *plan.capture, values);
    const absl::Status refilled = backend_.EndReplay();
    if (!same.ok()) return same.status();  // a host kernel's error
    if (*same && refilled.ok()) {
      TPC_RETURN_IF_ERROR(backend_.Launch(*plan.capture->record));
      stats_.device_work = RunStats::Device::kReplayed;
      queued = true;
    } else {
      // Not the recorded run after all (data-dependent values): queued from now on.
      DropRecord(plan, refilled.ok()
                           ? "a value a device kernel reads on the host changed between runs"
                           : std::string(refilled.message()));
      values = start_values();
    }
  } else if (may_capture && plan.runs >= 1 && !plan.waited && records_ >= kMaxRecords) {
    plan.capture_failed = true;
    plan.capture_error =
        absl::StrCat("the executor keeps ", kMaxRecords, " records (input shapes) already");
  } else if (may_capture && plan.runs >= 1 && !plan.waited) {
    auto capture = std::make_unique<Capture>(slot_values_.size());
    absl::Status s = backend_.BeginCapture();
    if (s.ok()) {
      s = RunSteps(plan, values, capture.get());
      absl::StatusOr<std::unique_ptr<Backend::Captured>> record = backend_.EndCapture();
      if (s.ok()) s = record.status();
      if (s.ok()) {
        capture->record = std::move(*record);
        TPC_RETURN_IF_ERROR(backend_.Launch(*capture->record));
        plan.capture = std::move(capture);
        ++records_;
        stats_.device_work = RunStats::Device::kCaptured;
        queued = true;
      }
    }
    if (!queued) {
      // Not recordable (a kernel that waits): this run again, queued, and so from now on.
      // A real error comes back from that run.
      plan.capture_error = std::string(s.message());
      plan.capture_failed = true;
      values = start_values();
      stats_.host_waits = 0;
      stats_.host_waits_by_op.clear();
      unplanned_live_ = 0;
      unplanned_peak_ = 0;
    }
  }
  if (!queued) TPC_RETURN_IF_ERROR(RunSteps(plan, values, nullptr));
  if (!device_) return absl::OkStatus();
  absl::Status s = backend_.Synchronize();
  if (!s.ok() && stats_.device_work != RunStats::Device::kQueued && plan.capture != nullptr) {
    // A record whose run failed is not kept (the next run of these shapes queues).
    DropRecord(plan, std::string(s.message()));
  }
  return s;
}

void Executor::DropRecord(Plan& plan, std::string why) {
  plan.capture.reset();
  --records_;
  plan.capture_failed = true;
  plan.capture_error = std::move(why);
}

std::string Executor::WhyNotRecorded(const Plan& plan) const {
  return !plan.capture_error.empty() ? plan.capture_error
         : !backend_.can_capture()   ? backend_.name() + " cannot record runs here"
         : !OneRank()       ? "the ranks' collectives are never recorded (one rank per run only)"
         : options_.profile ? "--profile times each step on its own"
         : options_.guard_bytes > 0 ? "TPC_ARENA_GUARDS checks each step on its own"
         : plan.waited              ? "host kernels wait for the device in these runs"
                                    : "";
}

absl::StatusOr<std::vector<Tensor>> Executor::CollectOutputs(Values& values,
                                                             const std::vector<bool>& keep) {
  // Outputs are host tensors the caller owns, independent of the executor: a host
  // block that nothing else holds once the run's values are gone (see StepAllocator) is
  // handed over as it is; anything else (the arena, a constant, an input, device
  // memory) is copied. Kept outputs (Resident::keep) stay in blocks of their own in a
  // device backend's memory.
  std::vector<Tensor> results;
  std::vector<bool> in_host;
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    const auto s = static_cast<size_t>(output_slots_[i]);
    const Tensor& h = values.host[s];
    const bool have_mem = values.mem[s].dtype() != ir::DType::kUndefined;
    in_host.push_back(device_ && h.dtype() != ir::DType::kUndefined && !(keep[i] && have_mem));
    results.push_back(in_host.back() ? h : values.mem[s]);
  }
  values = Values(0);
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    Tensor& t = results[i];
    stats_.output_bytes += static_cast<int64_t>(t.nbytes());
    if (keep[i]) {
      // Kept where it is when the block is its own and nothing else holds it (allocated
      // for the kept slot); otherwise copied there (a view of another value, an input,
      // a constant) or uploaded (a host kernel's output).
      const std::string what = absl::StrCat("output '", outputs_[i].name, "'");
      if (in_host[i]) {
        TPC_ASSIGN_OR_RETURN(Tensor up, ToBackend(t, what, /*size_class=*/true));
        outputs.push_back(std::move(up));
      } else if (t.owner() != nullptr && t.owner().use_count() == 1 && t.owner().get() == t.raw() &&
                 kept_blocks_.count(t.raw()) > 0) {
        outputs.push_back(std::move(t));
      } else {
        TPC_ASSIGN_OR_RETURN(Tensor copy, BackendCopy(t, what));
        outputs.push_back(std::move(copy));
      }
      continue;
    }
    if (!device_ && t.owner() != nullptr && t.owner().use_count() == 1) {
      outputs.push_back(std::move(t));
      continue;
    }
    Tensor host = Tensor::Allocate(t.dtype(), t.shape());
    if (t.nbytes() > 0 && in_host[i]) std::memcpy(host.raw(), t.raw(), t.nbytes());
    if (t.nbytes() > 0 && !in_host[i]) backend_.CopyToHost(host.raw(), t.raw(), t.nbytes());
    outputs.push_back(std::move(host));
  }
  results.clear();
  TPC_RETURN_IF_ERROR(backend_.Synchronize());
  return outputs;
}

absl::StatusOr<Tensor> Executor::LastAlong(const Tensor& t, int64_t axis) {
  if (axis < 0 || axis >= t.rank() || t.dim(axis) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no last entry along axis ", axis, " of ", t.TypeString()));
  }
  std::vector<int64_t> shape = t.shape();
  const int64_t n = shape[static_cast<size_t>(axis)];
  shape[static_cast<size_t>(axis)] = 1;
  Tensor out = Tensor::Allocate(t.dtype(), shape);
  // One copy where the entries are contiguous (a decode step's logits, n = 1), else one
  // per outer index.
  int64_t outer = 1;
  for (int64_t d = 0; d < axis && n > 1; ++d) outer *= t.dim(d);
  const size_t inner = out.nbytes() / static_cast<size_t>(std::max<int64_t>(outer, 1));
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer && inner > 0; ++o) {
    const uint8_t* from = src + static_cast<size_t>(o * n + n - 1) * inner;
    if (device_) {
      backend_.CopyToHost(dst + static_cast<size_t>(o) * inner, from, inner);
    } else {
      std::memcpy(dst + static_cast<size_t>(o) * inner, from, inner);
    }
  }
  if (device_) TPC_RETURN_IF_ERROR(backend_.Synchronize());
  return out;
}

}  // namespace tpc::runtime
