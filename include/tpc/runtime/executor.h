// Runs one rank's graph: checks the inputs, binds the symbolic dims, plans one arena by
// value lifetimes (cached per binding), and runs the kernels of the backend in order.
// With a device backend (a GPU), the arena is device memory; steps whose kernel runs on
// the host (shape arithmetic, operators with no device kernel) get host copies of their
// inputs and leave host outputs, copied to the device only when a device kernel reads them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/runtime/arena_guards.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/kernel.h"
#include "tpc/runtime/memory_plan.h"
#include "tpc/runtime/shape_eval.h"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime {

struct ExecutorOptions {
  // Place intermediate values in one planned arena (off: a buffer per value, freed
  // after its last use; for comparisons).
  bool plan_memory = true;
  // Time every kernel (RunStats::op_seconds, op_calls, op_bytes).
  bool profile = false;
  // With a backend that can capture (Backend::can_capture; not with `profile`): the
  // second run of each set of input shapes records its device work (a CUDA graph) when
  // no host kernel waited for the device in the first; later runs with those shapes run
  // the host steps and uploads only, and replay the record.
  bool capture = false;
  // Guard bytes before and after every value planned in the arena (0: none; rounded up to
  // 64, at most kMaxArenaGuard), checked after each step that writes or reads the value:
  // a kernel that writes just outside its output fails the run naming its node
  // (arena_guards.h says what is seen). For debugging kernels: on a device every check
  // waits for it, no run is recorded, and the arena's reported size includes the guards.
  // The default is what TPC_ARENA_GUARDS asks for.
  int64_t guard_bytes = ArenaGuardsFromEnvironment();
};

struct RunStats {
  int64_t arena_bytes = 0;           // the planned arena (peak of planned values)
  int64_t planned_total_bytes = 0;   // the same values without reuse
  int64_t unplanned_peak_bytes = 0;  // peak of values with no planned slot (dynamic shapes)
  int64_t output_bytes = 0;          // graph outputs (owned by the caller)
  int planned_values = 0;
  int plans = 0;  // the executor's plans (one per set of input shapes) after the run
  int unplanned_values = 0;
  double seconds = 0;
  // Of `seconds`: until every kernel finished (a device backend's work included), before
  // the outputs were copied to the host.
  double compute_seconds = 0;
  // Blocks a device backend obtained from its device during the run (cudaMalloc): 0
  // once its caches hold what the run needs; always 0 on the host.
  int64_t device_allocations = 0;
  // Device memory the backend holds after the run (weights, the arena, values kept, its
  // cache of freed blocks); 0 on the host.
  int64_t device_bytes = 0;
  // Times a device backend's run waited for the device to hand a value to a host kernel
  // (a host-fallback operator, or a device kernel's host-read input such as a Reshape's
  // shape, computed on the device): each is a download and a stream synchronisation
  // in the middle of the run. 0 on the host.
  int host_waits = 0;
  std::map<std::string, int> host_waits_by_op;  // the waits by the op type that read the value
  // How the device work of the run went (ExecutorOptions::capture): queued kernel by
  // kernel, recorded then replayed, or replayed from an earlier run's record.
  enum class Device { kQueued, kCaptured, kReplayed };
  Device device_work = Device::kQueued;
  // With ExecutorOptions::capture, why runs of these shapes are not replayed (the backend
  // cannot record, a host kernel waits for the device, a recording failed, a replay found
  // another run); empty when they are (or will be, from the third run).
  std::string capture_error;
  std::map<std::string, double> op_seconds;  // per op type, with `profile`
  std::map<std::string, int64_t> op_calls;   // per op type, with `profile`
  // Per op type, with `profile`: each call's largest input or output, summed (for a
  // collective, the size NCCL's bus bandwidth counts: the reduced or the gathered buffer).
  std::map<std::string, int64_t> op_bytes;
};

struct IoSpec {
  std::string name;
  ir::TensorType type;
};

