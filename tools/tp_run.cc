// tp-run: runs a plan (DIR/rank{i}.onnx) on given or random full inputs; writes the
// assembled outputs, compares them with the unsharded original (--check-against) and
// times repeated runs (--repeat). Three ways to run the ranks:
//   - started by torchrun, mpirun or srun (their variables are set): this process is one
//     rank and joins the others through the rendezvous store (runtime/rank_session.h);
//   - otherwise, by default, it launches one worker process per rank, which run as in
//     the first case (runtime/launcher.h);
//   - --ranks threads: every rank as a thread of this process (runtime/plan_runner.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tp_run_generate.h"
#include "tp_run_inputs.h"
#include "tp_run_outputs.h"
#include "tp_run_report.h"
#include "tpc/onnx/importer.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/blas_core.h"
#include "tpc/runtime/compare.h"
#include "tpc/runtime/cpus.h"
#include "tpc/runtime/fusion.h"
#include "tpc/runtime/generate.h"
#include "tpc/runtime/launcher.h"
#include "tpc/runtime/placement_io.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/rank_session.h"
#include "tpc/runtime/tensor_io.h"
#include "tpc/runtime/thread_pool.h"
#include "tpc/runtime/world.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/cli.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/sha256.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/suggest.h"

namespace {

using tpc::tp_run::CheckBeforeRun;
using tpc::tp_run::CheckGeneratable;
using tpc::tp_run::DigestDifference;
using tpc::tp_run::GenerateOnRank;
using tpc::tp_run::InputsDigest;
using tpc::tp_run::MiB;
using tpc::tp_run::PrintTimes;
using tpc::tp_run::Prompt;
using tpc::tp_run::ReportGeneration;
using tpc::tp_run::WriteOutputs;
namespace fs = std::filesystem;
namespace rt = tpc::runtime;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

tpc::cli::Parser MakeParser() {
  tpc::cli::Parser p(
      "tp-run", "DIR [options]",
      "Runs the plan in DIR (rank0.onnx, rank1.onnx, ...), one process per rank (collectives\n"
      "through shared memory on one machine, Gloo over TCP across machines). Started by torchrun "
      "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),\n"
      "mpirun (OMPI_COMM_WORLD_*) or srun (SLURM_PROCID, SLURM_NTASKS), this process is one\n"
      "rank and rank 0 hosts the rendezvous store at MASTER_ADDR:MASTER_PORT (or --master);\n"
      "otherwise tp-run starts the N processes itself (--ranks threads: threads of this one).\n"
      "Every rank checks its files against DIR/plan.json (sizes and SHA-256; --no-verify\n"
      "skips the hashes). Inputs are the original model's full inputs: from --input or\n"
      "--input-dir, or random (floats in [-1, 1), integers in [0, 32), inputs named *mask*\n"
      "all ones; seed --seed; symbolic dims from --dim, defaults batch=1, seq=16). Each rank\n"
      "takes its part by the plan's input placements; rank 0 assembles the full outputs.\n"
      "A rank that fails, crashes or hangs stops every rank within --timeout.\n"
      "Exit status: 0 success, 1 --check-against above tolerance or a failed run, 2 bad usage\n"
      "or bad input, 3 (a rank under a cluster launcher) stopped because another rank failed.");
  p.Add({"backend", "NAME",
         "cpu or cuda (one GPU per process, LOCAL_RANK picks it; --ranks threads: all ranks on "
         "one GPU); operators with no CUDA kernel run on the host (--list-kernels)",
         "cpu", false});
  p.Add({"list-kernels", "",
         "print `backend domain::op dtypes` per kernel of each backend built in", "", false});
  p.Add({"input", "NAME=FILE", "an input from a TensorProto .pb or a .npy file", "", true});
  p.Add(
      {"input-dir", "DIR", "inputs DIR/input_K.pb or .npy (the ONNX test-data layout)", "", false});
  p.Add({"dim", "NAME=VALUE", "binds a symbolic dim for random inputs", "", true});
  p.Add({"output-dir", "OUT", "write OUT/output_K.pb and OUT/output_K.npy", "", false});
  p.Add({"check-against", "MODEL.onnx", "also run MODEL unsharded and compare the outputs", "",
         false});
  p.Add({"rtol", "R", "relative tolerance of the comparisons; f16 plans 1e-2, bf16 5e-2", "1e-4",
         false});
  p.Add({"atol", "A", "absolute tolerance of the comparisons; f16 plans 1e-2, bf16 5e-2", "1e-5",
         false});
  p.Add({"repeat", "K",
         "time K more runs; print throughput and per-stage times (the last run's outputs "
         "are the ones compared and written)",
         "0", false});
  p.Add({"threads", "N", "threads in total (env TPC_NUM_THREADS; default all cores)", "", false});
  p.Add({"seed", "S", "seed of random inputs", "0", false});
  p.Add({"profile", "", "with --repeat: time per operator type, of rank 0", "", false});
  p.Add({"quiet", "", "print only the comparison table and errors", "", false});
  p.Add({"version", "", "print tpc's version and exit", "", false});
  p.Add({"no-verify", "", "skip the SHA-256 check of the plan's files (trusted plans)", "", false});
  p.Add({"no-fuse", "", "run every operator as the plan has it (no fused chains)", "", false});
  p.Add({"cuda-graph", "",
         "with --backend cuda: record each input shape's second run as a CUDA graph and replay "
         "it in later runs (runs where a host kernel waits for the GPU are not recorded; with "
         "--generate the KV cache then goes through the host, so steps of one shape replay)",
         "", false});
  p.Add({"gpu-memory", "BYTES",
         "with --backend cuda: the most device memory each rank's blocks may take (20GiB, "
         "1.5GB); past it a run fails naming what did not fit, as on a full GPU",
         "", false});
  p.Add({"cpus", "LIST",
         "pin to these CPUs (0-3,8), shared out among a machine's ranks; threads default to "
         "the share",
         "", false});
  p.Add({"ranks", "MODE", "processes (one per rank) or threads (all in this process)", "processes",
         false});
  p.Add({"transport", "NAME",
         "the processes' CPU collectives: shm (shared memory, one machine), gloo (TCP), or auto "
         "(shm when every rank can map rank 0's segment)",
         "auto", false});
  p.Add({"timeout", "SECONDS", "how long a rank waits for the others (joining, collectives)", "30",
         false});
  p.Add({"generate", "K",
         "greedy generation with a KV-cache decoder: the prefill and K - 1 decode steps, the "
         "cache kept on its ranks; prints the K new token ids per row and tokens/s",
         "", false});
  p.Add({"prompt", "IDS",
         "with --generate: the prompt's token ids, '1 2 3' (rows by ';', of any lengths: "
         "shorter rows are padded and masked)",
         "", false});
  p.Add({"input-ids", "FILE",
         "with --generate: the prompt, int64 [batch, length] (.pb or .npy; -1s before a "
         "shorter row's tokens pad it)",
         "", false});
  p.Add({"master", "ADDR:PORT",
         "the rendezvous store under a cluster launcher (default MASTER_ADDR:MASTER_PORT)", "",
         false});
  return p;
}

absl::StatusOr<std::pair<std::string, std::string>> SplitAssign(const std::string& opt,
                                                                const std::string& v) {
  auto eq = v.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", opt, " expects NAME=VALUE, got '", v, "'"));
  }
  return std::make_pair(v.substr(0, eq), v.substr(eq + 1));
}

