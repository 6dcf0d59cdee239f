// Internal to the executor (executor.cc runs a graph, executor_build.cc builds the
// executor): its steps, a run's values, constants, records and per-binding plans.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tpc/runtime/executor.h"

namespace tpc::runtime {

// A slot alive to the end of a run (a graph output).
inline constexpr int64_t kPinned = std::numeric_limits<int64_t>::max();
using Clock = std::chrono::steady_clock;

// `what` could not get `bytes` of `backend`'s memory: the error, with the backend's
// memory report (a GPU's free and total memory) when it has one.
inline absl::Status OutOfMemory(const Backend& backend, const std::string& what, int64_t bytes) {
  const std::string report = backend.MemoryReport();
  return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot allocate ", bytes, " bytes of ",
                                                   backend.name(), " memory",
                                                   report.empty() ? "" : ": ", report));
}

struct Executor::Step {
  const ir::Node* node;
  const Kernel* kernel;
  std::vector<int> in_slots;  // -1: omitted optional input
  std::vector<int> out_slots;
  std::vector<bool> wanted;
  std::vector<int> frees;  // slots whose last use is this step
  bool on_host = false;    // a host kernel of a device backend: host inputs and outputs
  bool view = false;       // output 0 is input 0's memory (Kernel::view)
};

// The values of a run by slot: in backend memory, and (device backends) host copies.
struct Executor::Values {
  std::vector<Tensor> mem;
  std::vector<Tensor> host;
  explicit Values(size_t n) : mem(n), host(n) {}
  void Clear(int s) {
    mem[static_cast<size_t>(s)] = Tensor();
    host[static_cast<size_t>(s)] = Tensor();
  }
};

// A constant: its bytes in backend memory (`mem`) and, with a device backend, in host
// memory (`host`: the mapped weights or a folded value).
struct Executor::Constant {
  int slot;
  Tensor mem;
  Tensor host;
};

// A run's device work as the backend recorded it (ExecutorOptions::capture), and what
// the record depends on.
struct Executor::Capture {
  std::unique_ptr<Backend::Captured> record;
  // Per slot: the device tensor the record reads or writes (no owner: the backend keeps
  // blocks allocated while capturing), and the host values device kernels read there
  // (a Reshape's shape): a run whose values differ is not the recorded one.
  std::vector<Tensor> mem;
  std::vector<Tensor> host_read;
  explicit Capture(size_t slots) : mem(slots), host_read(slots) {}
};

// Concrete shapes of one binding and the arena offsets they get.
struct Executor::Plan {
  std::vector<std::optional<std::vector<int64_t>>> shapes;  // per slot
  std::vector<int64_t> offsets;                             // per slot; -1: not in the arena
  std::vector<int64_t> bytes;                               // per slot, when planned
  MemoryPlan memory;
  int runs = 0;                 // finished runs with these shapes
  bool waited = false;          // a host kernel waited for the device in one of them
  bool capture_failed = false;  // the backend could not record or replay them
  std::string capture_error;    // why
  std::unique_ptr<Capture> capture;
  uint64_t last_used = 0;  // the executor's plan clock when a run last took it
};

}  // namespace tpc::runtime
