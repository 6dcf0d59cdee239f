#include "tpc/runtime/shm_communicator.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "reduce.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kMagic = 0x316d68732d637074;  // "tpc-shm1" in little-endian bytes
constexpr size_t kReasonBytes = 1024;
// How long a waiting rank polls before it sleeps on the futex, and how long one sleep
// lasts before it looks at the abort word, its deadline and the peer's liveness again.
constexpr auto kSpin = std::chrono::microseconds(30);
constexpr timespec kSleep = {0, 2'000'000};
// An AllReduce chunk of at least this many bytes over more than 2 ranks goes in two steps
// (each rank reduces its part, then every rank copies every part).
constexpr int64_t kTwoStepBytes = 64 << 10;

// What a rank does in a step; equal on every rank of a step, or the ranks called
// different collectives.
struct Desc {
  int32_t kind = 0;  // Kind
  int32_t op = 0;    // ReduceOp, for the reductions
  int64_t count = 0;
  int32_t dtype = 0;
  int32_t unused = 0;
  bool operator==(const Desc&) const = default;
};

enum Kind : int32_t { kAllReduce = 1, kAllGather, kReduceScatter, kAllToAll, kBarrier };

const char* KindName(int32_t kind) {
  switch (kind) {
    case kAllReduce:
      return "AllReduce";
    case kAllGather:
      return "AllGather";
    case kReduceScatter:
      return "ReduceScatter";
    case kAllToAll:
      return "AllToAll";
    case kBarrier:
      return "Barrier";
    default:
      return "an unknown collective";
  }
}

// "AllReduce of 100 f32 (sum)", "Barrier".
std::string Describe(const Desc& d, bool with_op = true) {
  std::string text = KindName(d.kind);
  if (d.kind == kBarrier) return text;
  absl::StrAppend(&text, " of ", d.count, " ", ir::DTypeName(static_cast<ir::DType>(d.dtype)));
  if (with_op && (d.kind == kAllReduce || d.kind == kReduceScatter)) {
    absl::StrAppend(&text, " (", ir::ReduceOpName(static_cast<ReduceOp>(d.op)), ")");
  }
  return text;
}

// The segment: a header, one RankState per rank, then two halves of chunk_bytes per rank.
struct alignas(64) Header {
  uint64_t magic = 0;
  uint64_t nonce = 0;
  int64_t size = 0;
  int64_t chunk_bytes = 0;
  std::atomic<int32_t> abort_rank{-1};  // the first rank that failed
  std::atomic<int32_t> abort_ready{0};  // 1 once abort_reason holds its reason
  std::atomic<uint32_t> sleepers{0};    // ranks asleep on some counter's futex
  char abort_reason[kReasonBytes] = {};
};

struct alignas(64) RankState {
  std::atomic<uint32_t> step{0};  // the last step this rank published
  Desc desc[2];                   // what it does in its steps, by step parity
};

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<int32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

constexpr size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

struct Layout {
  Layout(int size, int64_t chunk_bytes)
      : states(RoundUp(sizeof(Header), 64)),
        data(RoundUp(states + sizeof(RankState) * static_cast<size_t>(size), 4096)),
        total(data + static_cast<size_t>(size) * 2 * static_cast<size_t>(chunk_bytes)) {}
  size_t states, data, total;
};

// The segment's file and its mapping, released together.
class Mapping {
 public:
  Mapping() = default;
  Mapping(int fd, void* base, size_t bytes) : fd_(fd), base_(base), bytes_(bytes) {}
  Mapping(Mapping&& o) noexcept { *this = std::move(o); }
  Mapping& operator=(Mapping&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(base_, o.base_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  uint8_t* base() const { return static_cast<uint8_t*>(base_); }

 private:
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

std::string Errno(int err) { return std::strerror(err); }

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the waiters are in other processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Each rank holds a write lock on byte `rank` of the segment's file, through its own open
// file description: the kernel drops it when the process dies (or the communicator is
// destroyed), which is how the peers tell a dead rank from a slow one.
absl::Status LockLiveness(int fd, int rank) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = rank;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot lock its liveness byte: ", Errno(errno)));
  }
  return absl::OkStatus();
}

// False once rank `peer`'s lock is gone; true when it is held or cannot be asked.
bool Alive(int fd, int peer) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = peer;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;
  return lock.l_type != F_UNLCK;
}