// The inputs given on the command line, by graph input name.
absl::StatusOr<std::map<std::string, rt::Tensor>> GivenInputs(
    const tpc::cli::Args& args, const std::vector<rt::IoSpec>& specs) {
  std::map<std::string, rt::Tensor> inputs;
  if (args.has("input-dir")) {
    const std::string dir = args.get("input-dir");
    for (size_t k = 0;; ++k) {
      std::string path = absl::StrCat(dir, "/input_", k, ".pb");
      std::error_code ec;
      if (!fs::exists(path, ec)) path = absl::StrCat(dir, "/input_", k, ".npy");
      if (!fs::exists(path, ec)) break;
      TPC_ASSIGN_OR_RETURN(rt::NamedTensor t, rt::ReadTensorFile(path));
      std::string name = t.name;
      if (name.empty() || std::none_of(specs.begin(), specs.end(),
                                       [&](const rt::IoSpec& s) { return s.name == name; })) {
        if (k >= specs.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": the model has only ", specs.size(), " inputs"));
        }
        name = specs[k].name;
      }
      inputs[name] = t.tensor;
    }
    if (inputs.empty())
      return absl::InvalidArgumentError(absl::StrCat(dir, ": no input_0.pb or input_0.npy"));
  }
  for (const std::string& v : args.all("input")) {
    TPC_ASSIGN_OR_RETURN(auto kv, SplitAssign("input", v));
    TPC_ASSIGN_OR_RETURN(rt::NamedTensor t, rt::ReadTensorFile(kv.second));
    inputs[kv.first] = t.tensor;
  }
  return inputs;
}

// Random tensors for the inputs not given.
absl::Status FillRandomInputs(const tpc::cli::Args& args, const std::vector<rt::IoSpec>& specs,
                              std::map<std::string, rt::Tensor>& inputs, bool quiet) {
  rt::SymbolBindings bindings;
  for (const auto& [name, t] : inputs) {
    for (const rt::IoSpec& s : specs) {
      if (s.name == name)
        TPC_RETURN_IF_ERROR(rt::BindInput(name, s.type, t.dtype(), t.shape(), bindings));
    }
  }
  // A --dim the inputs do not have is a typo, not a no-op.
  std::set<std::string> symbols;
  for (const rt::IoSpec& s : specs) {
    if (!s.type.shape) continue;
    for (const tpc::ir::Dim& d : *s.type.shape) tpc::ir::CollectSymbols(d, &symbols);
  }
  for (const std::string& v : args.all("dim")) {
    TPC_ASSIGN_OR_RETURN(auto kv, SplitAssign("dim", v));
    int64_t value;
    if (!absl::SimpleAtoi(kv.second, &value) || value < 0 || value > tpc::kMaxTensorElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dim ", v, ": the value must be an integer from 0 to 2^48 (",
                       tpc::kMaxTensorElements, ")"));
    }
    if (!symbols.count(kv.first)) {
      return absl::InvalidArgumentError(
          tpc::UnknownNameMessage("--dim", "symbolic input dim", kv.first,
                                  std::vector<std::string>(symbols.begin(), symbols.end())));
    }
    bindings[kv.first] = value;
  }
  bindings.emplace("batch", 1);
  bindings.emplace("seq", 16);
  uint64_t seed = 0;
  if (!absl::SimpleAtoi(args.get("seed", "0"), &seed))
    return absl::InvalidArgumentError("--seed must be an integer");
  for (size_t i = 0; i < specs.size(); ++i) {
    const rt::IoSpec& s = specs[i];
    if (inputs.count(s.name)) continue;
    TPC_ASSIGN_OR_RETURN(rt::Tensor t, rt::RandomTensor(s.name, s.type, bindings, seed + i));
    if (s.name.find("mask") != std::string::npos) {
      // Attention masks: all positions visible.
      for (int64_t k = 0; k < t.num_elements(); ++k) {
        if (t.dtype() == tpc::ir::DType::kI64)
          t.data<int64_t>()[k] = 1;
        else if (t.dtype() == tpc::ir::DType::kI32)
          t.data<int32_t>()[k] = 1;
      }
    }
    if (!quiet)
      std::fprintf(stderr, "tp-run: random input '%s': %s\n", s.name.c_str(),
                   t.TypeString().c_str());
    inputs[s.name] = t;
  }
  return absl::OkStatus();
}

