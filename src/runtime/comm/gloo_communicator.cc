#include "tpc/runtime/gloo_communicator.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "reduce.h"
#include "tpc/util/status_macros.h"

#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/attr.h"
#include "gloo/transport/tcp/device.h"

namespace tpc::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// A store failure carried through Gloo's rendezvous (which knows only exceptions) back to
// ConnectGloo with its status code (DeadlineExceeded for a peer that never came).
class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const absl::Status& status)
      : std::runtime_error(std::string(status.message())), status_(status) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Gloo's rendezvous store on the run's KeyValueStore, under "<prefix>/". Gloo's get()
// blocks until the key is set: here up to the connection timeout.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(KeyValueStore& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_.Set(Key(key), std::string(data.begin(), data.end())));
  }

  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> value = store_.Get(Key(key), timeout_);
    Check(value.status());
    return std::vector<char>(value->begin(), value->end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const std::string& k : keys) full.push_back(Key(k));
    Check(store_.Wait(full, timeout));
  }

  std::string Key(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }

 private:
  static void Check(const absl::Status& s) {
    if (!s.ok()) throw StoreError(s);
  }

  KeyValueStore& store_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

// Gloo's barrier makes its own (empty) buffer; Abort needs to reach it.
class BarrierOptions final : public gloo::BarrierOptions {
 public:
  using gloo::BarrierOptions::BarrierOptions;
  gloo::transport::UnboundBuffer* buffer() const { return gloo::BarrierOptions::buffer.get(); }
};

// Gloo's TCP transport writes with writev(2): a write to a peer that has gone raises
// SIGPIPE, which kills the process unless it is ignored (Gloo's own tests ignore it). A
// handler the program installed is left alone.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

