// The NCCL communicator (runtime/cuda/nccl_communicator.cc) against the in-process one:
// ranks are threads of this test, each with a CUDA backend on a GPU of its own, the
// buffers in device memory. Every collective, dtype and reduction must give the in-process
// communicator's bytes exactly; a rank that never joins a collective, and one that is gone,
// must fail the others within the timeout, never hang them. A machine with fewer GPUs than
// a test's ranks skips it, saying so; tools/gpu_check.sh runs them on the emulated CUDA
// backend with 4 devices (CUDA_HOST_DEVICES=4, tests/cuda_host/nccl.cc).
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "comm_test_util.h"
#include "test_util.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/inprocess_communicator.h"

namespace tpc::runtime {
namespace {

using comm_test::CheckSame;
using comm_test::Group;
using comm_test::kDTypes;
using comm_test::Kind;
using comm_test::kOps;
using comm_test::MemoryStore;
using comm_test::OnRanks;
using ir::DType;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Whether this machine can run n NCCL ranks (a GPU each); says why not.
bool GpusFor(int n) {
  if (!CudaBuiltIn()) {
    WARN("skipped: this build has no CUDA backend");
    return false;
  }
  if (GpuCount() < n) {
    WARN("skipped: " << n << " NCCL ranks need " << n << " GPUs; this machine has " << GpuCount());
    return false;
  }
  return true;
}

// A rank of the NCCL group, its collectives taking host buffers through device memory:
// the inputs (and the output's prior bytes, so that what the collective leaves unwritten
// compares too) uploaded, the collective on the stream, a wait, the output downloaded.
class Staged final : public Communicator {
 public:
  Staged(std::unique_ptr<Backend> backend, std::unique_ptr<Communicator> nccl)
      : backend_(std::move(backend)), nccl_(std::move(nccl)) {}

  int rank() const override { return nccl_->rank(); }
  int size() const override { return nccl_->size(); }
  absl::Status AllReduce(const void* in, void* out, int64_t count, DType dtype,
                         ReduceOp op) override {
    return Through(Kind::kAllReduce, in, out, count, dtype, op);
  }
  absl::Status AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    return Through(Kind::kAllGather, in, out, count, dtype, ReduceOp::kSum);
  }
  absl::Status ReduceScatter(const void* in, void* out, int64_t count, DType dtype,
                             ReduceOp op) override {
    return Through(Kind::kReduceScatter, in, out, count, dtype, op);
  }
  absl::Status AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    return Through(Kind::kAllToAll, in, out, count, dtype, ReduceOp::kSum);
  }
  absl::Status Barrier() override { return nccl_->Barrier(); }
  void Abort(const absl::Status& reason) override { nccl_->Abort(reason); }

 private:
  absl::Status Through(Kind kind, const void* in, void* out, int64_t count, DType dtype,
                       ReduceOp op) {
    const int n = size();
    const size_t es = static_cast<size_t>(ir::DTypeSize(dtype));
    const size_t in_bytes = static_cast<size_t>(comm_test::InCount(kind, n, count)) * es;
    const size_t out_bytes = static_cast<size_t>(comm_test::OutCount(kind, n, count)) * es;
    void* din = backend_->Allocate(std::max<size_t>(in_bytes, 1));
    void* dout = in == out ? din : backend_->Allocate(std::max<size_t>(out_bytes, 1));
    backend_->CopyFromHost(din, in, in_bytes);
    if (in != out) backend_->CopyFromHost(dout, out, out_bytes);
    absl::Status s = comm_test::Call(*nccl_, kind, din, dout, count, dtype, op);
    if (s.ok()) s = backend_->Synchronize();
    if (s.ok()) backend_->CopyToHost(out, dout, out_bytes);
    if (s.ok()) s = backend_->Synchronize();
    if (dout != din) backend_->Free(dout);
    backend_->Free(din);
    return s;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> nccl_;  // before the backend it uses goes
};

// Rank r of an NCCL group of n on GPU `device` (default: r), meeting through `store`.
absl::StatusOr<std::unique_ptr<Communicator>> ConnectRank(KeyValueStore& store, int r, int n,
                                                          milliseconds timeout, int device = -1) {
  auto backend = MakeBackend({.name = "cuda",
                              .threads = 1,
                              .device = device < 0 ? r : device,
                              .device_collectives = true});
  if (!backend.ok()) return backend.status();
  auto nccl = ConnectDeviceCommunicator(store, r, n, **backend, timeout);
  if (!nccl.ok()) return nccl.status();
  return std::unique_ptr<Communicator>(
      std::make_unique<Staged>(std::move(*backend), std::move(*nccl)));
}

Group ConnectAll(KeyValueStore& store, int n, milliseconds timeout = milliseconds(20000)) {
  return comm_test::ConnectGroup(n, [&](int r) { return ConnectRank(store, r, n, timeout); });
}

// Whether NCCL tells a rank that its peer failed (ncclCommGetAsyncError) depends on the
// transport; the failure tests take either way. The emulated NCCL does (the default) or
// not (CUDA_HOST_NCCL_SILENT=1, read at each failure): each test runs both ways there; the
// variable means nothing to NCCL itself.
class SilentNccl {
 public:
  explicit SilentNccl(bool silent) : env_("CUDA_HOST_NCCL_SILENT", silent ? "1" : "0") {}

