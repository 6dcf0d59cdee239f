// The NCCL calls of tpc's CUDA backend, on the host (see runtime.cc).
//
// A world of one rank copies on the stream. A world of several — ranks that are processes
// of one machine (tp-run's, each on its own emulated device: CUDA_HOST_DEVICES), or threads
// of one process — exchanges through tpc's shared-memory communicator, which is tested
// against the in-process one on its own (tests/runtime/shm_communicator_test.cc): what is
// checked here is the NCCL communicator and the CUDA backend around it, not NCCL. Modelled
// on NCCL:
//  - ncclGetUniqueId makes the id that bootstraps the ranks: the address of a TCP store
//    this process serves on 127.0.0.1 (rank 0's, NCCL's bootstrap root) and a fresh prefix;
//  - each communicator has a thread of its own (NCCL's proxy): it joins the peers (two on
//    one device fail, as NCCL's "Duplicate GPU detected"), then runs the collectives in
//    the order the stream reaches them. A collective is work on the stream that waits
//    (device_work.h's SubmitSteps) until that thread has run it: a query of the stream
//    answers cudaErrorNotReady meanwhile, and the work after it waits;
//  - a nonblocking communicator (ncclConfig_t::blocking = 0) answers ncclInProgress from its
//    creation until the peers have joined, and once from each collective; a call before the
//    last one settled stops the program, as do buffers that overlap outside NCCL's in-place
//    layouts;
//  - a collective that fails (a peer gone) never finishes: its stream stays busy, as a
//    GPU's does behind a hung NCCL kernel, and ncclCommGetAsyncError reports
//    ncclRemoteError, until ncclCommAbort ends the communicator and the work it held.
//    CUDA_HOST_NCCL_SILENT=1 leaves the error unreported, as when NCCL does not notice a
//    peer stopping: only the caller's timeout ends the wait.
// Not as NCCL: an abort fails the peers' collectives at once (the transport's abort is the
// group's); peers that call different collectives fail, named; the reductions add in rank
// order. Point-to-point calls go only as a group that sends one block to every rank and
// receives one from every rank (an all-to-all, all tpc uses); ncclCommSplit only for a
// world of one.
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "device_work.h"
#include "tpc/runtime/shm_communicator.h"
#include "tpc/runtime/tcp_store.h"

using cuda_host::emulated::CheckOnDevice;
using cuda_host::emulated::DeviceAccess;
using cuda_host::emulated::Steps;
using cuda_host::emulated::Submit;
using cuda_host::emulated::SubmitSteps;
using tpc::runtime::Communicator;