absl::StatusOr<Mapping> MapFile(int fd, size_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("mmap of ", bytes, " bytes: ", Errno(err)));
  }
  return Mapping(fd, base, bytes);
}

// Rank 0: a new segment `name`, its pages reserved (so that a full /dev/shm is an error
// here, not a SIGBUS in a collective), its header and rank states written.
absl::StatusOr<Mapping> CreateSegment(const std::string& name, const Layout& layout, uint64_t nonce,
                                      int size, int64_t chunk_bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("shm_open: ", Errno(errno)));
  const off_t bytes = static_cast<off_t>(layout.total);
  if (ftruncate(fd, bytes) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("ftruncate: ", Errno(err)));
  }
  if (const int err = posix_fallocate(fd, 0, bytes); err != 0) {
    close(fd);
    return absl::ResourceExhaustedError(absl::StrFormat("cannot reserve %.1f MiB in /dev/shm: %s",
                                                        static_cast<double>(bytes) / 1048576.0,
                                                        Errno(err)));
  }
  TPC_ASSIGN_OR_RETURN(Mapping map, MapFile(fd, layout.total));
  auto* header = new (map.base()) Header();
  header->nonce = nonce;
  header->size = size;
  header->chunk_bytes = chunk_bytes;
  for (int r = 0; r < size; ++r) {
    new (map.base() + layout.states + sizeof(RankState) * static_cast<size_t>(r)) RankState();
  }
  // The magic last: a segment with it is complete.
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
  return map;
}

