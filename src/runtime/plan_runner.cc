#include "tpc/runtime/plan_runner.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/model_file.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

// Rank `rank` of `n`'s file imported, after checking that tp-compile wrote it for that rank
// (its metadata: a plan.json whose entries were swapped or edited would run the wrong
// slices, and give a wrong answer, without a word).
absl::StatusOr<std::unique_ptr<ir::Graph>> ImportRank(const std::string& dir,
                                                      const std::string& path, int rank, int n) {
  auto imported = [&]() -> absl::StatusOr<std::unique_ptr<ir::Graph>> {
    TPC_ASSIGN_OR_RETURN(const onnx::ModelFile model, onnx::ReadModelFile(path));
    // The rank file names its rank and world size: an edited plan.json that lists it for
    // another rank would run the wrong slices.
    for (const auto& kv : model.proto.metadata_props()) {
      std::string written, listed;
      if (kv.key() == "tpc.rank" && kv.value() != absl::StrCat(rank)) {
        written = absl::StrCat("rank ", kv.value());
        listed = absl::StrCat("rank ", rank);
      } else if (kv.key() == "tpc.tp" && kv.value() != absl::StrCat(n)) {
        written = absl::StrCat("a plan of ", kv.value(), " ranks");
        listed = absl::StrCat(n, " ranks");
      } else {
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat(path, " was written for ", written, ", plan.json lists it for ", listed,
                       " (an edited plan.json; write the plan again)"));
    }
    return onnx::ImportModelFile(model, dir);
  }();
  if (!imported.ok()) {
    return absl::Status(
        imported.status().code(),
        absl::StrCat("rank ", rank, ": ", std::string(imported.status().message())));
  }
  return imported;
}

absl::StatusOr<std::vector<std::unique_ptr<ir::Graph>>> LoadPlanUnchecked(
    const std::string& dir, const LoadPlanOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": not a plan folder (no such directory)"));
  }
  TPC_ASSIGN_OR_RETURN(const proto::Plan manifest, plan::ReadManifest(dir));
  // Every rank's files first: nothing is imported from a plan with one bad file. The
  // ranks are hashed in parallel (SHA-256 runs at ~1-2 GB/s per core); the first bad rank
  // in rank order is reported.
  const int n = manifest.ranks_size();
  std::vector<absl::Status> verified(static_cast<size_t>(n));
  std::vector<plan::RankStamps> stamps(static_cast<size_t>(n));
  std::atomic<int> next{0};
  auto verify = [&] {
    for (int r = next++; r < n; r = next++) {
      verified[static_cast<size_t>(r)] = CatchExceptions(dir, [&] {
        return plan::VerifyRankFiles(dir, manifest, r, options.verify_hashes,
                                     &stamps[static_cast<size_t>(r)]);
      });
    }
  };
  const int workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, n);
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(verify);
  verify();
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : verified) TPC_RETURN_IF_ERROR(s);
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  for (int r = 0; r < manifest.ranks_size(); ++r) {
    TPC_ASSIGN_OR_RETURN(auto g,
                         ImportRank(dir, absl::StrCat(dir, "/", manifest.ranks(r).model()), r, n));
    graphs.push_back(std::move(g));
  }
  // The files imported are the files verified: none was replaced in between.
  for (int r = 0; r < n; ++r) {
    TPC_RETURN_IF_ERROR(plan::CheckRankUnchanged(dir, manifest, r, stamps[static_cast<size_t>(r)]));
  }
  return graphs;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<ir::Graph>>> LoadPlan(const std::string& dir,
                                                                 LoadPlanOptions options) {
  return CatchExceptions(dir, [&] { return LoadPlanUnchecked(dir, options); });
}

absl::StatusOr<std::unique_ptr<ir::Graph>> LoadPlanRank(const std::string& dir,
                                                        const proto::Plan& manifest, int rank,
                                                        LoadPlanOptions options) {
  return CatchExceptions(dir, [&]() -> absl::StatusOr<std::unique_ptr<ir::Graph>> {
    plan::RankStamps stamps;
    TPC_RETURN_IF_ERROR(plan::VerifyRankFiles(dir, manifest, rank, options.verify_hashes, &stamps));
    TPC_ASSIGN_OR_RETURN(auto g,
                         ImportRank(dir, absl::StrCat(dir, "/", manifest.ranks(rank).model()), rank,
                                    manifest.ranks_size()));
    TPC_RETURN_IF_ERROR(plan::CheckRankUnchanged(dir, manifest, rank, stamps));
    return g;
  });
}