namespace {

// A collective of a world of several, as the communicator's thread runs it.
struct Task {
  std::function<absl::Status(Communicator&)> run;
  std::atomic<bool> done{false};  // run, and it succeeded
};

// One rank of a world of several: shared by its handle, its thread and its queued work.
struct Member {
  int nranks = 0, rank = 0;
  int device = 0;  // the current device at its creation
  std::string host, prefix;
  int port = 0;
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::shared_ptr<Task>> tasks;  // under mu
  bool stop = false;                        // under mu
  bool joining = true;                      // under mu: the thread is joining the peers
  std::string error;                        // under mu: why it failed
  std::unique_ptr<tpc::runtime::TcpStore> store;
  std::unique_ptr<Communicator> comm;  // set under mu once joined
  // ncclInProgress while joining, then ncclSuccess or the failure (sticky).
  std::atomic<ncclResult_t> state{ncclInProgress};
  std::atomic<bool> aborted{false};
  // Aborted, and its thread no longer touches the collectives' buffers: their work ends.
  std::atomic<bool> ended{false};
};

// CUDA_HOST_NCCL_SILENT=1, read at each failure (a test may run both ways).
bool Silent() {
  const char* v = std::getenv("CUDA_HOST_NCCL_SILENT");
  return v != nullptr && std::string(v) == "1";
}

[[noreturn]] void Stop(const std::string& message) {
  std::fprintf(stderr, "cuda_host: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

// How long joining the peers may take before the communicator fails.
std::chrono::milliseconds JoinTimeout() { return std::chrono::minutes(2); }

void Failed(Member& m, ncclResult_t why, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.error.empty()) m.error = std::string(status.message());
  if (!Silent() || m.state.load() == ncclInProgress) m.state = why;
}

// The communicator's thread: joins the peers, then runs the collectives in order. After a
// failure it runs none (they never finish; ncclCommAbort ends them).
void Serve(const std::shared_ptr<Member>& m) {
  absl::Status joined = [&]() -> absl::Status {
    auto store = tpc::runtime::TcpStore::Connect(m->host, m->port, JoinTimeout());
    if (!store.ok()) return store.status();
    (*store)->set_reply_timeout(std::chrono::seconds(2));  // an Abort's write, when peers went
    m->store = std::move(*store);
    tpc::runtime::ShmOptions options;
    options.timeout = JoinTimeout();
    options.key_prefix = m->prefix;
    auto comm = tpc::runtime::ConnectShm(*m->store, m->rank, m->nranks, options);
    if (!comm.ok()) return comm.status();
    // NCCL refuses two ranks on one GPU ("Duplicate GPU detected").
    std::vector<int32_t> devices(static_cast<size_t>(m->nranks));
    const int32_t mine = m->device;
    if (absl::Status s = (*comm)->AllGather(&mine, devices.data(), 1, tpc::ir::DType::kI32);
        !s.ok()) {
      return s;
    }
    for (int r = 0; r < m->nranks; ++r) {
      if (r != m->rank && devices[static_cast<size_t>(r)] == mine) {
        return absl::InvalidArgumentError(absl::StrCat("Duplicate GPU detected: rank ", m->rank,
                                                       " and rank ", r, " both on device ", mine));
      }
    }
    std::lock_guard<std::mutex> lock(m->mu);
    m->comm = std::move(*comm);
    return absl::OkStatus();
  }();
  {
    std::lock_guard<std::mutex> lock(m->mu);
    m->joining = false;
  }
  if (!joined.ok()) {
    Failed(*m, absl::IsInvalidArgument(joined) ? ncclInvalidUsage : ncclSystemError, joined);
    return;
  }
  if (m->aborted.load()) return;  // the abort came while joining: the comm is not ended
  m->state = ncclSuccess;
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(m->mu);
      m->wake.wait(lock, [&] { return m->stop || !m->tasks.empty(); });
      // Destroyed: the queued collectives still run (as a destroy after finalize);
      // aborted: they end unrun.
      if (m->aborted.load() || m->tasks.empty()) return;
      task = std::move(m->tasks.front());
      m->tasks.pop_front();
      if (!m->error.empty()) continue;  // failed: it never finishes
    }
    const absl::Status s = [&] {
      DeviceAccess open;  // the collective reads and writes device buffers
      return task->run(*m->comm);
    }();
    if (s.ok()) {
      task->done = true;
    } else {
      Failed(*m, ncclRemoteError, s);
    }
  }
}

ncclResult_t Enqueue(const std::shared_ptr<Member>& m, std::shared_ptr<Task> task) {
  std::lock_guard<std::mutex> lock(m->mu);
  m->tasks.push_back(std::move(task));
  m->wake.notify_all();
  return ncclSuccess;
}

// Ends the communicator's thread: at once when it is idle or its collective fails with the
// abort; left to end by itself when it is still joining (which cannot be interrupted).
void End(const std::shared_ptr<Member>& m, std::thread& thread, bool abort) {
  bool joining;
  Communicator* comm;  // lives as long as `m`
  {
    std::lock_guard<std::mutex> lock(m->mu);
    m->stop = true;
    if (abort) m->aborted = true;
    joining = m->joining;
    comm = m->comm.get();
    m->wake.notify_all();
  }
  // Ends the collective the thread may be in (it returns failing).
  if (abort && comm != nullptr) comm->Abort(absl::AbortedError("ncclCommAbort"));
  if (joining) {
    thread.detach();  // it runs no collective
  } else {
    thread.join();
  }
  m->ended = true;
}

// "cuda_host <host> <port> <prefix>" in an ncclUniqueId.
std::string IdText(const ncclUniqueId& id) {
  return std::string(id.internal, strnlen(id.internal, sizeof id.internal));
}

// The TCP stores this process serves for the ids it made (NCCL's bootstrap root), for its
// lifetime.
std::mutex g_servers_mutex;
std::vector<std::unique_ptr<tpc::runtime::TcpStoreServer>>& Servers() {
  static auto* servers = new std::vector<std::unique_ptr<tpc::runtime::TcpStoreServer>>;
  return *servers;
}

}  // namespace