// The other ranks: rank 0's segment, checked to be the one it created.
absl::StatusOr<Mapping> OpenSegment(const std::string& name, const Layout& layout, uint64_t nonce,
                                    int size, int64_t chunk_bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no shared-memory segment ", name,
                                              " here: not on rank 0's machine (or its /dev/shm)"));
    }
    return absl::UnavailableError(absl::StrCat("shm_open ", name, ": ", Errno(err)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < layout.total) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("the segment ", name, " is not the size rank 0 made"));
  }
  TPC_ASSIGN_OR_RETURN(Mapping map, MapFile(fd, layout.total));
  const auto* header = reinterpret_cast<const Header*>(map.base());
  std::atomic_thread_fence(std::memory_order_acquire);
  if (header->magic != kMagic || header->nonce != nonce || header->size != size ||
      header->chunk_bytes != chunk_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the segment ", name, " here is not rank 0's (another machine's of the same name?)"));
  }
  return map;
}

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(KeyValueStore& store, Mapping map, const Layout& layout, int rank, int size,
                  int64_t chunk_bytes, milliseconds timeout)
      : store_(store),
        map_(std::move(map)),
        header_(reinterpret_cast<Header*>(map_.base())),
        states_(reinterpret_cast<RankState*>(map_.base() + layout.states)),
        data_(map_.base() + layout.data),
        rank_(rank),
        size_(size),
        chunk_(chunk_bytes),
        timeout_(timeout) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduce(const void* in, void* out, int64_t count, ir::DType dtype,
                         ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Check("AllReduce", in, out, count, dtype, /*reduce=*/true));
    const Desc desc{kAllReduce, static_cast<int32_t>(op), count, static_cast<int32_t>(dtype)};
    const int64_t es = ir::DTypeSize(dtype);
    const int64_t per_step = chunk_ / es;
    const auto* src = static_cast<const uint8_t*>(in);
    auto* dst = static_cast<uint8_t*>(out);
    // Part p of a chunk of m elements: [m * p / n, m * (p + 1) / n).
    auto part = [this](int64_t m, int p) { return m * p / size_; };
    return Run([&]() -> absl::Status {
      // `in` may be `out`: a chunk is staged before it is written.
      for (int64_t a = 0; a < count; a += per_step) {
        const int64_t m = std::min(per_step, count - a);
        std::memcpy(Staging(), src + a * es, static_cast<size_t>(m * es));
        TPC_RETURN_IF_ERROR(Step(desc));
        if (size_ <= 2 || m * es < kTwoStepBytes) {
          // Each rank reduces the whole chunk from every slot: one step. At n = 2 it reads
          // the bytes two steps would; small chunks are latency, not bytes.
          TPC_RETURN_IF_ERROR(Reduce(dtype, size_, Slots(0), {dst + a * es}, 0, m, op));
          continue;
        }
        // Rank r reduces part r from every slot (in rank order) into its next staging
        // half, and a second step hands every rank every reduced part: 2 reads per
        // element and rank instead of n.
        const int64_t lo = part(m, rank_), hi = part(m, rank_ + 1);
        TPC_RETURN_IF_ERROR(
            Reduce(dtype, size_, Slots(lo * es), {Staging() + lo * es}, 0, hi - lo, op));
        TPC_RETURN_IF_ERROR(Step(desc));
        for (int p = 0; p < size_; ++p) {
          const int64_t from = part(m, p), to = part(m, p + 1);
          std::memcpy(dst + (a + from) * es, Slot(p) + from * es,
                      static_cast<size_t>((to - from) * es));
        }
      }
      return absl::OkStatus();
    });
  }

  absl::Status AllGather(const void* in, void* out, int64_t count, ir::DType dtype) override {
    TPC_RETURN_IF_ERROR(Check("AllGather", in, out, count, dtype, /*reduce=*/false));
    const Desc desc{kAllGather, 0, count, static_cast<int32_t>(dtype)};
    const int64_t block = count * ir::DTypeSize(dtype);
    const auto* src = static_cast<const uint8_t*>(in);
    auto* dst = static_cast<uint8_t*>(out);
    return Run([&]() -> absl::Status {
      for (int64_t o = 0; o < block; o += chunk_) {
        const size_t m = static_cast<size_t>(std::min(chunk_, block - o));
        std::memcpy(Staging(), src + o, m);
        TPC_RETURN_IF_ERROR(Step(desc));
        for (int p = 0; p < size_; ++p) {
          uint8_t* to = dst + p * block + o;
          // This rank's block from `in`, which may already be in place.
          const uint8_t* from = p == rank_ ? src + o : Slot(p);
          if (to != from) std::memcpy(to, from, m);
        }
      }
      return absl::OkStatus();
    });
  }

  absl::Status ReduceScatter(const void* in, void* out, int64_t count, ir::DType dtype,
                             ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Check("ReduceScatter", in, out, count, dtype, /*reduce=*/true));
    const Desc desc{kReduceScatter, static_cast<int32_t>(op), count, static_cast<int32_t>(dtype)};
    const int64_t es = ir::DTypeSize(dtype);
    auto* dst = static_cast<uint8_t*>(out);
    return Exchange(desc, in, [&](int64_t a, int64_t m) {
      // Rank j's part j of every slot, reduced in rank order.
      return Reduce(dtype, size_, Slots(rank_ * m * es), {dst + a * es}, 0, m, op);
    });
  }

  absl::Status AllToAll(const void* in, void* out, int64_t count, ir::DType dtype) override {
    if (in == out && size() > 1) {  // as the other communicators: even for 0
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank(), ": AllToAll: in and out must be different buffers"));
    }
    TPC_RETURN_IF_ERROR(Check("AllToAll", in, out, count, dtype, /*reduce=*/false));
    const Desc desc{kAllToAll, 0, count, static_cast<int32_t>(dtype)};
    const int64_t es = ir::DTypeSize(dtype);
    auto* dst = static_cast<uint8_t*>(out);
    return Exchange(desc, in, [&](int64_t a, int64_t m) {
      for (int k = 0; k < size_; ++k) {
        std::memcpy(dst + (k * count + a) * es, Slot(k) + rank_ * m * es,
                    static_cast<size_t>(m * es));
      }
      return absl::OkStatus();
    });
  }

  absl::Status Barrier() override {
    TPC_RETURN_IF_ERROR(Broken());
    return Run([&] { return Step(Desc{kBarrier, 0, -1, 0}); });
  }

  void Abort(const absl::Status& reason) override {
    const std::string message =
        absl::StrCat("rank ", rank_, " failed: ", std::string(reason.message()));
    bool write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_.ok()) failed_ = absl::AbortedError(message);
      write = !abort_written_;
      abort_written_ = true;
    }
    // The store's key first (tp-run's watchdogs read it), as the Gloo communicator does;
    // the first writer's reason stands.
    if (write) {
      SetAbortOnce(store_, rank_, reason);
    }
    MarkAborted(std::string(reason.message()));
    // This rank's own collective, on another thread, sees the abort word within one
    // sleep: wait until it has left the caller's buffers.
    const Clock::time_point deadline = Clock::now() + timeout_;
    while (in_flight_.load() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
  }

 private:
  absl::Status Check(const char* what, const void* in, const void* out, int64_t count,
                     ir::DType dtype, bool reduce) {
    TPC_RETURN_IF_ERROR(Broken());
    return CheckCollectiveArgs(rank_, what, in, out, count, dtype, reduce);
  }

  absl::Status Broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

  // Runs a collective's steps; a body that a concurrent Abort cut short reports it.
  template <typename F>
  absl::Status Run(F body) {
    in_flight_.fetch_add(1);
    absl::Status s = body();
    in_flight_.fetch_sub(1);
    return s.ok() ? Broken() : s;
  }

  // ReduceScatter and AllToAll: `in` holds size_ blocks of desc.count elements; each step
  // stages part [a, a + m) of every block (block j at j * m) and `take(a, m)` reads the
  // parts addressed to this rank from the slots.
  template <typename Take>
  absl::Status Exchange(const Desc& desc, const void* in, Take take) {
    const int64_t es = ir::DTypeSize(static_cast<ir::DType>(desc.dtype));
    const int64_t per_step = chunk_ / (es * size_);
    const auto* src = static_cast<const uint8_t*>(in);
    return Run([&]() -> absl::Status {
      for (int64_t a = 0; a < desc.count; a += per_step) {
        const int64_t m = std::min(per_step, desc.count - a);
        for (int j = 0; j < size_; ++j) {
          std::memcpy(Staging() + j * m * es, src + (j * desc.count + a) * es,
                      static_cast<size_t>(m * es));
        }
        TPC_RETURN_IF_ERROR(Step(desc));
        TPC_RETURN_IF_ERROR(take(a, m));
      }
      return absl::OkStatus();
    });
  }

  RankState& State(int r) { return states_[r]; }
  uint8_t* Half(int r, uint32_t step) {
    return data_ + (static_cast<size_t>(r) * 2 + (step & 1)) * static_cast<size_t>(chunk_);
  }
  // Where this rank stages the next step, and the ranks' slots of the last one.
  uint8_t* Staging() { return Half(rank_, step_ + 1); }
  uint8_t* Slot(int r) { return Half(r, step_); }
  std::vector<const uint8_t*> Slots(int64_t offset) {
    std::vector<const uint8_t*> slots;
    for (int p = 0; p < size_; ++p) slots.push_back(Slot(p) + offset);
    return slots;
  }

  bool Aborted() const { return header_->abort_rank.load(std::memory_order_acquire) >= 0; }

  static bool Reached(const std::atomic<uint32_t>& counter, uint32_t step) {
    return static_cast<int32_t>(counter.load(std::memory_order_acquire) - step) >= 0;
  }

  // Publishes the next step (what this rank staged) and waits until every rank has.
  absl::Status Step(const Desc& desc) {
    // An aborted group takes no more steps (a peer that aborted mid-collective would
    // otherwise look like one in another collective).
    if (Aborted()) return FailFromAbort(desc);
    const uint32_t k = step_ + 1;
    RankState& me = State(rank_);
    me.desc[k & 1] = desc;
    me.step.store(k, std::memory_order_seq_cst);
    step_ = k;
    if (header_->sleepers.load(std::memory_order_seq_cst) > 0) {
      Futex(&me.step, FUTEX_WAKE, INT_MAX, nullptr);
    }
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      TPC_RETURN_IF_ERROR(WaitFor(p, k, desc));
      // Rank p writes desc[k & 1] again only at step k + 2, after this rank's k + 1.
      // A mismatch is this rank's own finding (both ranks make it), even when the peer
      // has already aborted the group over it.
      if (!(State(p).desc[k & 1] == desc)) {
        return Fail(desc, absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("rank ", p, " is in ", Describe(State(p).desc[k & 1]),
                                 " at the same step (every rank must call the same collectives "
                                 "in the same order)"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status WaitFor(int peer, uint32_t k, const Desc& desc) {
    std::atomic<uint32_t>& counter = State(peer).step;
    if (Reached(counter, k)) return absl::OkStatus();
    const Clock::time_point start = Clock::now();
    do {
      for (int i = 0; i < 64; ++i) {
        if (Reached(counter, k)) return absl::OkStatus();
        Pause();
      }
    } while (Clock::now() - start < kSpin);
    const Clock::time_point deadline = start + timeout_;
    while (!Reached(counter, k)) {
      if (Aborted()) return FailFromAbort(desc);
      if (!Alive(map_.fd(), peer)) {
        return Fail(desc, absl::StatusCode::kUnavailable,
                    absl::StrCat("rank ", peer, " is gone (its process exited or was killed)"));
      }
      if (Clock::now() >= deadline) {
        std::vector<int> missing;
        for (int p = 0; p < size_; ++p) {
          if (p != rank_ && !Reached(State(p).step, k)) missing.push_back(p);
        }
        return Fail(desc, absl::StatusCode::kDeadlineExceeded,
                    absl::StrCat("timed out after ", timeout_.count() / 1000.0,
                                 " s waiting for rank(s) ", absl::StrJoin(missing, ", ")));
      }
      header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t seen = counter.load(std::memory_order_seq_cst);
      if (static_cast<int32_t>(seen - k) < 0) Futex(&counter, FUTEX_WAIT, seen, &kSleep);
      header_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
    return absl::OkStatus();
  }

  // Writes the group's abort word (the first failure stands) and wakes every sleeper.
  void MarkAborted(const std::string& reason) {
    int32_t none = -1;
    if (header_->abort_rank.compare_exchange_strong(none, rank_)) {
      const size_t n = std::min(reason.size(), kReasonBytes - 1);
      std::memcpy(header_->abort_reason, reason.data(), n);
      header_->abort_reason[n] = '\0';
      header_->abort_ready.store(1, std::memory_order_release);
    }
    for (int p = 0; p < size_; ++p) Futex(&State(p).step, FUTEX_WAKE, INT_MAX, nullptr);
  }

  // A peer's failure ended this rank's wait: its rank and reason, from the segment.
  absl::Status FailFromAbort(const Desc& desc) {
    const int origin = header_->abort_rank.load(std::memory_order_acquire);
    const Clock::time_point until = Clock::now() + milliseconds(200);
    while (header_->abort_ready.load(std::memory_order_acquire) == 0 && Clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    std::string reason = "(no reason given)";
    if (header_->abort_ready.load(std::memory_order_acquire) != 0) {
      reason.assign(header_->abort_reason, strnlen(header_->abort_reason, kReasonBytes));
    }
    return Fail(desc, absl::StatusCode::kAborted,
                absl::StrCat("rank ", origin, " failed: ", reason));
  }

  // Breaks the communicator and returns its error (this rank's Abort's, when it came
  // first); a first-hand failure also aborts the group, so that the peers stop now.
  absl::Status Fail(const Desc& desc, absl::StatusCode code, const std::string& cause) {
    const std::string text = absl::StrCat(Describe(desc, /*with_op=*/false), " failed: ", cause);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.ok()) return failed_;
      failed_ = absl::Status(code, absl::StrCat("rank ", rank_, ": ", text));
    }
    if (code != absl::StatusCode::kAborted) MarkAborted(text);
    return Broken();
  }

  KeyValueStore& store_;
  Mapping map_;
  Header* header_;
  RankState* states_;
  uint8_t* data_;
  const int rank_, size_;
  const int64_t chunk_;
  const milliseconds timeout_;
  uint32_t step_ = 0;  // the last step this rank published

  std::atomic<int> in_flight_{0};
  std::mutex mu_;  // guards what Abort, from any thread, touches
  absl::Status failed_;
  bool abort_written_ = false;
};

// The path in /dev/shm of the segment this process is connecting through ("" when none),
// for UnlinkConnectingSegment and the stop signals' handler (fixed storage: read from a
// signal handler).
char g_connecting[256];
std::atomic<bool> g_claimed{false};         // g_connecting is this process's to fill
std::atomic<bool> g_has_connecting{false};  // g_connecting holds a path

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

// A stop signal while connecting: the segment removed, then the signal's default action.
void StopWhileConnecting(int sig) {
  UnlinkConnectingSegment();
  signal(sig, SIG_DFL);
  raise(sig);
}

// Removes the segment name when connecting ends, however it ends: the ranks that mapped it
// keep it, and nothing is left in /dev/shm. Until then the stop signals left at their
// default action remove it too.
class Unlinker {
 public:
  ~Unlinker() {
    if (name_.empty()) return;
    shm_unlink(name_.c_str());
    if (!registered_) return;
    g_has_connecting.store(false);
    g_claimed.store(false);
    for (size_t i = 0; i < std::size(kStopSignals); ++i) {
      if (installed_[i]) sigaction(kStopSignals[i], &old_[i], nullptr);
    }
  }
  void set(std::string name) {
    name_ = std::move(name);
    // One segment per process is registered (a rank process connects once; tests that
    // connect several groups in one process register the first).
    const std::string path = "/dev/shm" + name_;  // glibc's place for shm_open's names
    bool free = false;
    if (path.size() >= sizeof(g_connecting) || !g_claimed.compare_exchange_strong(free, true)) {
      return;
    }
    registered_ = true;
    std::memcpy(g_connecting, path.c_str(), path.size() + 1);
    g_has_connecting.store(true);
    struct sigaction sa {};
    sa.sa_handler = StopWhileConnecting;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kStopSignals); ++i) {
      installed_[i] = sigaction(kStopSignals[i], nullptr, &old_[i]) == 0 &&
                      old_[i].sa_handler == SIG_DFL &&
                      sigaction(kStopSignals[i], &sa, nullptr) == 0;
    }
  }

 private:
  std::string name_;
  bool registered_ = false;
  struct sigaction old_[std::size(kStopSignals)] = {};
  bool installed_[std::size(kStopSignals)] = {};
};

}  // namespace

