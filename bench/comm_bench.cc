// Collective bandwidth of tpc's CPU communicators at the message sizes of a tensor-parallel
// GPT-2-small (hidden 768, seq 128, batch 1, vocabulary 8192): AllReduce (sum, f32) and
// AllGather for groups of N ranks, each rank a thread of this process. Four things are
// timed in the same run, interleaved (every round times each of them once per case, in an
// order that rotates from round to round):
//
//   - gloo: the Gloo communicator over 127.0.0.1 (tp-run's processes across machines, or
//     with --transport gloo). One TcpStoreServer on an ephemeral port; every rank thread
//     connects its own TcpStore client and calls ConnectGloo with address 127.0.0.1 and
//     one key prefix per group;
//   - shm: the shared-memory communicator (tp-run's processes on one machine), connected
//     the same way through ConnectShm; each rank maps the segment itself;
//   - in-process: MakeInProcessGroup (tp-run --ranks threads uses it);
//   - memcpy: the floor. Every rank thread copies, at the same time as the others, the
//     bytes the bus-bandwidth convention counts for one op (below) between two buffers
//     of its own: (N-1)/N of the gathered bytes for AllGather, 2(N-1)/N of the message
//     for AllReduce.
//
// Sizes: 4 KiB (small), 384 KiB (the all-reduce after every attention and MLP block:
// 128 x 768 f32), 4 MiB (the logits all-gather: 128 x 8192 f32 gathered, 4 MiB / N per
// rank) and 16 MiB (large). For AllReduce the size is each rank's message; for AllGather it
// is the gathered output (each rank contributes size / N).
//
// One measurement: N fresh threads, one untimed op each (warm-up, first touch), a barrier,
// then K ops; time per op = (last thread's end - first thread's start) / K. K is chosen
// once per case and thing (before the rounds) so that a measurement takes about
// --target-ms. Figures are medians over --rounds rounds. Bus bandwidth is NCCL's
// convention: AllReduce 2(N-1)/N * bytes / t, AllGather (N-1)/N * gathered bytes / t.
// The results of the first round are checked (exact sums of small integers).
//
//   build/bench/bench_comm [--ranks=2,4] [--rounds=7] [--target-ms=50]
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tpc/runtime/communicator.h"
#include "tpc/runtime/gloo_communicator.h"
#include "tpc/runtime/inprocess_communicator.h"
#include "tpc/runtime/shm_communicator.h"
#include "tpc/runtime/tcp_store.h"

namespace {

namespace rt = tpc::runtime;
using Clock = std::chrono::steady_clock;

enum class Op { kAllReduce, kAllGather };
enum class Impl { kGloo, kShm, kInProcess, kMemcpy };
constexpr Impl kImpls[] = {Impl::kGloo, Impl::kShm, Impl::kInProcess, Impl::kMemcpy};
constexpr int kNumImpls = 4;
const char* ImplName(Impl impl) {
  switch (impl) {
    case Impl::kGloo:
      return "gloo";
    case Impl::kShm:
      return "shm";
    case Impl::kInProcess:
      return "in-process";
    default:
      return "memcpy";
  }
}

const char* OpName(Op op) { return op == Op::kAllReduce ? "AllReduce" : "AllGather"; }

struct Case {
  Op op;
  int n;
  int64_t bytes;  // AllReduce: each rank's message; AllGather: the gathered output
  const char* what;

  // The bytes the bus bandwidth counts for one op (and the memcpy floor copies per rank).
  int64_t BusBytes() const {
    return op == Op::kAllReduce ? 2 * (n - 1) * bytes / n : (n - 1) * bytes / n;
  }
  std::string Size() const {
    return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB"
                              : std::to_string(bytes >> 10) + " KiB";
  }
};

// Every rank's buffers for one case, allocated once and kept for every round.
struct Buffers {
  std::vector<std::vector<float>> in, out;
  std::vector<std::vector<uint8_t>> src, dst;  // memcpy's