struct ncclComm {
  bool blocking = true;
  int nranks = 1, rank = 0;
  int device = 0;  // current at its creation: where its buffers must be
  std::deque<std::pair<const void*, size_t>> sends;  // a world of one: to itself, until received
  std::shared_ptr<Member> member;                    // a world of several
  std::thread thread;                                // its thread
  std::atomic<bool> settling{false};                 // a call answered ncclInProgress
};

namespace {

// What a call of a nonblocking communicator answers once its work is queued.
ncclResult_t Queued(ncclComm_t c) {
  if (c->blocking) return ncclSuccess;
  c->settling = true;
  return ncclInProgress;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  auto server = tpc::runtime::TcpStoreServer::Listen("127.0.0.1", 0);
  if (!server.ok()) {
    std::fprintf(stderr, "cuda_host: ncclGetUniqueId: %s\n", server.status().ToString().c_str());
    return ncclSystemError;
  }
  std::random_device device;
  const std::string text = absl::StrCat("cuda_host 127.0.0.1 ", (*server)->port(), " nccl-",
                                        getpid(), "-", device(), device());
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, text.data(), std::min(text.size(), sizeof id->internal - 1));
  std::lock_guard<std::mutex> lock(g_servers_mutex);
  Servers().push_back(std::move(*server));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto c = std::make_unique<ncclComm>();
  c->blocking = config == nullptr || config->blocking != 0;
  c->nranks = nranks;
  c->rank = rank;
  if (cudaGetDevice(&c->device) != cudaSuccess) return ncclUnhandledCudaError;
  if (nranks > 1) {
    const std::vector<std::string> parts = absl::StrSplit(IdText(id), ' ');
    auto m = std::make_shared<Member>();
    if (parts.size() != 4 || parts[0] != "cuda_host" || !absl::SimpleAtoi(parts[2], &m->port)) {
      return ncclInvalidArgument;  // not an id of ncclGetUniqueId's
    }
    m->nranks = nranks;
    m->rank = rank;
    m->host = parts[1];
    m->prefix = parts[3];
    m->device = c->device;
    c->member = m;
    c->thread = std::thread([m] { Serve(m); });
    if (c->blocking) {
      while (m->state.load() == ncclInProgress)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (m->state.load() != ncclSuccess) {
        End(m, c->thread, true);
        return m->state.load();
      }
    }
  }
  *comm = c.release();
  return (*comm)->nranks > 1 && !(*comm)->blocking ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}
ncclResult_t ncclCommSplit(ncclComm_t c, int, int, ncclComm_t* out, ncclConfig_t*) {
  if (c->nranks != 1) return ncclInvalidUsage;
  *out = new ncclComm;
  (*out)->device = c->device;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r) {
  *r = c->member != nullptr ? c->member->state.load() : ncclSuccess;
  if (*r == ncclSuccess && c->settling.exchange(false)) *r = ncclInProgress;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (c->member != nullptr) End(c->member, c->thread, false);
  delete c;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (c->member != nullptr) End(c->member, c->thread, true);
  delete c;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclSystemError:
      return "unhandled system error (cuda_host: joining the peers failed)";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "cuda_host: an NCCL error";
  }
}
const char* ncclGetLastError(ncclComm_t c) {
  thread_local std::string last;
  last.clear();
  if (c != nullptr && c->member != nullptr) {
    std::lock_guard<std::mutex> lock(c->member->mu);
    last = c->member->error;
  }
  return last.c_str();
}

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

// The element type of a world of several's collective: those tpc's communicators take
// (bytes move as u8).
bool TpcType(ncclDataType_t t, tpc::ir::DType* out) {
  using tpc::ir::DType;
  switch (t) {
    case ncclUint8:
      *out = DType::kU8;
      return true;
    case ncclFloat16:
      *out = DType::kF16;
      return true;
    case ncclBfloat16:
      *out = DType::kBF16;
      return true;
    case ncclFloat32:
      *out = DType::kF32;
      return true;
    case ncclFloat64:
      *out = DType::kF64;
      return true;
    case ncclInt32:
      *out = DType::kI32;
      return true;
    case ncclInt64:
      *out = DType::kI64;
      return true;
    default:
      return false;
  }
}
bool TpcOp(ncclRedOp_t op, tpc::ir::ReduceOp* out) {
  using tpc::ir::ReduceOp;
  switch (op) {
    case ncclSum:
      *out = ReduceOp::kSum;
      return true;
    case ncclMax:
      *out = ReduceOp::kMax;
      return true;
    case ncclMin:
      *out = ReduceOp::kMin;
      return true;
    case ncclAvg:
      *out = ReduceOp::kAvg;
      return true;
    default:
      return false;
  }
}

