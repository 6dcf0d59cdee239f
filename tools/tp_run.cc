// tp-run: runs a plan (DIR/rank{i}.onnx), every rank as a thread with the in-process
// communicator, on given or random inputs; writes the outputs, compares them with the
// unsharded original (--check-against) and times repeated runs (--repeat).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/compare.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/tensor_io.h"
#include "tpc/util/checked_math.h"
#include "tpc/util/cli.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/status_macros.h"

namespace {

namespace fs = std::filesystem;
namespace rt = tpc::runtime;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

tpc::cli::Parser MakeParser() {
  tpc::cli::Parser p(
      "tp-run", "DIR [options]",
      "Runs the plan in DIR (rank0.onnx, rank1.onnx, ...): every rank as a thread of this\n"
      "process with the in-process communicator. Every rank's files are first checked against\n"
      "DIR/plan.json (sizes and SHA-256; --no-verify skips the hashes). Inputs come from\n"
      "--input/--input-dir, or are random (floats in [-1, 1), integers in [0, 32), inputs\n"
      "named *mask* all ones; seed --seed); symbolic dims of random inputs come from --dim\n"
      "(defaults: batch=1, seq=16).\n"
      "Exit status: 0 success, 1 --check-against above tolerance or an internal failure,\n"
      "2 bad usage or bad input.");
  p.Add({"backend", "NAME", "cpu (cuda: not built yet)", "cpu", false});
  p.Add({"input", "NAME=FILE", "an input from a TensorProto .pb or a .npy file", "", true});
  p.Add(
      {"input-dir", "DIR", "inputs DIR/input_K.pb or .npy (the ONNX test-data layout)", "", false});
  p.Add({"dim", "NAME=VALUE", "binds a symbolic dim for random inputs", "", true});
  p.Add({"output-dir", "OUT", "write OUT/output_K.pb and OUT/output_K.npy", "", false});
  p.Add({"check-against", "MODEL.onnx", "also run MODEL unsharded and compare the outputs", "",
         false});
  p.Add({"rtol", "R", "relative tolerance of --check-against", "1e-4", false});
  p.Add({"atol", "A", "absolute tolerance of --check-against", "1e-5", false});
  p.Add({"repeat", "K", "time K runs; print throughput and per-stage times", "0", false});
  p.Add({"threads", "N", "threads in total (env TPC_NUM_THREADS; default all cores)", "", false});
  p.Add({"seed", "S", "seed of random inputs", "0", false});
  p.Add({"profile", "", "with --repeat: time per operator type", "", false});
  p.Add({"quiet", "", "print only the comparison table and errors", "", false});
  p.Add({"no-verify", "", "skip the SHA-256 check of the plan's files (trusted plans)", "", false});
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
  for (const std::string& v : args.all("dim")) {
    TPC_ASSIGN_OR_RETURN(auto kv, SplitAssign("dim", v));
    int64_t value;
    if (!absl::SimpleAtoi(kv.second, &value) || value < 0 || value > tpc::kMaxTensorElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dim ", v, ": the value must be an integer from 0 to 2^48 (",
                       tpc::kMaxTensorElements, ")"));
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

absl::Status WriteOutputs(const std::string& dir, const std::vector<rt::IoSpec>& specs,
                          const std::vector<rt::Tensor>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create (", ec.message(), ")"));
  for (size_t k = 0; k < outputs.size(); ++k) {
    TPC_RETURN_IF_ERROR(rt::WriteTensorProtoFile(absl::StrCat(dir, "/output_", k, ".pb"),
                                                 outputs[k], specs[k].name));
    TPC_RETURN_IF_ERROR(rt::WriteNpyFile(absl::StrCat(dir, "/output_", k, ".npy"), outputs[k]));
  }
  return absl::OkStatus();
}

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.2f MiB", static_cast<double>(bytes) / 1048576.0);
}

absl::StatusOr<int> Run(const tpc::cli::Args& args) {
  if (args.positional().size() != 1)
    return absl::InvalidArgumentError("expected exactly one plan DIR (see --help)");
  const std::string backend = args.get("backend", "cpu");
  if (backend == "cuda")
    return absl::UnimplementedError(
        "--backend cuda: the CUDA backend is not built yet; use --backend cpu");
  if (backend != "cpu")
    return absl::InvalidArgumentError(
        absl::StrCat("--backend ", backend, ": expected cpu or cuda"));
  const bool quiet = args.has("quiet");
  double rtol = 0, atol = 0;
  int64_t repeat = 0, threads = 0;
  if (!absl::SimpleAtod(args.get("rtol", "1e-4"), &rtol) ||
      !absl::SimpleAtod(args.get("atol", "1e-5"), &atol)) {
    return absl::InvalidArgumentError("--rtol and --atol must be numbers");
  }
  if (!absl::SimpleAtoi(args.get("repeat", "0"), &repeat) || repeat < 0) {
    return absl::InvalidArgumentError("--repeat must be a non-negative integer");
  }
  if (args.has("threads") && (!absl::SimpleAtoi(args.get("threads"), &threads) || threads < 1)) {
    return absl::InvalidArgumentError("--threads must be a positive integer");
  }

  const auto t_load = Clock::now();
  rt::LoadPlanOptions load;
  load.verify_hashes = !args.has("no-verify");
  TPC_ASSIGN_OR_RETURN(auto graphs, rt::LoadPlan(args.positional()[0], load));
  std::vector<const tpc::ir::Graph*> ptrs;
  for (auto& g : graphs) ptrs.push_back(g.get());
  rt::PlanRunnerOptions options;
  options.threads = static_cast<int>(threads);
  options.executor.profile = args.has("profile");
  TPC_ASSIGN_OR_RETURN(auto runner, rt::PlanRunner::Create(ptrs, options));
  const double load_s = Seconds(t_load);
  const auto& specs = runner->executor(0).inputs();
  const auto& out_specs = runner->executor(0).outputs();

  TPC_ASSIGN_OR_RETURN(auto inputs, GivenInputs(args, specs));
  TPC_RETURN_IF_ERROR(FillRandomInputs(args, specs, inputs, quiet));

  const auto t_first = Clock::now();
  TPC_ASSIGN_OR_RETURN(auto outputs, runner->Run(inputs));
  const double first_s = Seconds(t_first);
  if (!quiet) {
    std::fprintf(stderr,
                 "tp-run: %s: %d rank(s); load %.3f s, first run %.3f s (with memory planning)\n",
                 args.positional()[0].c_str(), runner->num_ranks(), load_s, first_s);
    for (int r = 0; r < runner->num_ranks(); ++r) {
      const rt::RunStats& st = runner->executor(r).last_stats();
      std::fprintf(
          stderr,
          "tp-run: rank %d: arena %s (without reuse %s), %d planned values, unplanned peak %s\n", r,
          MiB(st.arena_bytes).c_str(), MiB(st.planned_total_bytes).c_str(), st.planned_values,
          MiB(st.unplanned_peak_bytes).c_str());
    }
  }
  if (args.has("output-dir")) {
    TPC_RETURN_IF_ERROR(WriteOutputs(args.get("output-dir"), out_specs, outputs[0]));
    if (!quiet)
      std::fprintf(stderr, "tp-run: wrote %zu output(s) to %s\n", outputs[0].size(),
                   args.get("output-dir").c_str());
  }

  if (repeat > 0) {
    std::vector<double> times;
    for (int64_t i = 0; i < repeat; ++i) {
      const auto t = Clock::now();
      TPC_RETURN_IF_ERROR(runner->Run(inputs).status());
      times.push_back(Seconds(t));
    }
    std::sort(times.begin(), times.end());
    double mean = 0;
    for (double t : times) mean += t;
    mean /= static_cast<double>(times.size());
    std::printf("tp-run: %lld runs: mean %.3f ms, median %.3f ms, min %.3f ms; %.2f runs/s\n",
                static_cast<long long>(repeat), mean * 1e3, times[times.size() / 2] * 1e3,
                times[0] * 1e3, 1.0 / mean);
    std::printf("tp-run: stages: load %.3f s, first run %.3f s, steady run %.3f ms\n", load_s,
                first_s, mean * 1e3);
    if (args.has("profile")) {
      std::vector<std::pair<double, std::string>> ops;
      for (const auto& [op, s] : runner->executor(0).last_stats().op_seconds)
        ops.emplace_back(s, op);
      std::sort(ops.rbegin(), ops.rend());
      for (const auto& [s, op] : ops) std::printf("  %-28s %9.3f ms\n", op.c_str(), s * 1e3);
    }
  }

  if (!args.has("check-against")) {
    if (!quiet) {
      for (size_t k = 0; k < outputs[0].size(); ++k) {
        std::printf("output %zu '%s': %s\n", k, out_specs[k].name.c_str(),
                    outputs[0][k].TypeString().c_str());
      }
    }
    return 0;
  }
  // The original model, unsharded, on the same inputs.
  const std::string model = args.get("check-against");
  TPC_ASSIGN_OR_RETURN(auto original, tpc::onnx::ImportModel(model));
  TPC_ASSIGN_OR_RETURN(auto reference_runner, rt::PlanRunner::Create({original.get()}, options));
  TPC_ASSIGN_OR_RETURN(auto reference, reference_runner->Run(inputs));
  const auto& ref_specs = reference_runner->executor(0).outputs();
  if (reference[0].size() != outputs[0].size()) {
    return absl::InvalidArgumentError(absl::StrCat(model, " has ", reference[0].size(),
                                                   " outputs, the plan ", outputs[0].size()));
  }
  std::printf("check against %s (%d rank(s) vs unsharded; rtol %g, atol %g)\n", model.c_str(),
              runner->num_ranks(), rtol, atol);
  std::printf("  %-24s %-18s %12s %12s  %s\n", "output", "type", "max abs err", "max rel err",
              "result");
  bool all = true;
  for (size_t k = 0; k < outputs[0].size(); ++k) {
    rt::Comparison c = rt::CompareTensors(outputs[0][k], reference[0][k], rtol, atol);
    // Every rank holds the whole output; they must agree too.
    for (int r = 1; r < runner->num_ranks(); ++r) {
      rt::Comparison cr =
          rt::CompareTensors(outputs[static_cast<size_t>(r)][k], reference[0][k], rtol, atol);
      if (!cr.pass) {
        c.pass = false;
        c.note = absl::StrCat("rank ", r, " differs");
      }
    }
    all = all && c.pass;
    std::printf("  %-24s %-18s %12.3e %12.3e  %s%s\n", ref_specs[k].name.c_str(),
                outputs[0][k].TypeString().c_str(), c.max_abs, c.max_rel, c.pass ? "PASS" : "FAIL",
                c.note.empty() ? "" : (" (" + c.note + ")").c_str());
  }
  std::printf("%s\n",
              all ? "PASS: every output within tolerance" : "FAIL: some output is above tolerance");
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  tpc::cli::Parser parser = MakeParser();
  auto args = parser.Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "tp-run: error: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (args->help()) {
    std::cout << parser.Usage();
    return 0;
  }
  // The last boundary: an exception no stage caught is an error, never an abort.
  auto code = tpc::CatchExceptions("tp-run", [&] { return Run(*args); });
  if (!code.ok()) {
    std::fprintf(stderr, "tp-run: error: %s\n", std::string(code.status().message()).c_str());
    return tpc::cli::ExitCodeFor(code.status());
  }
  return *code;
}
