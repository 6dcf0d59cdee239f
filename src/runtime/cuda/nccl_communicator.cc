// The NCCL communicator: one process per GPU, every collective on the CUDA backend's
// stream (asynchronous: the executor's stream order is the only synchronisation). The
// ncclUniqueId travels through the run's store. A peer that stops leaves a collective
// hanging on the GPU: the backend's waits poll ncclCommGetAsyncError and fail after the
// timeout, aborting the communicator (ncclCommAbort), and tp-run's failure protocol
// stops the other ranks.
//
// The communicator is nonblocking (ncclConfig_t::blocking = 0), so that its creation,
// which waits for every peer, is bounded by the timeout too: a peer that fails between
// the rendezvous and NCCL's own connection leaves the others polling, not blocked, and
// they abort after the timeout. Any call of a nonblocking communicator may return
// ncclInProgress before its work is queued: each call here polls until it settles
// (Settle), so that to the executor every call is queued when it returns. The price:
// NCCL launches each call of a nonblocking communicator from a thread of its own, a few
// tens of microseconds a collective (not yet measured on a GPU). Splitting a blocking
// communicator off the bounded one (ncclCommSplit) would avoid it; never run, not done.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "../comm/reduce.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cuda_backend.h"
#include "tpc/runtime/cuda/cuda.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime::cuda {
namespace {

// The NCCL type of a reduction's elements: those the CPU communicators reduce
// (IsReducible; a sum of bools or bytes would overflow its type there too). Collectives
// that only move elements move bytes (ncclUint8), whatever their type.
absl::StatusOr<ncclDataType_t> NcclType(ir::DType t) {
  switch (t) {
    case ir::DType::kF32:
      return ncclFloat32;
    case ir::DType::kF16:
      return ncclFloat16;
    case ir::DType::kBF16:
      return ncclBfloat16;
    case ir::DType::kF64:
      return ncclFloat64;
    case ir::DType::kI32:
      return ncclInt32;
    case ir::DType::kI64:
      return ncclInt64;
    default:
      return absl::UnimplementedError(
          absl::StrCat("NCCL has no element type for ", ir::DTypeName(t)));
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

// The outcome of call `what` on a nonblocking communicator: its result, or, while that is
// ncclInProgress, the communicator's state polled until it settles; after `timeout` the
// call fails (the caller aborts the communicator).
absl::Status Settle(ncclComm_t comm, int rank, const char* what, ncclResult_t r,
                    std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0; r == ncclInProgress; ++polls) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) {
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank, ": NCCL ", what,
                                                      " did not complete within ", timeout.count(),
                                                      " ms; a peer rank may have stopped"));
    }
    // A collective settles in microseconds (its launch on NCCL's thread): polled without
    // sleeping for the first 50 µs; joining the peers takes up to seconds.
    if (waited < std::chrono::microseconds(50)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 1000 ? 10 : 200));
    }
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
  }
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("rank ", rank, ": NCCL ", what,
                                          " failed: ", ncclGetErrorString(r), " (",
                                          ncclGetLastError(comm), ")"));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, CudaBackend& backend, int rank, int size,
                   std::chrono::milliseconds timeout)
      : comm_(comm), backend_(backend), rank_(rank), size_(size), timeout_(timeout) {}
  ~NcclCommunicator() override {
    // Drained with the watch still on: a collective a failed peer left hanging fails the
    // wait after the timeout, and the communicator is then aborted, not destroyed (which
    // would wait for it forever); so is one whose finalization does not settle in time.
    const bool drained = !aborted_.load() && backend_.Synchronize().ok();
    backend_.SetWatch(nullptr, nullptr, std::chrono::milliseconds(0));
    if (drained && !aborted_.load() && Check("finalize", ncclCommFinalize(comm_)).ok()) {
      ncclCommDestroy(comm_);
    } else if (!aborted_.exchange(true)) {
      ncclCommAbort(comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduce(const void* in, void* out, int64_t count, ir::DType dtype,
                         ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Usable("AllReduce", in, out, count, dtype, true));
    TPC_ASSIGN_OR_RETURN(ncclDataType_t t, NcclType(dtype));
    return Check("AllReduce", ncclAllReduce(in, out, static_cast<size_t>(count), t, NcclOp(op),
                                            comm_, backend_.stream()));
  }
  absl::Status AllGather(const void* in, void* out, int64_t count, ir::DType dtype) override {
    TPC_RETURN_IF_ERROR(Usable("AllGather", in, out, count, dtype, false));
    return Check("AllGather",
                 ncclAllGather(in, out, Bytes(count, dtype), ncclUint8, comm_, backend_.stream()));
  }
  absl::Status ReduceScatter(const void* in, void* out, int64_t count, ir::DType dtype,
                             ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Usable("ReduceScatter", in, out, count, dtype, true));
    TPC_ASSIGN_OR_RETURN(ncclDataType_t t, NcclType(dtype));
    return Check("ReduceScatter", ncclReduceScatter(in, out, static_cast<size_t>(count), t,
                                                    NcclOp(op), comm_, backend_.stream()));
  }
  absl::Status AllToAll(const void* in, void* out, int64_t count, ir::DType dtype) override {
    TPC_RETURN_IF_ERROR(Usable("AllToAll", in, out, count, dtype, false));
    const size_t block = Bytes(count, dtype);
    TPC_RETURN_IF_ERROR(Check("AllToAll", ncclGroupStart()));
    for (int k = 0; k < size_; ++k) {
      ncclResult_t r = ncclSend(static_cast<const uint8_t*>(in) + block * static_cast<size_t>(k),
                                block, ncclUint8, k, comm_, backend_.stream());
      if (r == ncclSuccess) {
        r = ncclRecv(static_cast<uint8_t*>(out) + block * static_cast<size_t>(k), block, ncclUint8,
                     k, comm_, backend_.stream());
      }
      if (r != ncclSuccess) {
        // The group is closed before the failure aborts the communicator (Check).
        static_cast<void>(ncclGroupEnd());
        return Check("AllToAll", r);
      }
    }
    return Check("AllToAll", ncclGroupEnd());
  }
  absl::Status Barrier() override {
    TPC_RETURN_IF_ERROR(Usable("Barrier", nullptr, nullptr, 0, ir::DType::kF32, false));
    // A one-element all-reduce on the stream, then the wait (which the watch bounds).
    void* scratch = backend_.Allocate(4);
    if (scratch == nullptr) return absl::ResourceExhaustedError("Barrier: no device memory");
    absl::Status s = Check("Barrier", ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum,
                                                    comm_, backend_.stream()));
    if (s.ok()) s = backend_.Synchronize();
    backend_.Free(scratch);
    return s;
  }
  void Abort(const absl::Status& /*reason*/) override {
    if (!aborted_.exchange(true)) ncclCommAbort(comm_);
  }

  // The watch of the backend's waits: an asynchronous NCCL error fails them.
  absl::Status Health() {
    if (aborted_.load()) return absl::AbortedError(absl::StrCat("rank ", rank_, ": NCCL aborted"));
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess ||
        (async != ncclSuccess && async != ncclInProgress)) {
      Abort(absl::OkStatus());
      return absl::UnavailableError(absl::StrCat("rank ", rank_,
                                                 ": NCCL failed: ", ncclGetErrorString(async), " (",
                                                 ncclGetLastError(comm_), ")"));
    }
    return absl::OkStatus();
  }

 private:
  // A call's outcome, settled; a failed call leaves the communicator in no known state:
  // it is aborted, and every later call fails (Usable).
  absl::Status Check(const char* what, ncclResult_t r) {
    absl::Status s = Settle(comm_, rank_, what, r, timeout_);
    if (!s.ok()) Abort(s);
    return s;
  }
  // Whether collective `what` may run: the arguments any rank refuses alone (as the CPU
  // communicators do), and a communicator not aborted (NCCL forbids using it then).
  absl::Status Usable(const char* what, const void* in, const void* out, int64_t count,
                      ir::DType dtype, bool reduce) const {
    if (aborted_.load()) {
      return absl::AbortedError(absl::StrCat("rank ", rank_, ": ", what,
                                             ": the NCCL communicator was aborted after an "
                                             "earlier failure"));
    }
    return CheckCollectiveArgs(rank_, what, in, out, count, dtype, reduce);
  }
  static size_t Bytes(int64_t count, ir::DType dtype) {
    return static_cast<size_t>(count) * static_cast<size_t>(ir::DTypeSize(dtype));
  }

  ncclComm_t comm_;
  CudaBackend& backend_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(KeyValueStore& store, int rank, int size,
                                                          Backend& backend,
                                                          std::chrono::milliseconds timeout) {
  auto& cuda = static_cast<CudaBackend&>(backend);
  cuda.Bind();
  ncclUniqueId id;
  const std::string key = "nccl/unique_id";
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      return absl::InternalError("rank 0: ncclGetUniqueId failed (is NCCL's library usable?)");
    }
    TPC_RETURN_IF_ERROR(store.Set(key, std::string(id.internal, sizeof(id.internal))));
  } else {
    TPC_ASSIGN_OR_RETURN(const std::string value, store.Get(key, timeout));
    if (value.size() != sizeof(id.internal)) {
      return absl::InternalError(absl::StrCat("rank ", rank, ": a malformed NCCL unique id"));
    }
    std::memcpy(id.internal, value.data(), sizeof(id.internal));
  }
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return absl::InternalError(absl::StrCat("rank ", rank, ": ncclCommInitRank on GPU ",
                                            cuda.device(), " failed: ", ncclGetErrorString(r)));
  }
  // Every peer joins here; one that stopped after the rendezvous never does.
  if (absl::Status s = Settle(comm, rank, "ncclCommInitRank (joining the peers)", r, timeout);
      !s.ok()) {
    ncclCommAbort(comm);
    return s;
  }
  auto nccl = std::make_unique<NcclCommunicator>(comm, cuda, rank, size, timeout);
  NcclCommunicator* raw = nccl.get();
  cuda.SetWatch([raw] { return raw->Health(); },
                [raw] { raw->Abort(absl::DeadlineExceededError("timeout")); }, timeout);
  return std::unique_ptr<Communicator>(std::move(nccl));
}

}  // namespace tpc::runtime::cuda