// Stops the program when `a` (`what`'s) and `b` overlap: NCCL leaves that undefined.
void CheckApart(const char* what, const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  if (a_bytes == 0 || b_bytes == 0 || x + a_bytes <= y || y + b_bytes <= x) return;
  char where[96];
  std::snprintf(where, sizeof where, " [%p, +%zu) overlaps [%p, +%zu)", a, a_bytes, b, b_bytes);
  Stop(std::string(what) + where + ", which NCCL leaves undefined");
}
// The input and output of a collective: disjoint, or `in_place` (NCCL's in-place layout).
void CheckBuffers(const char* what, const void* in, size_t in_bytes, const void* out,
                  size_t out_bytes, bool in_place) {
  if (!in_place) CheckApart(what, in, in_bytes, out, out_bytes);
}

ncclResult_t Copy(const void* in, void* out, size_t bytes, cudaStream_t stream) {
  if (in != out)
    Submit(
        stream, [in, out, bytes] { std::memmove(out, in, bytes); }, "an NCCL copy");
  return ncclSuccess;
}

// Queues collective `run` of a world of several on `stream`: started when the stream
// reaches it, finished when the communicator's thread has run it.
ncclResult_t Collective(ncclComm_t c, cudaStream_t stream, const char* what,
                        std::function<absl::Status(Communicator&)> run) {
  if (c->member->aborted.load()) return ncclInvalidUsage;
  // A nonblocking communicator's call that answered ncclInProgress must be polled until it
  // settles before the next call (NCCL's rule).
  if (c->settling.load()) {
    Stop(std::string(what) + " on a nonblocking communicator whose last call has not settled " +
         "(ncclCommGetAsyncError still to say it is no longer ncclInProgress)");
  }
  std::shared_ptr<Member> m = c->member;
  SubmitSteps(
      stream,
      [m, run] {
        auto task = std::make_shared<Task>();
        task->run = run;
        Enqueue(m, task);
        return Steps([m, task] { return task->done.load() || m->ended.load(); });
      },
      what);
  return Queued(c);
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  const size_t bytes = Bytes(count, t);
  CheckOnDevice("ncclAllReduce", "input", in, bytes, c->device);
  CheckOnDevice("ncclAllReduce", "output", out, bytes, c->device);
  CheckBuffers("ncclAllReduce's input", in, bytes, out, bytes, in == out);
  if (c->nranks == 1) return Copy(in, out, bytes, s);
  tpc::ir::DType dtype;
  tpc::ir::ReduceOp reduce;
  if (!TpcType(t, &dtype) || !TpcOp(op, &reduce)) return ncclInvalidArgument;
  const auto n = static_cast<int64_t>(count);
  return Collective(c, s, "ncclAllReduce",
                    [=](Communicator& comm) { return comm.AllReduce(in, out, n, dtype, reduce); });
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t count, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s) {
  const size_t bytes = Bytes(count, t);
  CheckOnDevice("ncclAllGather", "input", in, bytes, c->device);
  CheckOnDevice("ncclAllGather", "output", out, bytes * static_cast<size_t>(c->nranks), c->device);
  CheckBuffers("ncclAllGather's input", in, bytes, out, bytes * static_cast<size_t>(c->nranks),
               in == static_cast<const char*>(out) + bytes * static_cast<size_t>(c->rank));
  if (c->nranks == 1) return Copy(in, out, bytes, s);
  tpc::ir::DType dtype;
  if (!TpcType(t, &dtype)) return ncclInvalidArgument;
  const auto n = static_cast<int64_t>(count);
  return Collective(c, s, "ncclAllGather",
                    [=](Communicator& comm) { return comm.AllGather(in, out, n, dtype); });
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  const size_t bytes = Bytes(count, t);
  CheckOnDevice("ncclReduceScatter", "input", in, bytes * static_cast<size_t>(c->nranks),
                c->device);
  CheckOnDevice("ncclReduceScatter", "output", out, bytes, c->device);
  CheckBuffers("ncclReduceScatter's input", in, bytes * static_cast<size_t>(c->nranks), out, bytes,
               out == static_cast<const char*>(in) + bytes * static_cast<size_t>(c->rank));
  if (c->nranks == 1) return Copy(in, out, bytes, s);
  tpc::ir::DType dtype;
  tpc::ir::ReduceOp reduce;
  if (!TpcType(t, &dtype) || !TpcOp(op, &reduce)) return ncclInvalidArgument;
  const auto n = static_cast<int64_t>(count);
  return Collective(c, s, "ncclReduceScatter", [=](Communicator& comm) {
    return comm.ReduceScatter(in, out, n, dtype, reduce);
  });
}

}  // extern "C"