// The peak resident memory of this process (VmHWM), 0 when unknown.
int64_t PeakResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  int64_t kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long v = 0;
    if (std::sscanf(line, "VmHWM: %lld kB", &v) == 1) kib = v;
  }
  std::fclose(f);
  return kib * 1024;
}

// The flags every mode reads, checked once.
struct Settings {
  std::string plan;
  std::string backend = "cpu";
  bool quiet = false;
  tpc::tp_run::Tolerance tolerance;  // of --check-against and --input-dir's outputs
  int64_t repeat = 0, threads = 0;
  int64_t generate = 0;    // --generate K (0: one run)
  int64_t gpu_memory = 0;  // --gpu-memory (0: the GPU's)
  std::vector<int> cpus;   // --cpus: shared out among the local ranks
  std::chrono::milliseconds timeout{30000};
  rt::CpuTransport transport = rt::CpuTransport::kAuto;
  rt::LoadPlanOptions load;
};

tpc::tp_run::GenerationCheck Check(const Settings& s) {
  return {s.generate, s.tolerance, s.threads};
}

absl::StatusOr<Settings> ReadSettings(const tpc::cli::Args& args) {
  Settings s;
  if (args.positional().size() != 1)
    return absl::InvalidArgumentError("expected exactly one plan DIR (see --help)");
  s.plan = args.positional()[0];
  s.backend = args.get("backend", "cpu");
  if (s.backend != "cpu" && s.backend != "cuda")
    return absl::InvalidArgumentError(
        absl::StrCat("--backend ", s.backend, ": expected cpu or cuda"));
  if (args.has("cuda-graph") && s.backend != "cuda")
    return absl::InvalidArgumentError("--cuda-graph needs --backend cuda");
  if (args.has("gpu-memory")) {
    if (s.backend != "cuda") return absl::InvalidArgumentError("--gpu-memory needs --backend cuda");
    TPC_ASSIGN_OR_RETURN(s.gpu_memory,
                         tpc::cli::ParseByteSize("gpu-memory", args.get("gpu-memory")));
    if (s.gpu_memory <= 0) return absl::InvalidArgumentError("--gpu-memory must be positive");
  }
  if (s.backend == "cuda" && !rt::CudaBuiltIn())
    return absl::UnimplementedError(
        "--backend cuda: this tp-run was built without CUDA (no nvcc at build time)");
  if (s.backend == "cuda" && rt::GpuCount() == 0)
    return absl::FailedPreconditionError(
        "--backend cuda: no GPU here (no CUDA driver or no visible device); use --backend cpu");
  s.quiet = args.has("quiet");
  TPC_ASSIGN_OR_RETURN(s.tolerance, tpc::tp_run::ReadTolerance(args, s.plan));
  if (!absl::SimpleAtoi(args.get("repeat", "0"), &s.repeat) || s.repeat < 0) {
    return absl::InvalidArgumentError("--repeat must be a non-negative integer");
  }
  if (args.has("threads") && (!absl::SimpleAtoi(args.get("threads"), &s.threads) || s.threads < 1 ||
                              s.threads > rt::kMaxThreads)) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be an integer from 1 to ",
                                                   rt::kMaxThreads, " (this machine has ",
                                                   std::thread::hardware_concurrency(), " cores)"));
  }
  double timeout = 0;
  if (!absl::SimpleAtod(args.get("timeout", "30"), &timeout) || !(timeout >= 0.001) ||
      timeout > 1e6) {
    return absl::InvalidArgumentError(
        "--timeout must be a number of seconds from 0.001 to 1000000 (11.5 days)");
  }
  s.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  s.load.verify_hashes = !args.has("no-verify");
  if (args.has("cpus")) {
    TPC_ASSIGN_OR_RETURN(s.cpus, rt::ParseCpuList(args.get("cpus")));
  }
  if (args.has("generate")) {
    if (!absl::SimpleAtoi(args.get("generate"), &s.generate) || s.generate < 1) {
      return absl::InvalidArgumentError("--generate must be a positive number of tokens");
    }
    if (args.has("prompt") == args.has("input-ids")) {
      return absl::InvalidArgumentError("--generate needs the prompt: --prompt or --input-ids");
    }
    for (const char* other : {"input", "input-dir", "repeat", "output-dir"}) {
      if (args.has(other)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", other, " does not go with --generate (the prompt is the input)"));
      }
    }
  } else if (args.has("prompt") || args.has("input-ids")) {
    return absl::InvalidArgumentError("--prompt and --input-ids go with --generate K");
  }
  const std::string ranks = args.get("ranks", "processes");
  if (ranks != "processes" && ranks != "threads") {
    return absl::InvalidArgumentError(
        absl::StrCat("--ranks ", ranks, ": expected processes or threads"));
  }
  if (args.has("transport")) {
    if (ranks == "threads") {
      return absl::InvalidArgumentError(
          "--transport is for ranks as processes (threads share their buffers directly)");
    }
    auto transport = rt::ParseCpuTransport(args.get("transport"));
    if (!transport.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", transport.status().message()));
    }
    s.transport = *transport;
  }
  return s;
}

