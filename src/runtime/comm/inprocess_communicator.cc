#include "tpc/runtime/inprocess_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "reduce.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

absl::Status ParseReduceOp(const std::string& name, ReduceOp* op) {
  auto parsed = ir::ReduceOpFromName(name);
  if (!parsed) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce '", name, "' is not one of sum, max, min, avg"));
  }
  *op = *parsed;
  return absl::OkStatus();
}

// What every rank posts before the first barrier of a collective.
struct Post {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t count = 0;
  ir::DType dtype = ir::DType::kUndefined;
  int op = 0;
  const char* what = "";
};

// The state the ranks of one group share: posted buffers and a generation-counted
// barrier with an abort flag.
class Rendezvous {
 public:
  Rendezvous(int size, std::chrono::milliseconds timeout)
      : size_(size),
        timeout_(timeout),
        posts_(static_cast<size_t>(size)),
        last_gen_(static_cast<size_t>(size), -1) {}

  int size() const { return size_; }
  Post& post(int rank) { return posts_[static_cast<size_t>(rank)]; }
  const Post& post(int rank) const { return posts_[static_cast<size_t>(rank)]; }

  absl::Status Wait(int rank, const char* what) {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) return absl::AbortedError(abort_message_);
    last_gen_[static_cast<size_t>(rank)] = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return absl::OkStatus();
    }
    const int64_t gen = generation_;
    bool done = cv_.wait_for(lock, timeout_, [&] { return generation_ != gen || aborted_; });
    if (generation_ != gen) return absl::OkStatus();
    if (!done && !aborted_) {
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r) {
        if (last_gen_[static_cast<size_t>(r)] != gen) missing.push_back(r);
      }
      aborted_ = true;
      abort_message_ =
          absl::StrCat("rank ", rank, ": timed out after ", timeout_.count(), " ms in ", what,
                       " waiting for rank(s) ", absl::StrJoin(missing, ", "));
      cv_.notify_all();
    }
    return absl::AbortedError(abort_message_);
  }

  void Abort(int rank, const absl::Status& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    abort_message_ = absl::StrCat("rank ", rank, " failed: ", std::string(reason.message()));
    cv_.notify_all();
  }

 private:
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::vector<Post> posts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<int64_t> last_gen_;  // the generation each rank last waited in
  bool aborted_ = false;
  std::string abort_message_;
};

namespace {

class HostMemory final : public GroupMemory {
 public:
  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Reduce(ir::DType dtype, const std::vector<const uint8_t*>& srcs,
                      const std::vector<uint8_t*>& dsts, int64_t begin, int64_t end,
                      ReduceOp op) override {
    return runtime::Reduce(dtype, static_cast<int>(srcs.size()), srcs, dsts, begin, end, op);
  }
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Rendezvous> rv, int rank,
                        std::unique_ptr<GroupMemory> memory)
      : rv_(std::move(rv)), rank_(rank), mem_(std::move(memory)) {}

  int rank() const override { return rank_; }
  int size() const override { return rv_->size(); }