  explicit Buffers(const Case& c) {
    const size_t elems = static_cast<size_t>(c.bytes / 4);
    const size_t in_elems = c.op == Op::kAllReduce ? elems : elems / static_cast<size_t>(c.n);
    for (int r = 0; r < c.n; ++r) {
      std::vector<float> v(in_elems);
      // Small integers: every sum is exact, in any order.
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>(r + 1 + static_cast<int>(i % 8));
      in.push_back(std::move(v));
      out.emplace_back(elems, 0.0f);
      src.emplace_back(static_cast<size_t>(c.BusBytes()), static_cast<uint8_t>(r));
      dst.emplace_back(static_cast<size_t>(c.BusBytes()), 0);
    }
  }
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "bench_comm: %s\n", message.c_str());
  std::exit(1);
}

// Every rank's output of the last op is what the collective must give.
void CheckResult(const Case& c, const Buffers& b, const char* impl) {
  const size_t elems = static_cast<size_t>(c.bytes / 4);
  const size_t block = elems / static_cast<size_t>(c.n);
  for (int r = 0; r < c.n; ++r) {
    const std::vector<float>& out = b.out[static_cast<size_t>(r)];
    for (size_t i = 0; i < elems; ++i) {
      float want = 0;
      if (c.op == Op::kAllReduce) {
        want = static_cast<float>(c.n * (c.n + 1) / 2 + c.n * static_cast<int>(i % 8));
      } else {
        want = b.in[i / block][i % block];
      }
      if (out[i] != want) {
        Die(std::string(impl) + " " + OpName(c.op) + " " + c.Size() + " N=" + std::to_string(c.n) +
            ": rank " + std::to_string(r) + " element " + std::to_string(i) + " is " +
            std::to_string(out[i]) + ", expected " + std::to_string(want));
      }
    }
  }
}

// Seconds per op over `iters` ops of `impl` (comms: the group's communicators, unused for
// memcpy).
double Measure(Impl impl, const std::vector<rt::Communicator*>& comms, const Case& c, Buffers& b,
               int iters) {
  const int n = c.n;
  std::barrier sync(n);
  std::vector<Clock::time_point> start(static_cast<size_t>(n)), end(static_cast<size_t>(n));
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const size_t i = static_cast<size_t>(r);
      float* in = b.in[i].data();
      float* out = b.out[i].data();
      const int64_t count = static_cast<int64_t>(b.in[i].size());
      auto once = [&]() -> absl::Status {
        if (impl == Impl::kMemcpy) {
          std::memcpy(b.dst[i].data(), b.src[i].data(), b.src[i].size());
          return absl::OkStatus();
        }
        if (c.op == Op::kAllReduce) {
          return comms[i]->AllReduce(in, out, count, tpc::ir::DType::kF32, rt::ReduceOp::kSum);
        }
        return comms[i]->AllGather(in, out, count, tpc::ir::DType::kF32);
      };
      absl::Status s = once();
      sync.arrive_and_wait();
      start[i] = Clock::now();
      for (int k = 0; k < iters && s.ok(); ++k) s = once();
      end[i] = Clock::now();
      status[i] = s;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) Die(s.ToString());
  }
  const auto first = *std::min_element(start.begin(), start.end());
  const auto last = *std::max_element(end.begin(), end.end());
  return std::chrono::duration<double>(last - first).count() / iters;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  char line[128] = {};
  if (std::fgets(line, sizeof(line), f) == nullptr) line[0] = '\0';
  std::fclose(f);
  std::string s(line);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A Gloo or shared-memory group of N rank threads; the stores outlive the communicators.
struct StoreGroup {
  std::vector<std::unique_ptr<rt::TcpStore>> stores;
  std::vector<std::unique_ptr<rt::Communicator>> comms;
};