bool LooksLikeTimeout(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos;
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(KeyValueStore& store, std::shared_ptr<gloo::rendezvous::Context> context,
                   std::chrono::milliseconds timeout)
      : store_(store), context_(std::move(context)), timeout_(timeout) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  absl::Status AllReduce(const void* in, void* out, int64_t count, ir::DType dtype,
                         ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Check("AllReduce", in, out, count, dtype, /*reduce=*/true));
    if (count == 0) return absl::OkStatus();
    // Rank c reduces chunk c = [count * c / n, count * (c + 1) / n): every rank sends it
    // its chunk c (all-to-all), rank c combines the n copies in rank order, and an
    // all-gather hands every rank every reduced chunk.
    const int n = size();
    const int64_t es = ir::DTypeSize(dtype);
    auto begin = [count, n](int c) { return count * c / n; };
    std::vector<int64_t> send(static_cast<size_t>(n));
    std::vector<size_t> gather(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      send[static_cast<size_t>(c)] = (begin(c + 1) - begin(c)) * es;
      gather[static_cast<size_t>(c)] = static_cast<size_t>(send[static_cast<size_t>(c)]);
    }
    const int64_t mine = begin(rank() + 1) - begin(rank());
    const std::vector<int64_t> recv(static_cast<size_t>(n), mine * es);
    const size_t in_bytes = static_cast<size_t>(count * es);
    const size_t scratch_bytes = static_cast<size_t>(n * mine * es);
    uint8_t* scratch = Scratch(scratch_bytes);
    uint8_t* out_bytes = static_cast<uint8_t*>(out);
    return Run("AllReduce", count, dtype, [&]() -> absl::Status {
      {
        gloo::AlltoallvOptions a2a(context_);
        auto src = Buffer(const_cast<void*>(in), in_bytes);
        auto dst = Buffer(scratch, scratch_bytes);
        InFlight flight(this, {src.get(), dst.get()});
        a2a.setInput<uint8_t>(std::move(src), send);
        a2a.setOutput<uint8_t>(std::move(dst), recv);
        a2a.setTimeout(timeout_);
        gloo::alltoallv(a2a);
      }
      TPC_RETURN_IF_ERROR(Broken());
      // `in` is read: the reduced chunk may go to `out` even when they are one buffer.
      TPC_RETURN_IF_ERROR(Reduce(dtype, n, Blocks(scratch, n, mine * es),
                                 {out_bytes + begin(rank()) * es}, 0, mine, op));
      gloo::AllgathervOptions ag(context_);
      auto all = Buffer(out_bytes, in_bytes);
      InFlight flight(this, {all.get()});
      ag.setOutput<uint8_t>(std::move(all), gather);  // no input: this rank's chunk is in place
      ag.setTimeout(timeout_);
      gloo::allgatherv(ag);
      return absl::OkStatus();
    });
  }

  absl::Status AllGather(const void* in, void* out, int64_t count, ir::DType dtype) override {
    TPC_RETURN_IF_ERROR(Check("AllGather", in, out, count, dtype, /*reduce=*/false));
    if (count == 0) return absl::OkStatus();
    const size_t block = static_cast<size_t>(count * ir::DTypeSize(dtype));
    uint8_t* out_bytes = static_cast<uint8_t*>(out);
    return Run("AllGather", count, dtype, [&]() -> absl::Status {
      gloo::AllgatherOptions ag(context_);
      auto dst = Buffer(out_bytes, block * static_cast<size_t>(size()));
      // Without an input Gloo takes this rank's block as already in place.
      std::unique_ptr<gloo::transport::UnboundBuffer> src;
      if (in != out_bytes + block * static_cast<size_t>(rank())) {
        src = Buffer(const_cast<void*>(in), block);
      }
      InFlight flight(this, {dst.get(), src.get()});
      if (src != nullptr) ag.setInput<uint8_t>(std::move(src));
      ag.setOutput<uint8_t>(std::move(dst));
      ag.setTimeout(timeout_);
      gloo::allgather(ag);
      return absl::OkStatus();
    });
  }

  absl::Status ReduceScatter(const void* in, void* out, int64_t count, ir::DType dtype,
                             ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Check("ReduceScatter", in, out, count, dtype, /*reduce=*/true));
    if (count == 0) return absl::OkStatus();
    // Block j of every rank goes to rank j, which combines the n blocks in rank order.
    const int n = size();
    const size_t block = static_cast<size_t>(count * ir::DTypeSize(dtype));
    const size_t bytes = block * static_cast<size_t>(n);
    uint8_t* scratch = Scratch(bytes);
    return Run("ReduceScatter", count, dtype, [&]() -> absl::Status {
      {
        gloo::AlltoallOptions a2a(context_);
        auto src = Buffer(const_cast<void*>(in), bytes);
        auto dst = Buffer(scratch, bytes);
        InFlight flight(this, {src.get(), dst.get()});
        a2a.setInput<uint8_t>(std::move(src));
        a2a.setOutput<uint8_t>(std::move(dst));
        a2a.setTimeout(timeout_);
        gloo::alltoall(a2a);
      }
      TPC_RETURN_IF_ERROR(Broken());
      return Reduce(dtype, n, Blocks(scratch, n, static_cast<int64_t>(block)),
                    {static_cast<uint8_t*>(out)}, 0, count, op);
    });
  }

  absl::Status AllToAll(const void* in, void* out, int64_t count, ir::DType dtype) override {
    if (in == out && size() > 1) {  // as the in-process communicator: even for 0
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank(), ": AllToAll: in and out must be different buffers"));
    }
    TPC_RETURN_IF_ERROR(Check("AllToAll", in, out, count, dtype, /*reduce=*/false));
    if (count == 0) return absl::OkStatus();
    const size_t bytes =
        static_cast<size_t>(count * ir::DTypeSize(dtype)) * static_cast<size_t>(size());
    return Run("AllToAll", count, dtype, [&]() -> absl::Status {
      gloo::AlltoallOptions a2a(context_);
      auto src = Buffer(const_cast<void*>(in), bytes);
      auto dst = Buffer(out, bytes);
      InFlight flight(this, {src.get(), dst.get()});
      a2a.setInput<uint8_t>(std::move(src));
      a2a.setOutput<uint8_t>(std::move(dst));
      a2a.setTimeout(timeout_);
      gloo::alltoall(a2a);
      return absl::OkStatus();
    });
  }

  absl::Status Barrier() override {
    return Run("Barrier", -1, ir::DType::kUndefined, [&]() -> absl::Status {
      BarrierOptions barrier(context_);
      InFlight flight(this, {barrier.buffer()});
      barrier.setTimeout(timeout_);
      gloo::barrier(barrier);
      return absl::OkStatus();
    });
  }

  void Abort(const absl::Status& reason) override {
    const std::string message =
        absl::StrCat("rank ", rank(), " failed: ", std::string(reason.message()));
    bool write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_.ok()) failed_ = absl::AbortedError(message);
      write = !abort_written_;
      abort_written_ = true;
    }
    // The key first, so that a peer whose collective fails when the connections close
    // below finds it there. The first writer's reason stands; a store error is not this
    // rank's to report any more.
    if (write) {
      SetAbortOnce(store_, rank(), reason);
    }
    // Closing the connections fails the peers' pending operations at once (reset by
    // peer). This rank's own collective, if one is in flight on another thread, waits
    // on buffers nothing will fill any more: wake its waits until it has returned.
    context_->closeConnections();
    const Clock::time_point deadline = Clock::now() + timeout_;
    std::unique_lock<std::mutex> lock(mu_);
    while (!in_flight_.empty() && Clock::now() < deadline) {
      for (gloo::transport::UnboundBuffer* b : in_flight_) {
        b->abortWaitRecv();
        b->abortWaitSend();
      }
      idle_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }

 private:
  // Registers the buffers of a Gloo call for Abort while it runs. Declared after the
  // options that own the buffers, so it unregisters them before they are freed.
  class InFlight {
   public:
    InFlight(GlooCommunicator* comm, std::initializer_list<gloo::transport::UnboundBuffer*> bufs)
        : comm_(comm) {
      std::lock_guard<std::mutex> lock(comm_->mu_);
      for (gloo::transport::UnboundBuffer* b : bufs) {
        if (b != nullptr) comm_->in_flight_.push_back(b);
      }
    }
    ~InFlight() {
      std::lock_guard<std::mutex> lock(comm_->mu_);
      comm_->in_flight_.clear();
      comm_->idle_.notify_all();
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    GlooCommunicator* comm_;
  };

  std::unique_ptr<gloo::transport::UnboundBuffer> Buffer(void* data, size_t bytes) {
    return context_->createUnboundBuffer(data, bytes);
  }

  // Refuses arguments every rank can check alone (no rank communicates for them) and
  // returns the communicator's error once it is broken.
  absl::Status Check(const char* what, const void* in, const void* out, int64_t count,
                     ir::DType dtype, bool reduce) {
    TPC_RETURN_IF_ERROR(Broken());
    return CheckCollectiveArgs(rank(), what, in, out, count, dtype, reduce);
  }

  absl::Status Broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

  // Runs one collective's body, turning Gloo's exceptions into the broken state. A body
  // that Abort cut short may return normally: the broken state decides.
  template <typename F>
  absl::Status Run(const char* what, int64_t count, ir::DType dtype, F body) {
    TPC_RETURN_IF_ERROR(Broken());
    absl::StatusCode code = absl::StatusCode::kInternal;
    std::string message;
    try {
      absl::Status s = body();
      if (s.ok()) return Broken();
      code = s.code();
      message = std::string(s.message());
    } catch (const gloo::IoException& e) {
      message = e.what();
      code = LooksLikeTimeout(message) ? absl::StatusCode::kDeadlineExceeded
                                       : absl::StatusCode::kUnavailable;
    } catch (const gloo::EnforceNotMet& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown exception";
    }
    return Fail(what, count, dtype, code, message);
  }

  // Breaks the communicator after a failed collective and returns its error (Abort's,
  // when this rank was aborted meanwhile).
  absl::Status Fail(const char* what, int64_t count, ir::DType dtype, absl::StatusCode code,
                    const std::string& cause) {
    // Pending receives must not write into buffers the caller gets back, and the peers
    // should learn now rather than at their timeout: close every connection.
    context_->closeConnections();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.ok()) return failed_;
    }
    std::string text = absl::StrCat("rank ", rank(), ": ", what);
    if (count >= 0) absl::StrAppend(&text, " of ", count, " ", ir::DTypeName(dtype));
    absl::StrAppend(&text, " failed: ", cause);
    // A peer that aborted has said why in the store; it usually is the cause.
    absl::StatusOr<bool> aborted = store_.Check(kAbortKey);
    if (aborted.ok() && *aborted) {
      absl::StatusOr<std::string> why = store_.Get(kAbortKey, std::chrono::milliseconds(1000));
      if (why.ok()) absl::StrAppend(&text, " (", DescribeRankStatus(*why), ")");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) failed_ = absl::Status(code, text);
    return failed_;
  }

  uint8_t* Scratch(size_t bytes) {
    // Never empty: Gloo gets a valid pointer even for an empty block.
    if (scratch_.size() < std::max<size_t>(bytes, 1)) scratch_.resize(std::max<size_t>(bytes, 1));
    return scratch_.data();
  }

  static std::vector<const uint8_t*> Blocks(const uint8_t* base, int n, int64_t block_bytes) {
    std::vector<const uint8_t*> blocks;
    for (int k = 0; k < n; ++k) blocks.push_back(base + k * block_bytes);
    return blocks;
  }

  KeyValueStore& store_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  const std::chrono::milliseconds timeout_;
  std::vector<uint8_t> scratch_;  // the blocks an all-to-all brings for a reduction

  std::mutex mu_;  // guards what Abort, from any thread, touches
  std::condition_variable idle_;
  std::vector<gloo::transport::UnboundBuffer*> in_flight_;
  absl::Status failed_;
  bool abort_written_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(KeyValueStore& store, int rank, int size,
                                                          const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConnectGloo: rank ", rank, " of a group of ", size));
  }
  if (options.address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ConnectGloo needs the address to bind to"));
  }
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ConnectGloo timeout must be positive"));
  }
  IgnoreSigpipe();
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.address;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank, ": cannot bind Gloo to '", options.address, "': ", e.what()));
  }

  StoreAdapter adapter(store, options.key_prefix, options.timeout);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  const Clock::time_point start = Clock::now();
  absl::Status failed;
  try {
    context->setTimeout(options.timeout);
    context->connectFullMesh(adapter, device);
  } catch (const StoreError& e) {
    failed = e.status();
  } catch (const gloo::EnforceNotMet& e) {
    failed = absl::UnavailableError(e.what());
  } catch (const std::exception& e) {
    failed = absl::Status(LooksLikeTimeout(e.what()) ? absl::StatusCode::kDeadlineExceeded
                                                     : absl::StatusCode::kUnavailable,
                          e.what());
  }
  if (failed.ok()) {
    return std::unique_ptr<Communicator>(
        std::make_unique<GlooCommunicator>(store, std::move(context), options.timeout));
  }
  // The peers that have not published their addresses are the ones not reached.
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    absl::StatusOr<bool> there = store.Check(adapter.Key(std::to_string(r)));
    if (there.ok() && !*there) missing.push_back(r);
  }
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::string text = absl::StrCat("rank ", rank, ": connecting to the ", size - 1,
                                  " other rank(s) of the group failed after ", ms, " ms");
  if (!missing.empty()) {
    absl::StrAppend(&text, "; not reached: rank(s) ", absl::StrJoin(missing, ", "));
  }
  absl::StrAppend(&text, ": ", std::string(failed.message()));
  return absl::Status(failed.code(), text);
}

}  // namespace tpc::runtime
