#include "tpc/runtime/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/runtime/kv_store.h"
#include "tpc/runtime/tcp_store.h"
#include "tpc/runtime/world.h"
#include "tpc/util/status_macros.h"

extern char** environ;

namespace tpc::runtime {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_signal{0};

// After a rank failed, how long the others may take to stop: they learn within a tenth of
// a second through the store (a rank hung in a kernel or stopped does not).
constexpr std::chrono::seconds kStopGrace{3};

void OnSignal(int sig) { g_signal.store(sig); }

// The environment of worker `rank`: this process's, without any launcher variables a
// worker would mistake for its own, plus TPC_RANK / TPC_WORLD_SIZE / TPC_MASTER.
std::vector<std::string> WorkerEnvironment(int rank, int ranks, const std::string& master) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("TPC_RANK=", 0) == 0 || kv.rfind("TPC_WORLD_SIZE=", 0) == 0 ||
        kv.rfind("TPC_MASTER=", 0) == 0) {
      continue;
    }
    env.push_back(kv);
  }
  env.push_back(absl::StrCat(kEnvRank, "=", rank));
  env.push_back(absl::StrCat(kEnvWorldSize, "=", ranks));
  env.push_back(absl::StrCat(kEnvMaster, "=", master));
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

struct Worker {
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid's
};

std::string Describe(int rank, const Worker& w) {
  if (WIFSIGNALED(w.status)) {
    const int sig = WTERMSIG(w.status);
    return absl::StrCat("rank ", rank, " (pid ", w.pid, ") was killed by signal ", sig, " (",
                        strsignal(sig), ")");
  }
  return absl::StrCat("rank ", rank, " (pid ", w.pid, ") exited with status ",
                      WEXITSTATUS(w.status));
}

}  // namespace

absl::StatusOr<int> LaunchWorkers(const LaunchOptions& options) {
  const int n = options.ranks;
  TPC_ASSIGN_OR_RETURN(auto server, TcpStoreServer::Listen("127.0.0.1", 0));
  const std::string master = absl::StrCat("127.0.0.1:", server->port());
  TPC_ASSIGN_OR_RETURN(auto store,
                       TcpStore::Connect("127.0.0.1", server->port(), std::chrono::seconds(10)));

  // Everything a child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = options.args;
  std::vector<char*> argv = Pointers(args);
  std::vector<std::vector<std::string>> envs;
  std::vector<std::vector<char*>> envps;
  for (int r = 0; r < n; ++r) envs.push_back(WorkerEnvironment(r, n, master));
  for (int r = 0; r < n; ++r) envps.push_back(Pointers(envs[static_cast<size_t>(r)]));

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{}, old_hup{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);

  const pid_t launcher = getpid();
  std::vector<Worker> workers(static_cast<size_t>(n));
  pid_t group = 0;
  absl::Status spawn_error;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      spawn_error = absl::ResourceExhaustedError(
          absl::StrCat("cannot start rank ", r, ": fork: ", std::strerror(errno)));
      break;
    }
    if (pid == 0) {
      setpgid(0, group);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(kExitPeerFailed);  // the launcher died meanwhile
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      execve("/proc/self/exe", argv.data(), envps[static_cast<size_t>(r)].data());
      const char msg[] = "tp-run: error: cannot exec /proc/self/exe for a worker\n";
      ssize_t ignored = write(2, msg, sizeof(msg) - 1);
      (void)ignored;
      _exit(1);
    }
    if (group == 0) group = pid;
    setpgid(pid, group);  // also here: whichever of parent and child runs first
    workers[static_cast<size_t>(r)] = {pid, true, 0};
  }

  int running = 0;
  for (const Worker& w : workers) running += w.running ? 1 : 0;
  int exit_code = 0;
  int first_failed = -1;
  std::string first_reason;
  Clock::time_point deadline = Clock::time_point::max();
  bool killed = false;
  bool interrupted = false;
  if (!spawn_error.ok()) {
    std::fprintf(stderr, "tp-run: error: %s\n", std::string(spawn_error.message()).c_str());
    exit_code = 1;
    if (group != 0) kill(-group, SIGKILL);
    killed = true;
  }
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; ++r) {
        Worker& w = workers[static_cast<size_t>(r)];
        if (w.pid != pid || !w.running) continue;
        w.running = false;
        w.status = status;
        --running;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        const bool peer = WIFEXITED(status) && WEXITSTATUS(status) == kExitPeerFailed;
        if (ok || killed || interrupted) break;
        if (first_failed < 0 && !peer) {
          first_failed = r;
          first_reason = Describe(r, w);
          exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
          if (WIFSIGNALED(status)) {
            // The worker could not say why it stopped: say it for it, and tell the others.
            std::fprintf(stderr, "tp-run: error: %s\n", first_reason.c_str());
            (void)store->Set(kAbortKey, EncodeRankStatus(-1, absl::AbortedError(first_reason)));
          }
        }
        if (deadline == Clock::time_point::max()) deadline = Clock::now() + kStopGrace;
        break;
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;  // no children left
    if (g_signal.load() != 0 && !interrupted) {
      interrupted = true;
      std::fprintf(stderr, "tp-run: interrupted (%s); stopping the %d rank(s)\n",
                   strsignal(g_signal.load()), running);
      kill(-group, SIGTERM);
      exit_code = 130;
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    }
    if (!killed && Clock::now() > deadline) {
      std::vector<int> late;
      for (int r = 0; r < n; ++r)
        if (workers[static_cast<size_t>(r)].running) late.push_back(r);
      std::fprintf(stderr, "tp-run: error: rank(s) %s did not stop %s; killed\n",
                   absl::StrJoin(late, ", ").c_str(),
                   interrupted ? "after the interrupt"
                               : absl::StrCat("within ", kStopGrace.count(), " s after rank ",
                                              first_failed, " failed")
                                     .c_str());
      kill(-group, SIGKILL);
      killed = true;
      if (exit_code == 0) exit_code = 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Nothing of the group survives, whatever happened.
  if (group != 0) kill(-group, SIGKILL);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  if (exit_code == 0 && first_failed < 0) {
    // Only ranks stopped by a peer: a peer the launcher did not see fail (should not be).
    for (const Worker& w : workers) {
      if (!(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0)) exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace tpc::runtime
