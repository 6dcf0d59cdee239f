// tp-run's reports (tp_run_report.h).
#include "tp_run_report.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/plan/precision.h"
#include "tpc/runtime/compare.h"

namespace tpc::tp_run {

namespace rt = tpc::runtime;

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.2f MiB", static_cast<double>(bytes) / 1048576.0);
}

void PrintTimes(const tpc::cli::Args& args, std::vector<double> times, std::vector<double> compute,
                double load_s, double first_s, const rt::RunStats& stats) {
  std::sort(times.begin(), times.end());
  std::sort(compute.begin(), compute.end());
  double mean = 0;
  for (double t : times) mean += t;
  mean /= static_cast<double>(times.size());
  std::printf("tp-run: %zu runs: mean %.3f ms, median %.3f ms, min %.3f ms; %.2f runs/s\n",
              times.size(), mean * 1e3, times[times.size() / 2] * 1e3, times[0] * 1e3, 1.0 / mean);
  std::printf("tp-run: stages: load %.3f s, first run %.3f s, steady run %.3f ms\n", load_s,
              first_s, mean * 1e3);
  if (!compute.empty()) {
    std::printf("tp-run: compute on rank 0 (before outputs go to the host): median %.3f ms\n",
                compute[compute.size() / 2] * 1e3);
  }
  if (args.get("backend", "cpu") != "cpu") {
    std::printf(
        "tp-run: device memory: rank 0's blocks take %.1f MiB (weights, values, freed "
        "blocks kept for reuse; besides the CUDA context); obtained during its last run: "
        "%lld blocks\n",
        static_cast<double>(stats.device_bytes) / (1 << 20),
        static_cast<long long>(stats.device_allocations));
    std::string by_op;
    for (const auto& [op, n] : stats.host_waits_by_op) {
      absl::StrAppend(&by_op, by_op.empty() ? " (" : ", ", op, " ", n);
    }
    std::printf(
        "tp-run: waits for the device inside rank 0's last run (values a host kernel "
        "read): %d%s\n",
        stats.host_waits, by_op.empty() ? "" : (by_op + ")").c_str());
    if (args.has("cuda-graph")) {
      const char* work = stats.device_work == rt::RunStats::Device::kReplayed ? "replayed"
                         : stats.device_work == rt::RunStats::Device::kCaptured
                             ? "recorded and launched"
                             : "queued kernel by kernel";
      std::printf(
          "tp-run: rank 0's last run as a CUDA graph: %s%s%s\n", work,
          stats.capture_error.empty() ? "" : "; not recorded: ", stats.capture_error.c_str());
    }
  }
  if (args.has("profile")) {
    std::vector<std::pair<double, std::string>> ops;
    for (const auto& [op, s] : stats.op_seconds) ops.emplace_back(s, op);
    std::sort(ops.rbegin(), ops.rend());
    std::printf(
        "tp-run: time per operator type on rank 0, last run (calls, and the largest "
        "input or output of each call summed):\n");
    for (const auto& [s, op] : ops) {
      std::printf("  %-28s %9.3f ms %6lld calls %12s\n", op.c_str(), s * 1e3,
                  static_cast<long long>(stats.op_calls.at(op)),
                  MiB(stats.op_bytes.at(op)).c_str());
    }
  }
}

absl::StatusOr<Tolerance> ReadTolerance(const tpc::cli::Args& args, const std::string& plan_dir) {
  std::string dtype;
  if (auto manifest = tpc::plan::ReadManifest(plan_dir); manifest.ok()) {
    auto it = manifest->options().find("dtype");
    if (it != manifest->options().end()) dtype = it->second;
  }
  const tpc::plan::Tolerance documented = tpc::plan::DocumentedTolerance(dtype);
  Tolerance t{documented, ""};
  if ((args.has("rtol") && !absl::SimpleAtod(args.get("rtol"), &t.rtol)) ||
      (args.has("atol") && !absl::SimpleAtod(args.get("atol"), &t.atol))) {
    return absl::InvalidArgumentError("--rtol and --atol must be numbers");
  }
  t.by_output_type = dtype.empty() && !args.has("rtol") && !args.has("atol");
  if (dtype == "f16" || dtype == "bf16") {
    const bool r = args.has("rtol"), a = args.has("atol");
    const std::string plan = absl::StrCat(dtype == "f16" ? "an " : "a ", dtype, " plan");
    t.of = !r && !a ? "the defaults of " + plan
           : !a     ? "atol the default of " + plan
           : !r     ? "rtol the default of " + plan
                    : "";
  }
  return t;
}

Tolerance ForOutput(const Tolerance& t, tpc::ir::DType dtype) {
  if (!t.by_output_type || (dtype != tpc::ir::DType::kF16 && dtype != tpc::ir::DType::kBF16))
    return t;
  const std::string name = dtype == tpc::ir::DType::kF16 ? "f16" : "bf16";
  Tolerance half{tpc::plan::DocumentedTolerance(name), "the defaults of " + name + " outputs"};
  return half;
}

std::string ToleranceNote(const Tolerance& t) { return t.of.empty() ? "" : ", " + t.of; }

bool PrintComparison(const std::string& title, const std::vector<rt::IoSpec>& specs,
                     const std::vector<rt::Tensor>& outputs,
                     const std::vector<std::vector<rt::Tensor>>& others,
                     const std::vector<rt::Tensor>& expected, const Tolerance& t) {
  bool half = false;
  for (const rt::Tensor& o : outputs) {
    half = half || (t.by_output_type &&
                    (o.dtype() == tpc::ir::DType::kF16 || o.dtype() == tpc::ir::DType::kBF16));
  }
  const Tolerance h = ForOutput(t, tpc::ir::DType::kF16), b = ForOutput(t, tpc::ir::DType::kBF16);
  std::printf("%s rtol %g, atol %g%s%s\n", title.c_str(), t.rtol, t.atol, ToleranceNote(t).c_str(),
              half ? absl::StrFormat(" (f16 outputs rtol %g, atol %g; bf16 %g, %g)", h.rtol, h.atol,
                                     b.rtol, b.atol)
                         .c_str()
                   : "");
  std::printf("  %-24s %-18s %12s %12s  %s\n", "output", "type", "max abs err", "max rel err",
              "result");
  bool all = true;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tolerance tk = ForOutput(t, outputs[k].dtype());
    rt::Comparison c = rt::CompareTensors(outputs[k], expected[k], tk.rtol, tk.atol);
    for (size_t r = 0; r < others.size(); ++r) {
      rt::Comparison cr = rt::CompareTensors(others[r][k], expected[k], tk.rtol, tk.atol);
      if (!cr.pass) {
        c.pass = false;
        c.note = absl::StrCat("rank ", r + 1, " differs");
      }
    }
    all = all && c.pass;
    std::printf("  %-24s %-18s %12.3e %12.3e  %s%s\n", specs[k].name.c_str(),
                outputs[k].TypeString().c_str(), c.max_abs, c.max_rel, c.pass ? "PASS" : "FAIL",
                c.note.empty() ? "" : (" (" + c.note + ")").c_str());
  }
  std::printf("%s\n",
              all ? "PASS: every output within tolerance" : "FAIL: some output is above tolerance");
  return all;
}

}  // namespace tpc::tp_run