namespace {

// The point-to-point calls of the open group (this thread's), for a world of several.
struct P2p {
  bool send;
  void* buffer;
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};
thread_local int g_group_depth = 0;
thread_local std::vector<P2p> g_group;

// The group's calls as one all-to-all: a send to and a receive from every rank, of one
// size, on one communicator and stream; ncclInvalidUsage for any other pattern.
ncclResult_t AllToAll(std::vector<P2p> calls) {
  ncclComm_t c = calls.front().comm;
  cudaStream_t stream = calls.front().stream;
  const size_t bytes = calls.front().bytes;
  const auto n = static_cast<size_t>(c->nranks);
  std::vector<void*> sends(n, nullptr), recvs(n, nullptr);
  std::vector<bool> sent(n, false), received(n, false);
  for (const P2p& p : calls) {
    std::vector<bool>& seen = p.send ? sent : received;
    if (p.comm != c || p.stream != stream || p.bytes != bytes ||
        seen[static_cast<size_t>(p.peer)]) {
      return ncclInvalidUsage;
    }
    seen[static_cast<size_t>(p.peer)] = true;
    (p.send ? sends : recvs)[static_cast<size_t>(p.peer)] = p.buffer;
  }
  for (size_t k = 0; k < n; ++k) {
    if (!sent[k] || !received[k]) return ncclInvalidUsage;
  }
  // A receive may not overlap any send of the group (on a GPU they run at once).
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      CheckApart("an NCCL group's receive", recvs[k], bytes, sends[j], bytes);
  return Collective(
      c, stream, "an NCCL all-to-all (grouped sends and receives)", [=](Communicator& comm) {
        // One spare byte each: distinct buffers even for empty blocks.
        std::vector<uint8_t> packed(n * bytes + 1), unpacked(n * bytes + 1);
        for (size_t k = 0; k < n; ++k) std::memcpy(packed.data() + k * bytes, sends[k], bytes);
        const absl::Status s = comm.AllToAll(packed.data(), unpacked.data(),
                                             static_cast<int64_t>(bytes), tpc::ir::DType::kU8);
        for (size_t k = 0; s.ok() && k < n; ++k)
          std::memcpy(recvs[k], unpacked.data() + k * bytes, bytes);
        return s;
      });
}

ncclResult_t PointToPoint(bool send, void* buffer, size_t count, ncclDataType_t t, int peer,
                          ncclComm_t c, cudaStream_t s) {
  const size_t bytes = Bytes(count, t);
  if (peer < 0 || peer >= c->nranks) return ncclInvalidArgument;
  CheckOnDevice(send ? "ncclSend" : "ncclRecv", send ? "input" : "output", buffer, bytes,
                c->device);
  if (g_group_depth == 0) return ncclInvalidUsage;  // only inside a group (above)
  if (c->nranks == 1) {                             // to itself: a receive takes the oldest send
    if (send) {
      c->sends.emplace_back(buffer, bytes);
      return ncclSuccess;
    }
    if (c->sends.empty() || c->sends.front().second != bytes) return ncclInvalidArgument;
    const auto [in, sent] = c->sends.front();
    c->sends.pop_front();
    return Copy(in, buffer, sent, s);
  }
  g_group.push_back({send, buffer, bytes, peer, c, s});
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGroupStart() {
  ++g_group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) return ncclInvalidUsage;
  if (--g_group_depth > 0 || g_group.empty()) return ncclSuccess;
  std::vector<P2p> calls = std::move(g_group);
  g_group.clear();
  return AllToAll(std::move(calls));
}
ncclResult_t ncclSend(const void* in, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s) {
  return PointToPoint(true, const_cast<void*>(in), count, t, peer, c, s);
}
ncclResult_t ncclRecv(void* out, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s) {
  return PointToPoint(false, out, count, t, peer, c, s);
}

}  // extern "C"