// The full inputs: given, and random for the rest.
absl::StatusOr<std::map<std::string, rt::Tensor>> FullInputs(const tpc::cli::Args& args,
                                                             const std::vector<rt::IoSpec>& specs,
                                                             bool quiet) {
  TPC_ASSIGN_OR_RETURN(auto inputs, GivenInputs(args, specs));
  TPC_RETURN_IF_ERROR(FillRandomInputs(args, specs, inputs, quiet));
  return inputs;
}

// `compute`: rank 0's time until its kernels finished, per run (the rest of a run is
// copying outputs to the host and assembling them).
// Writes --output-dir and runs --check-against on the assembled outputs of rank 0
// (`others`: the other ranks' assembled outputs where this process has them, which must
// agree). Returns the exit status.
absl::StatusOr<int> Conclude(const tpc::cli::Args& args, const Settings& s, int ranks,
                             const std::vector<rt::IoSpec>& out_specs,
                             const std::vector<rt::Tensor>& outputs,
                             const std::vector<std::vector<rt::Tensor>>& others) {
  if (args.has("output-dir")) {
    TPC_ASSIGN_OR_RETURN(const int removed,
                         WriteOutputs(args.get("output-dir"), out_specs, outputs));
    if (removed > 0) {  // (even with --quiet: files the user had are gone)
      std::fprintf(stderr, "tp-run: removed %d output file(s) of an earlier run from %s\n", removed,
                   args.get("output-dir").c_str());
    }
    if (!s.quiet)
      std::fprintf(stderr, "tp-run: wrote %zu output(s) to %s\n", outputs.size(),
                   args.get("output-dir").c_str());
  }
  auto compare = [&](const std::string& title, const std::vector<rt::Tensor>& expected) {
    return tpc::tp_run::PrintComparison(title, out_specs, outputs, others, expected, s.tolerance);
  };

  // The expected outputs of an ONNX test-data folder (output_K.pb beside input_K.pb).
  std::vector<rt::Tensor> expected;
  if (args.has("input-dir")) {
    for (size_t k = 0; k < outputs.size(); ++k) {
      const std::string path = absl::StrCat(args.get("input-dir"), "/output_", k, ".pb");
      std::error_code ec;
      if (!fs::exists(path, ec)) break;
      TPC_ASSIGN_OR_RETURN(rt::NamedTensor t, rt::ReadTensorFile(path));
      expected.push_back(t.tensor);
    }
    if (expected.size() != outputs.size()) expected.clear();
  }
  if (!args.has("check-against") && expected.empty()) {
    if (!s.quiet) {
      for (size_t k = 0; k < outputs.size(); ++k) {
        std::printf("output %zu '%s': %s: %s\n", k, out_specs[k].name.c_str(),
                    outputs[k].TypeString().c_str(), rt::SummarizeTensor(outputs[k]).c_str());
      }
    }
    return 0;
  }
  bool all = true;
  if (!expected.empty()) {
    all =
        compare(absl::StrCat("check against ", args.get("input-dir"), "/output_K.pb"), expected) &&
        all;
  }
  if (args.has("check-against")) {
    // The original model, unsharded, on the same full inputs.
    const std::string model = args.get("check-against");
    TPC_ASSIGN_OR_RETURN(auto original, tpc::onnx::ImportModel(model));
    rt::PlanRunnerOptions options;
    options.threads = static_cast<int>(s.threads);
    TPC_ASSIGN_OR_RETURN(auto reference_runner, rt::PlanRunner::Create({original.get()}, options));
    TPC_ASSIGN_OR_RETURN(auto inputs,
                         FullInputs(args, reference_runner->executor(0).inputs(), true));
    TPC_ASSIGN_OR_RETURN(auto reference, reference_runner->Run(inputs));
    if (reference[0].size() != outputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(model, " has ", reference[0].size(), " outputs, the plan ", outputs.size()));
    }
    all = compare(absl::StrCat("check against ", model, ", ", ranks, " rank(s) vs unsharded,"),
                  reference[0]) &&
          all;
  }
  return all ? 0 : 1;
}

