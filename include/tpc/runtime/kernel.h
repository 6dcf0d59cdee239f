// What a kernel sees of one node at run time, and the kernel signature every backend's
// kernels share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/tensor.h"
#include "tpc/runtime/thread_pool.h"

namespace tpc::runtime {

class Backend;

// Gives a kernel the memory for its outputs (the executor: a slot of its arena when
// the output's shape was planned, else a buffer of its own).
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  virtual absl::StatusOr<Tensor> AllocateOutput(int index, ir::DType dtype,
                                                const std::vector<int64_t>& shape) = 0;
};

class KernelContext {
 public:
  KernelContext(const ir::Node& node, std::vector<const Tensor*> inputs,
                std::vector<ir::DType> output_dtypes, OutputAllocator& allocator,
                Communicator* comm, Backend& backend, int64_t opset)
      : node_(node),
        inputs_(std::move(inputs)),
        output_dtypes_(std::move(output_dtypes)),
        outputs_(output_dtypes_.size()),
        allocator_(allocator),
        comm_(comm),
        backend_(backend),
        opset_(opset) {}

  const ir::Node& node() const { return node_; }
  // Opset of the default domain.
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[static_cast<size_t>(i)]; }
  // Input i; must be present (the executor checks required inputs).
  const Tensor& input(int i) const { return *inputs_[static_cast<size_t>(i)]; }
  const Tensor* optional_input(int i) const {
    return has_input(i) ? inputs_[static_cast<size_t>(i)] : nullptr;
  }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // True when output i is used or is a graph output (optional outputs may be skipped).
  bool wants_output(int i) const {
    return i < num_outputs() && (wanted_.empty() || wanted_[static_cast<size_t>(i)]);
  }
  void set_wanted(std::vector<bool> wanted) { wanted_ = std::move(wanted); }
  ir::DType output_dtype(int i) const { return output_dtypes_[static_cast<size_t>(i)]; }
  // Allocates output i with the node's declared element type (or `dtype`).
  absl::StatusOr<Tensor*> Output(int i, const std::vector<int64_t>& shape);
  absl::StatusOr<Tensor*> Output(int i, const std::vector<int64_t>& shape, ir::DType dtype);
  Tensor& output(int i) { return outputs_[static_cast<size_t>(i)]; }
  std::vector<Tensor>& outputs() { return outputs_; }

  Communicator* comm() const { return comm_; }
  // The backend running the kernel (a device kernel's stream and handles) and its threads.
  Backend& backend() const { return backend_; }
  ThreadPool& pool() const;

  // InvalidArgument naming the node: `node '/h.0/Add' (Add): <message>`.
  absl::Status Error(std::string_view message) const;

 private:
  const ir::Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<ir::DType> output_dtypes_;
  std::vector<Tensor> outputs_;
  std::vector<bool> wanted_;
  OutputAllocator& allocator_;
  Communicator* comm_;
  Backend& backend_;
  int64_t opset_;
};

using KernelFn = absl::Status (*)(KernelContext&);
// For a cache input the operator keeps at a fixed capacity (its present has the past's
// rows: onnxruntime's windowed GroupQueryAttention), the least capacity it takes; 0 for
// any other input.
using CacheRowsFn = int64_t (*)(const ir::Node& node, int input);

struct Kernel {
  KernelFn fn = nullptr;
  // The kernel handles f16 and bf16 itself (movement ops, Cast). Otherwise the executor
  // hands it f32 copies of f16/bf16 inputs and converts its f32 outputs back.
  bool any_float = false;
  // In a backend whose memory is not the host's (CUDA): the kernel reads and writes host
  // memory (a CPU kernel standing in for a missing device kernel, or shape arithmetic);
  // the executor copies its inputs there and its outputs back where they are needed.
  bool host = false;
  // Bit i: a device kernel reads input i in host memory (a shape, axes, starts).
  uint32_t host_inputs = 0;
  // The kernel reads only its inputs' shapes, never their bytes (Shape, Size).
  bool shape_only = false;
  // Output 0 holds input 0's elements unchanged, in order (Reshape, Identity): the
  // executor may give it input 0's memory (a view; the kernel then copies nothing), the
  // input's lifetime extended to the view's. The kernel must skip the copy when the
  // output's bytes are the input's.
  bool view = false;
  // The operator takes each batch row's length from an input and its tokens from the
  // row's start (onnxruntime's GroupQueryAttention, by seqlens_k): a batch of prompts of
  // different lengths is padded at the rows' ends for it, not their starts (rt::Generate).
  bool rows_from_start = false;
  // Generation starts a cache input of a fixed capacity at this capacity (zeros), not
  // empty (null: none is).
  CacheRowsFn fixed_cache_rows = nullptr;
  // Called once per node when the executor is created, before any run: makes what the
  // kernel derives from its constant inputs (MatMulNBits' int4 panels on the CPU), so that
  // the first run does not pay for it. Its context holds the node's constant inputs only
  // (as a run hands them: f32 copies of f16 ones where the kernel is not any_float; the
  // others absent) and no outputs. Null: nothing to prepare.
  KernelFn prepare = nullptr;
};

}  // namespace tpc::runtime
