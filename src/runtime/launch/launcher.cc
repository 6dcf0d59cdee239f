#include "tpc/runtime/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/runtime/kv_store.h"
#include "tpc/runtime/shm_communicator.h"
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
  // The executable by its real path, so that ps, pkill and the OOM killer's log say
  // tp-run, not "exe".
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    return absl::InternalError(
        absl::StrCat("cannot find this executable (/proc/self/exe): ", std::strerror(errno)));
  }
  self[len] = '\0';
  std::vector<std::string> args = options.args;
  std::vector<char*> argv = Pointers(args);
  std::vector<std::vector<std::string>> envs;
  std::vector<std::vector<char*>> envps;
  for (int r = 0; r < n; ++r) envs.push_back(WorkerEnvironment(r, n, master));
  for (int r = 0; r < n; ++r) envps.push_back(Pointers(envs[static_cast<size_t>(r)]));

  // Stop signals are caught (and forwarded to the workers), unless they were ignored
  // (nohup): then they stay ignored, here and in the workers. SIGCHLD must not be ignored,
  // or the kernel reaps the workers and their exit status is lost.
  constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old[3] = {};
  bool caught[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    sigaction(kStopSignals[i], nullptr, &old[i]);
    if (old[i].sa_handler != SIG_IGN) {
      sigaction(kStopSignals[i], &sa, nullptr);
      caught[i] = true;
    }
  }
  struct sigaction dfl {
  }, old_chld{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, &old_chld);
  auto restore_signals = [&] {
    for (int i = 0; i < 3; ++i)
      if (caught[i]) sigaction(kStopSignals[i], &old[i], nullptr);
    sigaction(SIGCHLD, &old_chld, nullptr);
  };

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
      for (int i = 0; i < 3; ++i)
        if (caught[i]) signal(kStopSignals[i], SIG_DFL);
      // The workers are a background group of the terminal: with `stty tostop` their
      // writes would stop them (SIGTTOU). Ignored, it lets them write.
      signal(SIGTTOU, SIG_IGN);
      execve(self, argv.data(), envps[static_cast<size_t>(r)].data());
      const char msg[] =
          "tp-run: error: cannot start a worker (execve of this executable failed)\n";
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
  Clock::time_point deadline = Clock::time_point::max();
  std::string waiting_for;  // what the deadline waits for, for its message
  std::chrono::seconds grace = kStopGrace;
  bool killed = false;
  bool interrupted = false;
  if (!spawn_error.ok()) {
    std::fprintf(stderr, "tp-run: error: %s\n", std::string(spawn_error.message()).c_str());
    exit_code = 1;
    if (group != 0) kill(-group, SIGKILL);
    killed = true;
  }
  while (running > 0) {
    // Look before reaping: the group must not be killed once its last process is reaped
    // (its id could be reused), so the last worker is reaped after the group's kill.
    siginfo_t info{};
    info.si_pid = 0;
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
      if (errno == EINTR) continue;
      // ECHILD with workers running: they were reaped elsewhere; their status is lost.
      std::fprintf(stderr, "tp-run: error: lost track of the %d running rank(s) (%s)\n", running,
                   std::strerror(errno));
      if (group != 0) kill(-group, SIGKILL);
      exit_code = 1;
      break;
    }
    if (info.si_pid != 0) {
      if (running == 1 && group != 0) kill(-group, SIGKILL);
      int status = 0;
      const pid_t pid = waitpid(info.si_pid, &status, 0);
      for (int r = 0; r < n; ++r) {
        Worker& w = workers[static_cast<size_t>(r)];
        if (w.pid != pid || !w.running) continue;
        w.running = false;
        w.status = status;
        --running;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        const bool peer = WIFEXITED(status) && WEXITSTATUS(status) == kExitPeerFailed;
        if (killed || interrupted) break;
        if (ok) {
          // Rank 0 succeeded only once every rank was done: the rest are exiting.
          if (r == 0 && deadline == Clock::time_point::max()) {
            deadline = Clock::now() + kStopGrace;
            waiting_for = "after rank 0 finished";
          }
          break;
        }
        if (first_failed < 0 && !peer) {
          first_failed = r;
          exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
          if (WIFSIGNALED(status)) {
            // The worker could not say why it stopped: say it for it, and tell the others.
            const std::string why = Describe(r, w);
            std::fprintf(stderr, "tp-run: error: %s\n", why.c_str());
            (void)store->Set(kAbortKey, EncodeRankStatus(-1, absl::AbortedError(why)));
          }
        }
        if (exit_code == 0) exit_code = 1;  // stopped by a failure the launcher did not see
        deadline = std::min(deadline, Clock::now() + kStopGrace);
        if (waiting_for.empty() || waiting_for == "after rank 0 finished") {
          waiting_for = first_failed >= 0 ? absl::StrCat("after rank ", first_failed, " failed")
                                          : "after a failure";
        }
        break;
      }
      continue;
    }
    if (g_signal.load() != 0 && !interrupted) {
      interrupted = true;
      std::fprintf(stderr, "tp-run: interrupted (%s); stopping the %d rank(s)\n",
                   strsignal(g_signal.load()), running);
      kill(-group, SIGTERM);
      exit_code = 130;
      grace = std::chrono::seconds(2);
      deadline = std::min(deadline, Clock::now() + grace);
      waiting_for = "after the interrupt";
    }
    if (!killed && Clock::now() > deadline) {
      std::vector<int> late;
      for (int r = 0; r < n; ++r)
        if (workers[static_cast<size_t>(r)].running) late.push_back(r);
      std::fprintf(stderr, "tp-run: error: rank(s) %s did not stop within %lld s %s; killed\n",
                   absl::StrJoin(late, ", ").c_str(), static_cast<long long>(grace.count()),
                   waiting_for.c_str());
      kill(-group, SIGKILL);
      killed = true;
      if (exit_code == 0) exit_code = 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  restore_signals();
  // A rank killed while the ranks connected through shared memory may have left its
  // segment (its name starts with its pid): nothing is left in /dev/shm.
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it("/dev/shm", ec), end; !ec && it != end; it.increment(ec)) {
    for (const Worker& w : workers) {
      if (absl::StartsWith(it->path().string(), SegmentPathPrefix(w.pid))) {
        std::error_code gone;  // (a failure here must not end the walk)
        fs::remove(it->path(), gone);
        break;
      }
    }
  }
  return exit_code;
}

}  // namespace tpc::runtime
