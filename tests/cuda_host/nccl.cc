// The NCCL calls of tpc's CUDA backend, on the host (see runtime.cc): a world of one rank,
// whose collectives are copies queued on the stream (ranks on the one emulated device use
// the backend's device-memory or host collectives, as on one GPU).
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <utility>

#include "device_work.h"

struct ncclComm {
  int nranks = 1, rank = 0;
  std::deque<std::pair<const void*, size_t>> sends;  // to itself, until received
};

using cuda_host::emulated::CheckOperand;
using cuda_host::emulated::Submit;

extern "C" {

// ---- NCCL: a world of one ----
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::snprintf(id->internal, sizeof id->internal, "cuda_host");
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
                                    ncclConfig_t*) {
  if (nranks != 1 || rank != 0) return ncclInvalidUsage;  // one device: one rank
  *comm = new ncclComm;
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t* out, ncclConfig_t*) {
  *out = new ncclComm;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* r) {
  *r = ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  delete c;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }
const char* ncclGetErrorString(ncclResult_t r) {
  return r == ncclSuccess ? "no error" : "cuda_host: an NCCL error (one rank only)";
}
const char* ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }
}  // extern "C"

namespace {
size_t Bytes(size_t count, ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return count;
    case ncclFloat16:
    case ncclBfloat16:
      return 2 * count;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4 * count;
    default:
      return 8 * count;
  }
}
ncclResult_t Copy(const void* in, void* out, size_t bytes, cudaStream_t stream) {
  CheckOperand("an NCCL collective", "input", in, bytes, true);
  CheckOperand("an NCCL collective", "output", out, bytes, true);
  if (in != out)
    Submit(
        stream, [in, out, bytes] { std::memmove(out, in, bytes); }, "an NCCL copy");
  return ncclSuccess;
}
}  // namespace

extern "C" {
ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, ncclDataType_t t, ncclRedOp_t,
                           ncclComm_t, cudaStream_t s) {
  return Copy(in, out, Bytes(count, t), s);
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t count, ncclDataType_t t, ncclComm_t,
                           cudaStream_t s) {
  return Copy(in, out, Bytes(count, t), s);
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, ncclDataType_t t,
                               ncclRedOp_t, ncclComm_t, cudaStream_t s) {
  return Copy(in, out, Bytes(count, t), s);
}
ncclResult_t ncclSend(const void* in, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t) {
  if (peer != 0) return ncclInvalidArgument;
  c->sends.emplace_back(in, Bytes(count, t));
  return ncclSuccess;
}
ncclResult_t ncclRecv(void* out, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s) {
  if (peer != 0 || c->sends.empty() || c->sends.front().second != Bytes(count, t)) {
    return ncclInvalidArgument;
  }
  const auto [in, bytes] = c->sends.front();
  c->sends.pop_front();
  return Copy(in, out, bytes, s);
}
}  // extern "C"