class Executor {
 public:
  // The graph must outlive the executor; constants are views of its tensors. Fails when
  // an operator has no kernel in `backend` or a constant has no data, naming the node.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const ir::Graph& graph, Backend& backend,
                                                          Communicator* comm,
                                                          ExecutorOptions options = {});
  ~Executor();

  // The communicator of the collectives, when it comes after the executor (a process
  // connects its peers only once every rank has checked its inputs).
  void set_communicator(Communicator* comm) { comm_ = comm; }

  const std::vector<IoSpec>& inputs() const { return inputs_; }
  const ExecutorOptions& options() const { return options_; }
  // Whether some step's kernel has `flag` set (Kernel::rows_from_start).
  bool AnyKernel(bool Kernel::*flag) const;
  // The least capacity a kernel reading graph input `name` keeps it at
  // (Kernel::fixed_cache_rows; the largest of them), 0 when none does.
  int64_t FixedCacheRows(const std::string& name) const;
  const std::vector<IoSpec>& outputs() const { return outputs_; }

  // Checks names, element types, ranks and dims of `inputs` (all of the graph's, no
  // others) and returns the symbol bindings; nothing runs.
  absl::StatusOr<SymbolBindings> CheckInputs(const std::map<std::string, Tensor>& inputs) const;

  // The graph's outputs, in order, owned by the caller.
  absl::StatusOr<std::vector<Tensor>> Run(const std::map<std::string, Tensor>& inputs);

  // Values that stay in the backend's memory between runs (a device backend's; on the
  // host this is Run): a KV cache that a decode step hands to the next never goes to
  // the host and back.
  struct Resident {
    // Inputs that are outputs an earlier run of this executor's backend kept: read where
    // they are, not uploaded. (Any other tensor here would be host memory a device kernel
    // cannot read.)
    std::map<std::string, Tensor> inputs;
    // Outputs to keep in the backend's memory: they come back as blocks of their own
    // there, freed through the backend with their last holder (the backend must outlive
    // them), for a later run's `inputs`; the caller never reads them on the host.
    std::set<std::string> keep;
  };
  // Run with `resident` inputs besides `inputs` (a name in one of them only) and the
  // outputs named in `resident.keep` left in the backend's memory. Such a run is queued
  // kernel by kernel, never recorded (ExecutorOptions::capture): a record writes its
  // outputs to its own blocks, and reads its inputs from there.
  absl::StatusOr<std::vector<Tensor>> Run(const std::map<std::string, Tensor>& inputs,
                                          const Resident& resident);
  // A host copy of `t`'s last entry along `axis` (that dim 1), `t` an output a Run kept in
  // the backend's memory (or any host tensor on a host backend): a decoder's last-position
  // logits without the whole [batch, seq, vocab] coming to the host.
  absl::StatusOr<Tensor> LastAlong(const Tensor& t, int64_t axis);

  const RunStats& last_stats() const { return stats_; }

 private:
  struct Step;
  struct Plan;
  struct Values;
  struct Constant;
  class StepAllocator;
  Executor(const ir::Graph& graph, Backend& backend, Communicator* comm, ExecutorOptions options);
  absl::Status Build();
  absl::Status FoldConstantSteps();
  // Kernel::prepare of every step that has one, with its constant inputs.
  absl::Status PrepareSteps();
  absl::StatusOr<Plan*> PlanFor(const SymbolBindings& bindings);
  struct Capture;
  // One run's steps, queued (or recorded: `capture`); the device values' tensors go to
  // `capture` as they appear.
  absl::Status RunSteps(const Plan& plan, Values& values, Capture* capture);
  // The values of a run before its first step: inputs (host; `resident` ones in backend
  // memory) and constants.
  Values StartValues(const std::map<std::string, Tensor>& inputs,
                     const std::map<std::string, Tensor>& resident) const;
  // The host steps and uploads of a run whose device work `capture` recorded; false when
  // the run differs from the recorded one (a host-read value changed), with nothing queued.
  absl::StatusOr<bool> ReplaySteps(const Plan& plan, Capture& capture, Values& values);
  absl::Status RunStep(const Step& step, const Plan& plan, Values& values,
                       Capture* capture = nullptr);
  // ExecutorOptions::guard_bytes: the guards of the arena values `step` wrote or read and,
  // on the host, of every other value alive in the arena.
  absl::Status CheckGuardsOf(const Step& step, const Plan& plan, const Values& values);
  // Per output, whether `names` keeps it in backend memory (Resident::keep); sets
  // kept_slots_.
  absl::StatusOr<std::vector<bool>> KeptOutputs(const std::set<std::string>& names);
  // A run's device work: replayed from `plan`'s record, recorded, or queued step by step
  // (ExecutorOptions::capture), then waited for. `start_values` gives the run's values
  // again when a replay or a recording turns out not to be possible.
  absl::Status RunDeviceWork(Plan& plan, Values& values,
                             const std::function<Values()>& start_values, bool resident_io);
  // `plan`'s record is gone for good (`why`): its shapes are queued from now on.
  void DropRecord(Plan& plan, std::string why);
  // Why runs of `plan` are not replayed (RunStats::capture_error); empty when they are.
  std::string WhyNotRecorded(const Plan& plan) const;
  bool OneRank() const;
  // The run's outputs from `values` (emptied): host tensors the caller owns, or blocks of
  // their own in backend memory where `keep` says so.
  absl::StatusOr<std::vector<Tensor>> CollectOutputs(Values& values, const std::vector<bool>& keep);
  // Slot `s` where a kernel reads it: backend memory, or host memory (`want_host`),
  // copied there on first need in a device backend.
  // With `capture` (recording), the device copy made goes to it; replaying, the upload goes
  // to the recorded copy's memory.
  absl::StatusOr<const Tensor*> Fetch(int s, bool want_host, bool shape_only, Values& values,
                                      Capture* capture = nullptr, bool replaying = false);
  // A copy of host tensor `t` in backend memory (freed with its last holder); in a block
  // of its size class (SizeClass) for a value of a run, of its size for a constant.
  absl::StatusOr<Tensor> ToBackend(const Tensor& t, const std::string& what,
                                   bool size_class = false);
  // A copy of backend tensor `t` in a block of its own there, of its size class (freed
  // with its last holder).
  absl::StatusOr<Tensor> BackendCopy(const Tensor& t, const std::string& what);
  absl::Status UploadConstants();

  const ir::Graph& graph_;
  Backend& backend_;
  Communicator* comm_;
  ExecutorOptions options_;
  std::vector<IoSpec> inputs_, outputs_;
  std::vector<const ir::Value*> slot_values_;  // slot -> value
  std::map<const ir::Value*, int> slot_of_;
  std::vector<int> input_slots_, output_slots_;
  // True when the backend's memory is not the host's (values may need copies).
  bool device_ = false;
  std::vector<Constant> constants_;
  std::vector<ir::Tensor> constant_refs_;  // keeps the mapped data alive
  std::vector<Step> steps_;
  std::vector<int64_t> last_use_;  // per slot; -1: never read; INT64_MAX: pinned
  // The distinct per-rank dims (`seq/2`) of the values, each with a value that has it:
  // checked to be whole against every run's bindings (CheckInputs).
  std::vector<std::pair<const ir::Value*, ir::Dim>> split_dims_;
  // Plans by input shapes, at most kMaxPlans (the least recently used goes).
  static constexpr size_t kMaxPlans = 32;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  uint64_t plan_clock_ = 0;
  // Records of runs (ExecutorOptions::capture) held, at most kMaxRecords: each keeps its
  // device blocks from the device and pinned host buffers.
  static constexpr int kMaxRecords = 8;
  int records_ = 0;
  uint8_t* arena_ = nullptr;
  int64_t arena_capacity_ = 0;
  int64_t unplanned_live_ = 0;
  // Per slot, during a Run with Resident::keep: an output the caller keeps in backend
  // memory, allocated in a block whose release does not reach the executor.
  std::vector<bool> kept_slots_;
  std::set<const void*> kept_blocks_;  // the blocks allocated for them
  int64_t unplanned_peak_ = 0;
  RunStats stats_;
};

}  // namespace tpc::runtime