absl::StatusOr<std::unique_ptr<PlanRunner>> PlanRunner::Create(
    const std::vector<ir::Graph*>& graphs, PlanRunnerOptions options) {
  auto runner = std::unique_ptr<PlanRunner>(new PlanRunner());
  const int n = static_cast<int>(graphs.size());
  const int total = options.threads > 0 ? options.threads : DefaultThreadCount();
  const int per_rank = std::max(1, total / std::max(n, 1));
  runner->io_ = options.io;
  runner->io_.ranks = n;
  // Ranks sharing a GPU exchange device memory directly: their collectives are device
  // kernels on an in-process group whose buffers are the GPU's.
  std::vector<std::unique_ptr<GroupMemory>> memory;
  for (int r = 0; r < n; ++r) {
    auto backend = MakeBackend({.name = options.backend,
                                .threads = per_rank,
                                .device = options.device,
                                .device_collectives = options.backend == "cuda",
                                .memory_limit = options.gpu_memory});
    if (!backend.ok()) return backend.status();
    runner->backends_.push_back(std::move(*backend));
    if (auto m = MakeGroupMemory(*runner->backends_.back())) memory.push_back(std::move(m));
  }
  // The executors' group works on device memory: the host-side steps (outputs assembled,
  // a generation loop's cache) get a host group of their own.
  if (!memory.empty()) runner->host_comms_ = MakeInProcessGroup(n, options.timeout);
  runner->comms_ = MakeInProcessGroup(n, options.timeout, std::move(memory));
  for (int r = 0; r < n; ++r) {
    if (options.fuse) {
      FuseGraph(*graphs[static_cast<size_t>(r)], *runner->backends_[static_cast<size_t>(r)]);
    }
    auto ex = Executor::Create(*graphs[static_cast<size_t>(r)],
                               *runner->backends_[static_cast<size_t>(r)],
                               runner->comms_[static_cast<size_t>(r)].get(), options.executor);
    if (!ex.ok())
      return absl::Status(ex.status().code(),
                          absl::StrCat("rank ", r, ": ", std::string(ex.status().message())));
    runner->executors_.push_back(std::move(*ex));
  }
  return runner;
}

absl::Status PlanRunner::RunOnRanks(const RankFn& fn) {
  const int n = num_ranks();
  std::vector<absl::Status> results(static_cast<size_t>(n));
  auto run_rank = [&](int r) {
    Communicator& comm = *(host_comms_.empty() ? comms_ : host_comms_)[static_cast<size_t>(r)];
    absl::Status s = fn(r, *executors_[static_cast<size_t>(r)], comm);
    if (!s.ok()) {
      comms_[static_cast<size_t>(r)]->Abort(s);
      if (!host_comms_.empty()) host_comms_[static_cast<size_t>(r)]->Abort(s);
    }
    results[static_cast<size_t>(r)] = std::move(s);
  };
  if (n == 1) {
    run_rank(0);
  } else {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(run_rank, r);
    for (auto& t : threads) t.join();
  }
  // Report the rank that failed first-hand over the ones it aborted.
  const absl::Status* first = nullptr;
  for (int r = 0; r < n; ++r) {
    const absl::Status& res = results[static_cast<size_t>(r)];
    if (res.ok()) continue;
    if (res.code() != absl::StatusCode::kAborted) {
      return n == 1 ? res
                    : absl::Status(res.code(),
                                   absl::StrCat("rank ", r, ": ", std::string(res.message())));
    }
    if (first == nullptr) first = &res;
  }
  return first != nullptr ? *first : absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<Tensor>>> PlanRunner::Run(
    const std::map<std::string, Tensor>& inputs) {
  const int n = num_ranks();
  std::vector<std::map<std::string, Tensor>> rank_inputs;
  for (int r = 0; r < n; ++r) {
    TPC_ASSIGN_OR_RETURN(auto in, InputsForRank(inputs, io_, r));
    auto checked = executors_[static_cast<size_t>(r)]->CheckInputs(in);
    if (!checked.ok()) {
      return n == 1 ? checked.status()
                    : absl::Status(
                          checked.status().code(),
                          absl::StrCat("rank ", r, ": ", std::string(checked.status().message())));
    }
    rank_inputs.push_back(std::move(in));
  }
  std::vector<std::vector<Tensor>> results(static_cast<size_t>(n));
  TPC_RETURN_IF_ERROR(RunOnRanks([&](int r, Executor& ex, Communicator& comm) -> absl::Status {
    TPC_ASSIGN_OR_RETURN(auto out, ex.Run(rank_inputs[static_cast<size_t>(r)]));
    for (size_t k = 0; k < out.size(); ++k) {
      const std::string& name = ex.outputs()[k].name;
      TPC_ASSIGN_OR_RETURN(out[k],
                           AssembleOutput(name, out[k], PlacementOf(io_.outputs, name), comm));
    }
    results[static_cast<size_t>(r)] = std::move(out);
    return absl::OkStatus();
  }));
  return results;
}

}  // namespace tpc::runtime