 private:
  tpc::testing::ScopedEnv env_;
};

// The inputs' float sums are exact whatever the order of the additions (comm_test::Random):
// NCCL adds in its rings' and trees' orders, rounding half types at every step, and
// averages by summing premultiplied values, where the in-process group sums in rank order
// and rounds once; on these inputs both give the same bits.
constexpr bool kExact = true;

TEST_CASE("NCCL collectives on the GPU equal the in-process communicator's bit for bit",
          "[cuda][nccl]") {
  std::mt19937 rng(20261206);
  for (int n : {1, 2, 4}) {
    if (!GpusFor(n)) continue;
    MemoryStore store;
    Group nccl = ConnectAll(store, n);
    Group threads = MakeInProcessGroup(n, std::chrono::seconds(20));
    for (DType dtype : kDTypes) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n + 1}, int64_t{1000}}) {
        for (ReduceOp op : kOps) {
          CheckSame(nccl, threads, Kind::kAllReduce, dtype, op, count, rng, false, kExact);
          CheckSame(nccl, threads, Kind::kReduceScatter, dtype, op, count, rng, false, kExact);
        }
        CheckSame(nccl, threads, Kind::kAllGather, dtype, ReduceOp::kSum, count, rng, false,
                  kExact);
        CheckSame(nccl, threads, Kind::kAllToAll, dtype, ReduceOp::kSum, count, rng, false, kExact);
      }
    }
    const int64_t big = (int64_t{1} << 20) + 3;
    CheckSame(nccl, threads, Kind::kAllReduce, DType::kF32, ReduceOp::kSum, big, rng, false,
              kExact);
    CheckSame(nccl, threads, Kind::kAllReduce, DType::kBF16, ReduceOp::kAvg, big, rng, true,
              kExact);
    CheckSame(nccl, threads, Kind::kReduceScatter, DType::kF16, ReduceOp::kMax, big, rng, false,
              kExact);
    CheckSame(nccl, threads, Kind::kAllGather, DType::kI64, ReduceOp::kSum, big, rng, false,
              kExact);
    for (const auto& s : OnRanks(nccl, [](Communicator& c) { return c.Barrier(); })) {
      INFO(s.ToString());
      REQUIRE(s.ok());
    }
  }
}

// Rank 0's collective, which rank 1 never joins, fails after the timeout; rank 0 stays
// aborted, and rank 1's own later collective fails too (within the timeout, as NCCL may
// not tell it that rank 0 is gone).
TEST_CASE("A rank that skips an NCCL collective fails the other within the timeout",
          "[cuda][nccl]") {
  if (!GpusFor(2)) return;
  const bool silent = GENERATE(false, true);
  SilentNccl told(silent);
  INFO("CUDA_HOST_NCCL_SILENT=" << silent);
  const milliseconds timeout(1500);
  MemoryStore store;
  Group nccl = ConnectAll(store, 2, timeout);
  std::vector<float> in(64, 1.0f), out(64, 0.0f);
  const auto start = Clock::now();
  const absl::Status lone =
      nccl[0]->AllReduce(in.data(), out.data(), 64, DType::kF32, ReduceOp::kSum);
  const auto took = Clock::now() - start;
  INFO(lone.ToString());
  REQUIRE(lone.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(lone.message()),
             Catch::Contains("rank 0") || Catch::Contains("cuda device 0"));
  CHECK(took >= timeout);
  CHECK(took < timeout + std::chrono::seconds(5));
  const absl::Status again =
      nccl[0]->AllReduce(in.data(), out.data(), 64, DType::kF32, ReduceOp::kSum);
  INFO(again.ToString());
  CHECK(absl::IsAborted(again));

  const auto late = Clock::now();
  const absl::Status other =
      nccl[1]->AllReduce(in.data(), out.data(), 64, DType::kF32, ReduceOp::kSum);
  INFO(other.ToString());
  CHECK(!other.ok());
  CHECK(Clock::now() - late < timeout + std::chrono::seconds(5));
}

// A rank whose communicator was aborted (as a failing rank's is): the other's collective
// fails within the timeout, naming NCCL or the wait.
TEST_CASE("An NCCL rank that is gone fails the other's collective, not hangs it", "[cuda][nccl]") {
  if (!GpusFor(2)) return;
  const bool silent = GENERATE(false, true);
  SilentNccl told(silent);
  INFO("CUDA_HOST_NCCL_SILENT=" << silent);
  const milliseconds timeout(1500);
  MemoryStore store;
  Group nccl = ConnectAll(store, 2, timeout);
  nccl[1]->Abort(absl::InternalError("rank 1 stops"));
  std::vector<float> in(1000, 2.0f), out(1000, 0.0f);
  const auto start = Clock::now();
  const absl::Status s =
      nccl[0]->AllReduce(in.data(), out.data(), 1000, DType::kF32, ReduceOp::kSum);
  INFO(s.ToString());
  REQUIRE(!s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("NCCL") || Catch::Contains("within"));
  CHECK(Clock::now() - start < timeout + std::chrono::seconds(5));
}

// NCCL refuses two ranks on one GPU (tp-run never asks it to: such ranks take the host's
// collectives): both ranks' creation fails, within the timeout, naming NCCL.
TEST_CASE("Two NCCL ranks on one GPU fail to connect, not hang", "[cuda][nccl]") {
  if (!GpusFor(1)) return;
  const milliseconds timeout(3000);
  MemoryStore store;
  const auto start = Clock::now();
  auto ranks = comm_test::ConnectRanks(
      2, {0, 1}, [&](int r) { return ConnectRank(store, r, 2, timeout, /*device=*/0); });
  for (const auto& r : ranks) {
    INFO(r.status().ToString());
    CHECK(!r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("NCCL"));
  }
  CHECK(Clock::now() - start < timeout + std::chrono::seconds(5));
}

}  // namespace
}  // namespace tpc::runtime