void UnlinkConnectingSegment() {
  if (g_has_connecting.load()) unlink(g_connecting);
}

std::string SegmentPathPrefix(int pid) { return absl::StrCat("/dev/shm/tpc-", pid, "-"); }

absl::StatusOr<std::unique_ptr<Communicator>> ConnectShm(KeyValueStore& store, int rank, int size,
                                                         const ShmOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConnectShm: rank ", rank, " of a group of ", size));
  }
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ConnectShm timeout must be positive"));
  }
  // Every step must carry at least one f64 of every rank's part.
  const int64_t chunk = static_cast<int64_t>(
      RoundUp(static_cast<size_t>(std::max<int64_t>(options.chunk_bytes, int64_t{8} * size)), 64));
  const Layout layout(size, chunk);
  const std::string segment_key = absl::StrCat(options.key_prefix, "/segment");
  auto opened_key = [&](int r) { return absl::StrCat(options.key_prefix, "/opened/", r); };

  Unlinker unlinker;
  Mapping map;
  absl::Status mapped;  // why this rank has no mapping
  if (rank == 0) {
    std::random_device device;
    std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device() ^
                        static_cast<uint64_t>(getpid()));
    const uint64_t nonce = rng();
    const std::string name = absl::StrFormat("/tpc-%d-%016x", getpid(), rng());
    absl::StatusOr<Mapping> created = CreateSegment(name, layout, nonce, size, chunk);
    if (created.ok()) {
      unlinker.set(name);
      map = std::move(*created);
      TPC_RETURN_IF_ERROR(store.Set(segment_key, absl::StrCat(name, "\n", nonce)));
    } else {
      mapped = created.status();
      TPC_RETURN_IF_ERROR(store.Set(segment_key, absl::StrCat("!", mapped.message())));
    }
  } else {
    absl::StatusOr<std::string> published = store.Get(segment_key, options.timeout);
    if (!published.ok()) {
      return absl::Status(published.status().code(),
                          absl::StrCat("rank ", rank, ": connecting through shared memory: ",
                                       "rank 0 did not publish its segment: ",
                                       std::string(published.status().message())));
    }
    const size_t newline = published->find('\n');
    uint64_t nonce = 0;
    if (!published->empty() && (*published)[0] == '!') {
      mapped = absl::UnavailableError(absl::StrCat("rank 0 made none: ", published->substr(1)));
    } else if (newline == std::string::npos ||
               !absl::SimpleAtoi(published->substr(newline + 1), &nonce)) {
      mapped = absl::InternalError(absl::StrCat("a malformed segment record: ", *published));
    } else {
      absl::StatusOr<Mapping> opened =
          OpenSegment(published->substr(0, newline), layout, nonce, size, chunk);
      if (opened.ok()) {
        unlinker.set(published->substr(0, newline));  // a rank leaving early removes it too
        map = std::move(*opened);
      } else {
        mapped = opened.status();
      }
    }
  }
  if (mapped.ok()) mapped = LockLiveness(map.fd(), rank);
  TPC_RETURN_IF_ERROR(store.Set(opened_key(rank), std::string(mapped.message())));

  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(opened_key(r));
  if (absl::Status all = store.Wait(keys, options.timeout); !all.ok()) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r) {
      absl::StatusOr<bool> there = store.Check(opened_key(r));
      if (there.ok() && !*there) missing.push_back(r);
    }
    return absl::Status(
        all.code(), absl::StrCat("rank ", rank, ": connecting through shared memory to the ",
                                 size - 1, " other rank(s) failed; not reached: rank(s) ",
                                 absl::StrJoin(missing, ", "), ": ", std::string(all.message())));
  }
  for (int r = 0; r < size; ++r) {
    TPC_ASSIGN_OR_RETURN(const std::string why, store.Get(opened_key(r), options.timeout));
    if (!why.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", rank,
                                                        ": the ranks cannot share memory: rank ", r,
                                                        " cannot map rank 0's ", "segment: ", why));
    }
  }
  return std::unique_ptr<Communicator>(std::make_unique<ShmCommunicator>(
      store, std::move(map), layout, rank, size, chunk, options.timeout));
}

}  // namespace tpc::runtime