// --ranks threads (and plans of one rank): every rank a thread of this process.
absl::StatusOr<int> RunThreads(const tpc::cli::Args& args, const Settings& s) {
  const auto t_load = Clock::now();
  TPC_ASSIGN_OR_RETURN(auto graphs, rt::LoadPlan(s.plan, s.load));
  TPC_ASSIGN_OR_RETURN(const tpc::proto::Plan manifest, tpc::plan::ReadManifest(s.plan));
  std::vector<tpc::ir::Graph*> ptrs;
  for (auto& g : graphs) ptrs.push_back(g.get());
  rt::PlanRunnerOptions options;
  options.threads = static_cast<int>(s.threads);
  if (!s.cpus.empty()) {
    TPC_RETURN_IF_ERROR(rt::PinToCpus(s.cpus));
    if (s.threads == 0) options.threads = static_cast<int>(s.cpus.size());
  }
  options.backend = s.backend;
  options.gpu_memory = s.gpu_memory;
  options.executor.profile = args.has("profile");
  options.executor.capture = args.has("cuda-graph");
  options.fuse = !args.has("no-fuse");
  options.timeout = s.timeout;
  TPC_ASSIGN_OR_RETURN(options.io, rt::IoPlacementsFromPlan(manifest));
  TPC_ASSIGN_OR_RETURN(auto runner, rt::PlanRunner::Create(ptrs, options));
  const double load_s = Seconds(t_load);
  const int n = runner->num_ranks();
  if (s.generate > 0) {
    TPC_RETURN_IF_ERROR(CheckGeneratable(manifest));
    TPC_ASSIGN_OR_RETURN(const rt::Tensor prompt, Prompt(args));
    std::vector<rt::GenerateResult> results(static_cast<size_t>(n));
    TPC_RETURN_IF_ERROR(
        runner->RunOnRanks([&](int r, rt::Executor& ex, rt::Communicator& comm) -> absl::Status {
          TPC_ASSIGN_OR_RETURN(results[static_cast<size_t>(r)],
                               GenerateOnRank(ex, &comm, options.io, r, n, prompt, s.generate));
          return absl::OkStatus();
        }));
    for (int r = 1; r < n; ++r) {
      if (results[static_cast<size_t>(r)].tokens != results[0].tokens) {
        return absl::InternalError(absl::StrCat("rank ", r, " generated other ids than rank 0"));
      }
    }
    return ReportGeneration(args, Check(s), n, prompt, results[0]);
  }
  const auto specs = rt::FullSpecs(runner->executor(0).inputs(), options.io.inputs, n);
  const auto out_specs = rt::FullSpecs(runner->executor(0).outputs(), options.io.outputs, n);
  TPC_ASSIGN_OR_RETURN(auto inputs, FullInputs(args, specs, s.quiet));

  const auto t_first = Clock::now();
  TPC_ASSIGN_OR_RETURN(auto outputs, runner->Run(inputs));
  const double first_s = Seconds(t_first);
  if (!s.quiet) {
    std::fprintf(stderr,
                 "tp-run: %s: %d rank(s) as threads; load %.3f s, first run %.3f s (with memory "
                 "planning)\n",
                 s.plan.c_str(), n, load_s, first_s);
    for (int r = 0; r < n; ++r) {
      const rt::RunStats& st = runner->executor(r).last_stats();
      std::fprintf(
          stderr,
          "tp-run: rank %d: arena %s (without reuse %s), %d planned values, unplanned peak %s\n", r,
          MiB(st.arena_bytes).c_str(), MiB(st.planned_total_bytes).c_str(), st.planned_values,
          MiB(st.unplanned_peak_bytes).c_str());
    }
  }
  if (s.repeat > 0) {
    std::vector<double> times, compute;
    for (int64_t i = 0; i < s.repeat; ++i) {
      const auto t = Clock::now();
      TPC_ASSIGN_OR_RETURN(auto again, runner->Run(inputs));
      times.push_back(Seconds(t));
      compute.push_back(runner->executor(0).last_stats().compute_seconds);
      // The last run's outputs are the ones compared: steady runs (the arena reused, a
      // replayed CUDA graph) must give the first run's results.
      outputs = std::move(again);
    }
    PrintTimes(args, times, compute, load_s, first_s, runner->executor(0).last_stats());
  }
  std::vector<std::vector<rt::Tensor>> others(outputs.begin() + 1, outputs.end());
  return Conclude(args, s, n, out_specs, outputs[0], others);
}

// What a rank posts for rank 0's report.
std::string StatsLine(const rt::RunStats& st) {
  return absl::StrCat(st.arena_bytes, " ", st.planned_total_bytes, " ", st.planned_values, " ",
                      st.unplanned_peak_bytes, " ", PeakResidentBytes());
}