StoreGroup ConnectStoreGroup(int port, int n, Impl impl) {
  StoreGroup g;
  g.stores.resize(static_cast<size_t>(n));
  g.comms.resize(static_cast<size_t>(n));
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const size_t i = static_cast<size_t>(r);
      auto store = rt::TcpStore::Connect("127.0.0.1", port, std::chrono::seconds(30));
      if (!store.ok()) {
        status[i] = store.status();
        return;
      }
      g.stores[i] = std::move(*store);
      const std::string prefix = std::string("bench_comm/") + ImplName(impl) + std::to_string(n);
      absl::StatusOr<std::unique_ptr<rt::Communicator>> comm;
      if (impl == Impl::kGloo) {
        rt::GlooOptions options;
        options.address = "127.0.0.1";
        options.timeout = std::chrono::seconds(60);
        options.key_prefix = prefix;
        comm = rt::ConnectGloo(*g.stores[i], r, n, options);
      } else {
        rt::ShmOptions options;
        options.timeout = std::chrono::seconds(60);
        options.key_prefix = prefix;
        comm = rt::ConnectShm(*g.stores[i], r, n, options);
      }
      if (!comm.ok()) {
        status[i] = comm.status();
        return;
      }
      g.comms[i] = std::move(*comm);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) Die(s.ToString());
  }
  return g;
}

std::vector<rt::Communicator*> Pointers(const std::vector<std::unique_ptr<rt::Communicator>>& v) {
  std::vector<rt::Communicator*> out;
  for (const auto& c : v) out.push_back(c.get());
  return out;
}

