// tp-run's timing report (tp_run_report.h).
#include "tp_run_report.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

}  // namespace tpc::tp_run