// One rank of a multi-process run: a worker of tp-run's launcher or a process of
// torchrun / mpirun / srun. Returns the exit status.
absl::StatusOr<int> RunRank(const tpc::cli::Args& args, const Settings& s, const rt::World& world) {
  const int rank = world.rank;
  const bool lead = rank == 0;
  const bool quiet = s.quiet || !lead;
  // This rank's errors: printed here, named by rank; the exit status says what kind.
  auto fail = [&](const absl::Status& st, int code) {
    const std::string m(st.message());
    const std::string prefix = absl::StrCat("rank ", rank, ": ");
    std::fprintf(stderr, "tp-run: error: %s%s\n", m.rfind(prefix, 0) == 0 ? "" : prefix.c_str(),
                 m.c_str());
    return code;
  };
  auto manifest = tpc::plan::ReadManifest(s.plan);
  if (!manifest.ok()) return fail(manifest.status(), 2);
  if (manifest->ranks_size() != world.size) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "the plan in ", s.plan, " has ", manifest->ranks_size(), " ranks but ",
                    world.launcher, " started ", world.size, " (", world.size_source, ")")),
                2);
  }
  const auto t_load = Clock::now();
  rt::RankSessionOptions session_options;
  session_options.timeout = s.timeout;
  session_options.quiet_when_stopped = world.launcher == "tp-run";
  session_options.transport = s.transport;
  {
    auto plan_hash = tpc::Sha256File(s.plan + "/plan.json");
    if (!plan_hash.ok()) return fail(plan_hash.status(), 2);
    session_options.run_token =
        absl::StrCat(*plan_hash, " ", world.size, " ", world.launcher, " ", world.job_id);
  }
  auto joined = rt::RankSession::Join(world, session_options);
  if (!joined.ok()) return fail(joined.status(), 2);
  rt::RankSession& session = **joined;

  // Load, build and check this rank's inputs; every rank agrees before anything runs.
  std::unique_ptr<tpc::ir::Graph> graph;
  std::unique_ptr<rt::Backend> backend;
  std::unique_ptr<rt::Executor> executor;
  bool use_nccl = false;
  std::map<std::string, rt::Tensor> full, mine;
  rt::IoPlacements io;
  std::vector<rt::IoSpec> out_specs;
  rt::Tensor prompt;
  absl::Status ready = [&]() -> absl::Status {
    // LOCAL_RANK picks the GPU. NCCL connects the ranks when each has a GPU of its own,
    // which every rank checks from every rank's (machine, PCI bus id), so that all choose
    // alike: a launcher that shows each process one GPU (CUDA_VISIBLE_DEVICES) still
    // gives each its own. Ranks that share GPUs (fewer GPUs than local ranks) go through
    // the host (the CPU communicator): NCCL refuses two ranks on one GPU. Posted first,
    // before anything here can fail, so that no rank waits for another's post.
    const int gpus = s.backend == "cuda" ? std::max(1, rt::GpuCount()) : 1;
    if (s.backend == "cuda") {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      const auto bus = rt::GpuBusId(world.local_rank % gpus);
      TPC_RETURN_IF_ERROR(session.Post(
          "gpu", absl::StrCat(host, " ", bus.ok() ? *bus : std::string(bus.status().message()))));
      TPC_ASSIGN_OR_RETURN(const std::vector<std::string> all, session.Gather("gpu"));
      const std::optional<std::pair<int, int>> shared = rt::SharedGpu(all);
      use_nccl = !shared.has_value();
      if (shared && lead) {
        std::fprintf(
            stderr, "tp-run: ranks %d and %d share a GPU (%s): collectives through the host\n",
            shared->first, shared->second, all[static_cast<size_t>(shared->first)].c_str());
      }
    }
    if (rank == 0 && world.launcher != "tp-run") TPC_RETURN_IF_ERROR(CheckBeforeRun(args, s.plan));
    TPC_ASSIGN_OR_RETURN(io, rt::IoPlacementsFromPlan(*manifest));
    TPC_ASSIGN_OR_RETURN(graph, rt::LoadPlanRank(s.plan, *manifest, rank, s.load));
    const int cores = s.threads > 0 ? static_cast<int>(s.threads) : rt::DefaultThreadCount();
    int threads_here = std::max(1, cores / std::max(1, world.local_size));
    if (!s.cpus.empty()) {
      // This rank's cores: its threads (the pool's, started below) stay on them.
      TPC_ASSIGN_OR_RETURN(const std::vector<int> share,
                           rt::CpuShare(s.cpus, world.local_rank, world.local_size));
      TPC_RETURN_IF_ERROR(rt::PinToCpus(share));
      if (s.threads == 0) threads_here = static_cast<int>(share.size());
    }
    TPC_ASSIGN_OR_RETURN(backend, rt::MakeBackend({.name = s.backend,
                                                   .threads = threads_here,
                                                   .device = world.local_rank % gpus,
                                                   .device_collectives = use_nccl,
                                                   .memory_limit = s.gpu_memory}));
    if (!args.has("no-fuse")) rt::FuseGraph(*graph, *backend);
    rt::ExecutorOptions ex_options;
    ex_options.profile = args.has("profile");
    ex_options.capture = args.has("cuda-graph");
    // The communicator comes after the agreement (set_communicator).
    TPC_ASSIGN_OR_RETURN(executor, rt::Executor::Create(*graph, *backend, nullptr, ex_options));
    if (s.generate > 0) {
      // The prompt is the input (digested below like any input).
      TPC_RETURN_IF_ERROR(CheckGeneratable(*manifest));
      TPC_ASSIGN_OR_RETURN(prompt, Prompt(args));
      full["prompt"] = prompt;
      return rt::FindDecoderIo(executor->inputs(), executor->outputs()).status();
    }
    const auto specs = rt::FullSpecs(executor->inputs(), io.inputs, world.size);
    out_specs = rt::FullSpecs(executor->outputs(), io.outputs, world.size);
    TPC_ASSIGN_OR_RETURN(full, FullInputs(args, specs, quiet));
    TPC_ASSIGN_OR_RETURN(mine, rt::InputsForRank(full, io, rank));
    return executor->CheckInputs(mine).status();
  }();
  // Every rank read or drew the full inputs itself: they must be the same everywhere
  // (the same --dim, --seed and files), or the ranks would compute on different data.
  // So must the flags that shape the run: a rank repeating fewer times, generating fewer
  // tokens or connecting otherwise would leave the others waiting, then blame it.
  const std::string digest =
      ready.ok() ? absl::StrCat(tpc::tp_run::kFlagsLine, "\t--repeat ", s.repeat, " --generate ",
                                s.generate, " --transport ", args.get("transport", "auto"), "\t\n",
                                InputsDigest(full))
                 : "";
  full.clear();  // each rank keeps only its part
  // This rank stops because rank `origin` failed.
  auto stopped = [&](int origin, const absl::Status& why) {
    session.Stopped(origin);
    if (!session_options.quiet_when_stopped)
      std::fprintf(stderr, "tp-run: rank %d: stopped: %s\n", rank,
                   std::string(why.message()).c_str());
    return rt::kExitPeerFailed;
  };
  // A collective or the store failed: stopped by a peer, or this rank's own failure.
  auto failed = [&](const absl::Status& st) {
    if (st.code() == absl::StatusCode::kInvalidArgument) {
      // Bad input, first-hand (a kernel's: an id out of the vocabulary; collectives fail
      // otherwise): it fails every rank alike and at once, and under tp-run's launcher the
      // first to report it speaks for all (as with threads). Exit 2, as with threads.
      if (session.Fail(st) || !session_options.quiet_when_stopped) fail(st, 0);
      return 2;
    }
    rt::FailureVerdict v = session.Judge(st);
    if (v.stopped_by_peer) return stopped(v.origin, v.status);
    session.Fail(v.status);
    return fail(v.status, 1);
  };
  if (absl::Status posted = session.Post("inputs", digest); !posted.ok()) return failed(posted);
  int first_bad = -1;
  absl::Status agreed = session.Agree("ready", ready, &first_bad);
  if (!ready.ok()) {
    // The same bad input fails every rank alike: under tp-run's launcher, whose ranks
    // share a terminal, the first of them speaks for all.
    session.Fail(ready);
    if (first_bad == rank || !session_options.quiet_when_stopped) fail(ready, 0);
    return tpc::cli::ExitCodeFor(ready);
  }
  if (!agreed.ok()) {
    if (first_bad >= 0) return stopped(first_bad, agreed);
    // No rank failed: some did not get there in time (named).
    session.Fail(agreed);
    if (lead || !session_options.quiet_when_stopped) fail(agreed, 0);
    return 1;
  }
  {
    auto digests = session.Gather("inputs");
    if (!digests.ok()) return failed(digests.status());
    for (int r = 1; r < world.size; ++r) {
      const std::string diff =
          DigestDifference((*digests)[0], (*digests)[static_cast<size_t>(r)], r);
      if (diff.empty()) continue;
      // Every rank finds the same first difference: rank r speaks for all.
      const absl::Status bad = absl::InvalidArgumentError(
          absl::StrCat("rank ", r, "'s inputs or flags differ from rank 0's: ", diff,
                       " (every rank must be given the same inputs, --dim, --seed, --repeat, "
                       "--generate and --transport)"));
      session.Stopped(r);
      if (r == rank || !session_options.quiet_when_stopped) fail(bad, 0);
      return 2;
    }
  }
  // Shared memory or Gloo for the host-side steps (outputs assembled on rank 0) and the
  // CPU plan's collectives; NCCL, on GPUs, for the plan's collectives.
  auto comm = session.ConnectCpuCommunicator();
  if (!comm.ok()) return failed(comm.status());
  std::unique_ptr<rt::Communicator> device_comm;
  if (use_nccl) {
    auto connected =
        rt::ConnectDeviceCommunicator(session.store(), rank, world.size, *backend, s.timeout);
    if (!connected.ok()) return failed(connected.status());
    device_comm = std::move(*connected);
  }
  // The executor (and the CUDA graphs it recorded) goes before the communicators: NCCL
  // cannot finalize a communicator while a graph holding its collectives lives.
  absl::Cleanup drop_executor = [&executor] { executor.reset(); };
  executor->set_communicator(device_comm ? device_comm.get() : comm->get());
  const double load_s = Seconds(t_load);

  auto run_once = [&]() -> absl::StatusOr<std::vector<rt::Tensor>> {
    TPC_ASSIGN_OR_RETURN(auto out, executor->Run(mine));
    for (size_t k = 0; k < out.size(); ++k) {
      const std::string& name = executor->outputs()[k].name;
      TPC_ASSIGN_OR_RETURN(
          out[k], rt::AssembleOutput(name, out[k], rt::PlacementOf(io.outputs, name), **comm));
    }
    return out;
  };
  const auto t_first = Clock::now();
  absl::StatusOr<std::vector<rt::Tensor>> outputs = std::vector<rt::Tensor>{};
  absl::StatusOr<rt::GenerateResult> generated = rt::GenerateResult{};
  if (s.generate > 0) {
    generated = GenerateOnRank(*executor, comm->get(), io, rank, world.size, prompt, s.generate);
    if (!generated.ok()) outputs = generated.status();
  } else {
    outputs = run_once();
  }
  const double first_s = Seconds(t_first);
  std::vector<double> times, compute;
  for (int64_t i = 0; outputs.ok() && i < s.repeat; ++i) {
    const auto t = Clock::now();
    absl::StatusOr<std::vector<rt::Tensor>> again = run_once();
    times.push_back(Seconds(t));
    compute.push_back(executor->last_stats().compute_seconds);
    // As with threads: the last run's outputs are compared (not a generation's ids).
    if (!again.ok() || s.generate == 0) outputs = std::move(again);
  }
  if (!outputs.ok()) {
    // A failed run may leave collectives queued that the peers never join: the NCCL
    // communicator is aborted now, not drained for --timeout when it goes.
    if (device_comm) device_comm->Abort(outputs.status());
    return failed(outputs.status());
  }
  // Rank 0 reports every rank's memory, then waits for every rank to be done, so that its
  // store outlives their use of it. The outputs are complete here: a rank that fails now
  // (it can only be lost) does not cost them, but the exit status says so.
  int code = 0;
  if (absl::Status posted = session.Post("stats", StatsLine(executor->last_stats()));
      !posted.ok()) {
    return failed(posted);
  }
  std::vector<std::string> stats;
  if (lead) {
    auto gathered = session.Gather("stats");
    if (gathered.ok()) {
      stats = std::move(*gathered);
    } else {
      fail(gathered.status(), 0);
      code = 1;
    }
  }
  if (absl::Status done = session.Finish(); !done.ok()) {
    if (!lead) return failed(done);
    fail(done, 0);
    code = 1;
  }
  if (!lead) return 0;
  if (!s.quiet) {
    const std::string host = session.cpu_transport() == "shm" ? "shared memory" : "Gloo";
    std::fprintf(stderr,
                 "tp-run: %s: %d rank(s) as processes (%s, collectives through %s); load %.3f s, "
                 "first run %.3f s (with memory planning)\n",
                 s.plan.c_str(), world.size, world.launcher.c_str(),
                 (use_nccl ? "NCCL, the host's steps through " + host : host).c_str(), load_s,
                 first_s);
    for (int r = 0; r < static_cast<int>(stats.size()); ++r) {
      long long arena = 0, total = 0, values = 0, unplanned = 0, rss = 0;
      std::sscanf(stats[static_cast<size_t>(r)].c_str(), "%lld %lld %lld %lld %lld", &arena, &total,
                  &values, &unplanned, &rss);
      std::fprintf(stderr,
                   "tp-run: rank %d: arena %s (without reuse %s), %lld planned values, unplanned "
                   "peak %s, peak resident %s\n",
                   r, MiB(arena).c_str(), MiB(total).c_str(), values, MiB(unplanned).c_str(),
                   MiB(rss).c_str());
    }
  }
  if (s.repeat > 0) PrintTimes(args, times, compute, load_s, first_s, executor->last_stats());
  if (s.generate > 0) {
    TPC_ASSIGN_OR_RETURN(const int reported,
                         ReportGeneration(args, Check(s), world.size, prompt, *generated));
    return reported != 0 ? reported : code;
  }
  TPC_ASSIGN_OR_RETURN(const int concluded, Conclude(args, s, world.size, out_specs, *outputs, {}));
  return concluded != 0 ? concluded : code;
}