  absl::Status AllReduce(const void* in, void* out, int64_t count, ir::DType dtype,
                         ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Enter("AllReduce", in, out, count, dtype, static_cast<int>(op)));
    // Rank r reduces the r-th chunk of the elements and writes it to every rank.
    const int n = size();
    int64_t begin = count * rank_ / n, end = count * (rank_ + 1) / n;
    std::vector<const uint8_t*> srcs;
    std::vector<uint8_t*> dsts;
    for (int k = 0; k < n; ++k) {
      srcs.push_back(static_cast<const uint8_t*>(rv_->post(k).in));
      dsts.push_back(static_cast<uint8_t*>(rv_->post(k).out));
    }
    absl::Status s = mem_->Reduce(dtype, srcs, dsts, begin, end, op);
    return Leave("AllReduce", s);
  }

  absl::Status AllGather(const void* in, void* out, int64_t count, ir::DType dtype) override {
    TPC_RETURN_IF_ERROR(Enter("AllGather", in, out, count, dtype, 0));
    const size_t block = static_cast<size_t>(count * ir::DTypeSize(dtype));
    absl::Status s;
    for (int k = 0; k < size() && s.ok(); ++k) {
      uint8_t* dst = static_cast<uint8_t*>(out) + block * static_cast<size_t>(k);
      s = mem_->Copy(dst, rv_->post(k).in, block);
    }
    return Leave("AllGather", s);
  }

  absl::Status ReduceScatter(const void* in, void* out, int64_t count, ir::DType dtype,
                             ReduceOp op) override {
    TPC_RETURN_IF_ERROR(Enter("ReduceScatter", in, out, count, dtype, static_cast<int>(op)));
    const int n = size();
    const size_t offset = static_cast<size_t>(count * rank_ * ir::DTypeSize(dtype));
    std::vector<const uint8_t*> srcs;
    for (int k = 0; k < n; ++k)
      srcs.push_back(static_cast<const uint8_t*>(rv_->post(k).in) + offset);
    absl::Status s = mem_->Reduce(dtype, srcs, {static_cast<uint8_t*>(out)}, 0, count, op);
    return Leave("ReduceScatter", s);
  }

  absl::Status AllToAll(const void* in, void* out, int64_t count, ir::DType dtype) override {
    if (in == out && size() > 1) {
      return absl::InvalidArgumentError("AllToAll: in and out must be different buffers");
    }
    TPC_RETURN_IF_ERROR(Enter("AllToAll", in, out, count, dtype, 0));
    const size_t block = static_cast<size_t>(count * ir::DTypeSize(dtype));
    absl::Status s;
    for (int k = 0; k < size() && s.ok(); ++k) {
      const uint8_t* src =
          static_cast<const uint8_t*>(rv_->post(k).in) + block * static_cast<size_t>(rank_);
      s = mem_->Copy(static_cast<uint8_t*>(out) + block * static_cast<size_t>(k), src, block);
    }
    return Leave("AllToAll", s);
  }

  absl::Status Barrier() override { return rv_->Wait(rank_, "Barrier"); }

  void Abort(const absl::Status& reason) override { rv_->Abort(rank_, reason); }

 private:
  // Posts this rank's buffers and waits for every rank; checks they agree.
  absl::Status Enter(const char* what, const void* in, void* out, int64_t count, ir::DType dtype,
                     int op) {
    if (absl::Status ready = mem_->Ready(); !ready.ok()) {
      rv_->Abort(rank_, ready);
      return ready;
    }
    rv_->post(rank_) = Post{in, out, count, dtype, op, what};
    TPC_RETURN_IF_ERROR(rv_->Wait(rank_, what));
    const Post& mine = rv_->post(rank_);
    for (int k = 0; k < size(); ++k) {
      const Post& p = rv_->post(k);
      if (p.count != mine.count || p.dtype != mine.dtype || p.op != mine.op ||
          std::string(p.what) != what) {
        absl::Status s = absl::InvalidArgumentError(
            absl::StrCat("rank ", rank_, ": collective mismatch: ", what, " of ", mine.count, " ",
                         ir::DTypeName(mine.dtype), " here, ", p.what, " of ", p.count, " ",
                         ir::DTypeName(p.dtype), " on rank ", k));
        rv_->Abort(rank_, s);
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Waits until every rank is done reading the posted buffers.
  absl::Status Leave(const char* what, absl::Status work) {
    if (work.ok()) work = mem_->Done();
    if (!work.ok()) {
      rv_->Abort(rank_, work);
      return work;
    }
    return rv_->Wait(rank_, what);
  }

  std::shared_ptr<Rendezvous> rv_;
  int rank_;
  std::unique_ptr<GroupMemory> mem_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> MakeInProcessGroup(
    int size, std::chrono::milliseconds timeout, std::vector<std::unique_ptr<GroupMemory>> memory) {
  auto rv = std::make_shared<Rendezvous>(size, timeout);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) {
    std::unique_ptr<GroupMemory> mem = static_cast<size_t>(r) < memory.size()
                                           ? std::move(memory[static_cast<size_t>(r)])
                                           : std::make_unique<HostMemory>();
    out.push_back(std::make_unique<InProcessCommunicator>(rv, r, std::move(mem)));
  }
  return out;
}

}  // namespace tpc::runtime
