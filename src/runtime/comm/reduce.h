// Internal to the communicators: the element-wise reduction they share, so that the
// in-process, the Gloo and the shared-memory communicators give bit-identical results,
// and the argument checks of the multi-process ones.
//
// Every element is combined in source order 0, 1, ..., n-1 (the communicators pass the
// ranks' blocks in rank order); f16 and bf16 are accumulated in float and rounded once,
// and avg divides the rank-ordered sum by n.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "tpc/ir/dtype.h"
#include "tpc/runtime/communicator.h"

namespace tpc::runtime {

// Whether Reduce supports `dtype`: f32, f64, i32, i64, f16, bf16.
bool IsReducible(ir::DType dtype);

// For i in [begin, end): dst[i] = op over k < n of srcs[k][i], written to every one of
// `dsts`. A destination may be one of the sources. InvalidArgument for a dtype that
// IsReducible refuses.
absl::Status Reduce(ir::DType dtype, int n, const std::vector<const uint8_t*>& srcs,
                    const std::vector<uint8_t*>& dsts, int64_t begin, int64_t end, ReduceOp op);

// The arguments of collective `what` on rank `rank` that every rank can refuse alone (no
// rank communicates for them): a negative count, a dtype without a size (or one Reduce
// refuses, when `reduce`), null buffers for a non-empty collective. InvalidArgument
// naming the rank.
absl::Status CheckCollectiveArgs(int rank, const char* what, const void* in, const void* out,
                                 int64_t count, ir::DType dtype, bool reduce);

}  // namespace tpc::runtime