// tp-run's own launcher: one worker process per rank, this executable again.
absl::StatusOr<int> Launch(const Settings& s, int argc, char** argv) {
  TPC_ASSIGN_OR_RETURN(const tpc::proto::Plan manifest, tpc::plan::ReadManifest(s.plan));
  rt::LaunchOptions options;
  options.ranks = manifest.ranks_size();
  for (int i = 0; i < argc; ++i) options.args.push_back(argv[i]);
  return rt::LaunchWorkers(options);
}

absl::StatusOr<int> Run(const tpc::cli::Args& args, int argc, char** argv) {
  if (args.has("list-kernels")) {
    for (const std::string& line : rt::KernelListing()) std::printf("%s\n", line.c_str());
    return 0;
  }
  TPC_ASSIGN_OR_RETURN(const Settings s, ReadSettings(args));
  const bool threads = args.get("ranks", "processes") == "threads";
  TPC_ASSIGN_OR_RETURN(auto world,
                       rt::WorldFromEnvironment([](const char* n) { return std::getenv(n); },
                                                args.get("master", "")));
  // Once per run: here, or on rank 0 of a cluster launcher's ranks (which checks the
  // outputs' paths in RunRank, where its failure stops the other ranks at once).
  if (!world || (world->launcher != "tp-run" && world->rank == 0) || threads) {
    if (!world || threads) TPC_RETURN_IF_ERROR(CheckBeforeRun(args, s.plan));
    if (s.backend == "cpu" && !s.quiet) {
      if (const std::optional<std::string> advice = rt::BlasCoreAdvice())
        std::fprintf(stderr, "tp-run: note: %s\n", advice->c_str());
    }
  }
  if (world && !threads) return RunRank(args, s, *world);
  if (threads) return RunThreads(args, s);
  TPC_ASSIGN_OR_RETURN(const tpc::proto::Plan manifest, tpc::plan::ReadManifest(s.plan));
  if (manifest.ranks_size() == 1) return RunThreads(args, s);
  return Launch(s, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  tpc::cli::Parser parser = MakeParser();
  auto args = parser.Parse(argc, argv);
  if (auto done = tpc::cli::Prologue(parser, args, tpc::plan::Version())) return *done;
  // The last boundary: an exception no stage caught is an error, never an abort.
  auto code = tpc::CatchExceptions("tp-run", [&] { return Run(*args, argc, argv); });
  if (!code.ok()) {
    std::fprintf(stderr, "tp-run: error: %s\n", std::string(code.status().message()).c_str());
    return tpc::cli::ExitCodeFor(code.status());
  }
  return *code;
}
