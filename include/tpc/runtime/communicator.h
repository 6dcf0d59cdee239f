// Collectives between the ranks of one tensor-parallel group.
//
// Buffers are flat: every collective moves `count` contiguous elements per rank, and
// the block of rank r sits at offset r * count of a gathered buffer (rank order). The
// kernels of the `tpc` collective ops re-lay an axis other than 0 around these calls.
// Buffers live where the backend keeps tensors (host memory for the in-process
// communicator; device memory and the backend's stream for NCCL), which is why the
// interface takes raw pointers and no tensor type.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "tpc/ir/dtype.h"
#include "tpc/ir/sharding.h"

namespace tpc::runtime {

// The reductions of the collectives, as the IR names them.
using ReduceOp = ir::ReduceOp;

// "sum", "max", "min", "avg"; nullopt-like failure as InvalidArgument.
absl::Status ParseReduceOp(const std::string& name, ReduceOp* op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // out[i] = op over ranks of in[i], i < count. `in` may equal `out`.
  virtual absl::Status AllReduce(const void* in, void* out, int64_t count, ir::DType dtype,
                                 ReduceOp op) = 0;
  // out (size * count elements) = the `count` elements of every rank, in rank order.
  virtual absl::Status AllGather(const void* in, void* out, int64_t count, ir::DType dtype) = 0;
  // in holds size * count elements; out (count) = op over ranks of block `rank()`.
  virtual absl::Status ReduceScatter(const void* in, void* out, int64_t count, ir::DType dtype,
                                     ReduceOp op) = 0;
  // in and out hold size * count elements; block j of `in` goes to rank j, and block k
  // of `out` comes from rank k.
  virtual absl::Status AllToAll(const void* in, void* out, int64_t count, ir::DType dtype) = 0;
  virtual absl::Status Barrier() = 0;

  // Marks this rank as failed with `reason`: every rank waiting in, or later entering,
  // a collective returns an error naming this rank instead of waiting.
  virtual void Abort(const absl::Status& reason) = 0;
};

}  // namespace tpc::runtime