int Flag(const std::string& arg, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return fallback;
  int v = 0;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), &v) || v < 1) Die("bad flag " + arg);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ranks = {2, 4};
  int rounds = 7, target_ms = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--ranks=", 0) == 0) {
      ranks.clear();
      for (absl::string_view s : absl::StrSplit(arg.substr(8), ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(s, &v) || v < 2) Die("bad flag " + arg + " (ranks >= 2)");
        ranks.push_back(v);
      }
    } else if (arg.rfind("--rounds=", 0) == 0) {
      rounds = Flag(arg, "rounds", rounds);
    } else if (arg.rfind("--target-ms=", 0) == 0) {
      target_ms = Flag(arg, "target-ms", target_ms);
    } else {
      Die("unknown argument " + arg +
          " (flags: --ranks=2,4 --rounds=7 --target-ms=50; see the header of bench/comm_bench.cc)");
    }
  }
  const std::string load_before = LoadAverage();

  auto server = rt::TcpStoreServer::Listen("127.0.0.1", 0);
  if (!server.ok()) Die(server.status().ToString());
  std::vector<StoreGroup> gloo, shm;
  std::vector<std::vector<std::unique_ptr<rt::Communicator>>> inproc;
  for (int n : ranks) {
    gloo.push_back(ConnectStoreGroup((*server)->port(), n, Impl::kGloo));
    shm.push_back(ConnectStoreGroup((*server)->port(), n, Impl::kShm));
    inproc.push_back(rt::MakeInProcessGroup(n));
  }

  std::vector<Case> cases;
  for (size_t g = 0; g < ranks.size(); ++g) {
    const int n = ranks[g];
    for (Op op : {Op::kAllReduce, Op::kAllGather}) {
      cases.push_back({op, n, 4 << 10, "small"});
      cases.push_back({op, n, 384 << 10,
                       op == Op::kAllReduce ? "GPT-2 block all-reduce 128x768" : "(128x768)"});
      cases.push_back({op, n, 4 << 20,
                       op == Op::kAllGather ? "GPT-2 logits all-gather 128x8192" : "(128x8192)"});
      cases.push_back({op, n, 16 << 20, "large"});
    }
  }
  auto group_of = [&](const Case& c) {
    return static_cast<size_t>(std::find(ranks.begin(), ranks.end(), c.n) - ranks.begin());
  };
  std::vector<std::unique_ptr<Buffers>> buffers;
  for (const Case& c : cases) buffers.push_back(std::make_unique<Buffers>(c));
  auto comms_for = [&](size_t k, Impl impl) {
    const size_t g = group_of(cases[k]);
    if (impl == Impl::kGloo) return Pointers(gloo[g].comms);
    if (impl == Impl::kShm) return Pointers(shm[g].comms);
    return Pointers(inproc[g]);
  };

  // Iterations per measurement: doubled until a measurement takes a quarter of the target.
  const double target = target_ms * 1e-3;
  std::vector<std::vector<int>> iters(cases.size(), std::vector<int>(kNumImpls, 1));
  for (size_t k = 0; k < cases.size(); ++k) {
    for (int m = 0; m < kNumImpls; ++m) {
      const auto comms = comms_for(k, kImpls[m]);
      Measure(kImpls[m], comms, cases[k], *buffers[k], 2);  // untimed: the first ops are slow
      int it = 2;
      double t = Measure(kImpls[m], comms, cases[k], *buffers[k], it);
      while (t * it < target / 4 && it < (1 << 20)) {
        it *= 2;
        t = Measure(kImpls[m], comms, cases[k], *buffers[k], it);
      }
      iters[k][static_cast<size_t>(m)] = std::max(3, static_cast<int>(target / t));
    }
  }

  std::vector<std::vector<std::vector<double>>> times(cases.size(),
                                                      std::vector<std::vector<double>>(kNumImpls));
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < cases.size(); ++k) {
      for (int j = 0; j < kNumImpls; ++j) {
        const int m = (j + round) % kNumImpls;
        const Impl impl = kImpls[m];
        Buffers& b = *buffers[k];
        for (auto& o : b.out) std::fill(o.begin(), o.end(), -1.0f);
        times[k][static_cast<size_t>(m)].push_back(
            Measure(impl, comms_for(k, impl), cases[k], b, iters[k][static_cast<size_t>(m)]));
        if (round == 0 && impl != Impl::kMemcpy) {
          CheckResult(cases[k], b, ImplName(impl));
        }
      }
    }
  }
  const std::string load_after = LoadAverage();

  std::printf(
      "bench_comm: %u hardware threads; ranks are threads of this process; medians of "
      "%d interleaved rounds, ~%d ms per measurement\n",
      std::thread::hardware_concurrency(), rounds, target_ms);
  std::printf("loadavg before: %s\nloadavg after:  %s\n\n", load_before.c_str(),
              load_after.c_str());
  std::printf(
      "| op | N | size | what | gloo us | shm us | in-process us | memcpy us | gloo busbw GB/s | "
      "shm busbw GB/s | in-process busbw GB/s | memcpy busbw GB/s | gloo/shm | shm/in-process | "
      "shm/memcpy | shm range |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    double med[kNumImpls];
    for (int m = 0; m < kNumImpls; ++m) med[m] = Median(times[k][static_cast<size_t>(m)]);
    const auto& g = times[k][1];
    const double lo = *std::min_element(g.begin(), g.end());
    const double hi = *std::max_element(g.begin(), g.end());
    const double bus = static_cast<double>(c.BusBytes());
    std::printf(
        "| %s | %d | %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f | "
        "%.2f | %.1f | %.0f-%.0f |\n",
        OpName(c.op), c.n, c.Size().c_str(), c.what, med[0] * 1e6, med[1] * 1e6, med[2] * 1e6,
        med[3] * 1e6, bus / med[0] * 1e-9, bus / med[1] * 1e-9, bus / med[2] * 1e-9,
        bus / med[3] * 1e-9, med[0] / med[1], med[1] / med[2], med[1] / med[3], lo * 1e6, hi * 1e6);
  }
  std::printf("\niterations per measurement (gloo / shm / in-process / memcpy):");
  for (size_t k = 0; k < cases.size(); ++k) {
    std::printf("%s %s N=%d %s: %d/%d/%d/%d", k == 0 ? "" : ";", OpName(cases[k].op), cases[k].n,
                cases[k].Size().c_str(), iters[k][0], iters[k][1], iters[k][2], iters[k][3]);
  }
  std::printf("\n");
  return 0;
}
