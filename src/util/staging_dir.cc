#include "tpc/util/staging_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc {
namespace {

namespace fs = std::filesystem;

// Temporary folders alive in this process, removed on SIGINT/SIGTERM/SIGHUP. The handler
// may only do what is async-signal-safe: the paths sit in fixed slots (a slot's path is
// written before it is marked used), and each is removed by `rm -rf` in a child
// (fork, execve and waitpid are safe; walking a folder is not).
constexpr int kSlots = 16;
struct Slot {
  std::atomic<bool> used{false};
  char path[4096] = {};
};
Slot g_slots[kSlots];
std::mutex g_mu;  // Register/Unregister among themselves

void OnSignal(int sig) {
  for (Slot& slot : g_slots) {
    if (!slot.used.load(std::memory_order_acquire)) continue;
    const pid_t pid = fork();
    if (pid == 0) {
      char rm[] = "/bin/rm", rf[] = "-rf", dashes[] = "--";
      char* const argv[] = {rm, rf, dashes, slot.path, nullptr};
      char* const envp[] = {nullptr};
      execve(rm, argv, envp);
      _exit(127);
    }
    if (pid > 0) {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void Register(const std::string& p) {
  std::lock_guard<std::mutex> lock(g_mu);
  // SIGHUP: the terminal closed. Only a default disposition is replaced: a signal the
  // process was started ignoring (nohup's SIGHUP, a background job's SIGINT) stays
  // ignored, and another handler stays.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      std::signal(sig, OnSignal);
    }
  }
  if (p.size() >= sizeof(Slot::path)) return;  // (a path too long is left to the destructor)
  for (Slot& slot : g_slots) {
    if (slot.used.load(std::memory_order_relaxed)) continue;
    std::memcpy(slot.path, p.c_str(), p.size() + 1);
    slot.used.store(true, std::memory_order_release);
    return;
  }
}

void Unregister(const std::string& p) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (Slot& slot : g_slots) {
    if (slot.used.load(std::memory_order_relaxed) && p == slot.path) {
      slot.used.store(false, std::memory_order_release);
      return;
    }
  }
}

// An open, exclusively locked (flock) folder, or -1. A writer holds the lock on its
// temporary folder from creation to the end of Commit(); the kernel drops it when the
// process dies however it dies, so a folder whose lock can be taken has no writer.
int LockFolder(const std::string& path, bool wait) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// `.NAME.tmp-PID` and `.NAME.tmp-PID.old` folders in `parent` whose writer is gone (their
// lock is free): a temporary folder is removed; an `.old` one (the previous output, moved
// aside by a Commit that died before it finished) is moved back when the target is
// missing, else removed. Returns what was done, one sentence each.
std::vector<std::string> RemoveStale(const fs::path& parent, const std::string& name) {
  std::vector<std::string> done;
  const std::string prefix = absl::StrCat(".", name, ".tmp-");
  const fs::path target = parent / name;
  std::error_code ec;
  std::vector<fs::path> candidates;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (entry.rfind(prefix, 0) != 0) continue;
    absl::string_view pid = absl::string_view(entry).substr(prefix.size());
    if (absl::EndsWith(pid, ".old")) pid.remove_suffix(4);
    const bool digits =
        !pid.empty() && pid.size() <= 10 &&
        std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) candidates.push_back(it->path());
  }
  for (const fs::path& p : candidates) {
    const int fd = LockFolder(p.string(), /*wait=*/false);
    if (fd < 0) continue;  // a live writer (or not a folder we can open): leave it
    std::error_code sub;
    const bool old = absl::EndsWith(p.filename().string(), ".old");
    if (old && !fs::exists(target, sub)) {
      fs::rename(p, target, sub);
      if (!sub) {
        done.push_back(absl::StrCat("restored ", target.string(), " from ", p.string(),
                                    ", where a run that died while replacing it had moved it"));
      }
    } else {
      fs::remove_all(p, sub);
      if (!sub) {
        done.push_back(
            absl::StrCat("removed ", p.string(),
                         ", the temporary folder of an earlier run that did not finish"));
      }
    }
    ::close(fd);
  }
  return done;
}

}  // namespace

absl::StatusOr<StagingDir> StagingDir::Create(const std::string& target, bool force) {
  std::error_code ec;
  fs::path t = fs::absolute(fs::path(target), ec);
  if (target.empty() || ec) return absl::InvalidArgumentError("no output folder given");
  t = t.lexically_normal();  // `plan/.` is `plan`
  if (t.filename().empty()) t = t.parent_path();
  // A link to a folder (the plan kept on a larger disk): the folder it names is written,
  // and the link stays.
  if (fs::is_symlink(t, ec)) {
    fs::path real = fs::canonical(t, ec);
    if (ec == std::errc::too_many_symbolic_link_levels) {
      return absl::InvalidArgumentError(absl::StrCat(target, ": a loop of symbolic links"));
    }
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(target, ": a symbolic link to ",
                                                     fs::read_symlink(t, ec).string(),
                                                     ", which does not exist"));
    }
    t = real;
  }
  fs::path parent = t.parent_path();
  if (fs::exists(parent, ec) && !fs::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(target, ": ", parent.string(), " is not a folder"));
  }
  if (!fs::is_directory(parent, ec)) {
    return absl::NotFoundError(
        absl::StrCat(target, ": parent folder ", parent.string(), " does not exist"));
  }
  // Leftovers of dead runs first: a restored previous output counts as the target.
  std::vector<std::string> removed = RemoveStale(parent, t.filename().string());
  const std::string notes =
      removed.empty() ? "" : absl::StrCat(" (", absl::StrJoin(removed, "; "), ")");
  if (fs::exists(t, ec)) {
    if (!fs::is_directory(t, ec)) {
      return absl::AlreadyExistsError(absl::StrCat(target, ": exists and is not a folder", notes));
    }
    if (!fs::is_empty(t, ec) && !force) {
      return absl::AlreadyExistsError(absl::StrCat(
          target, ": folder exists and is not empty (use --force to replace it)", notes));
    }
  }
  fs::path temp = parent / absl::StrCat(".", t.filename().string(), ".tmp-", ::getpid());
  fs::remove_all(temp, ec);
  if (!fs::create_directory(temp, ec)) {
    return absl::PermissionDeniedError(
        absl::StrCat(target, ": cannot create a folder in ", parent.string(), ": ", ec.message()));
  }
  StagingDir out(t.string(), temp.string(), force);
  out.removed_ = std::move(removed);
  out.lock_fd_ = LockFolder(temp.string(), /*wait=*/true);
  if (out.lock_fd_ < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(target, ": cannot lock the temporary folder ", temp.string()));
  }
  Register(temp.string());
  return out;
}

StagingDir::StagingDir(StagingDir&& other) noexcept
    : target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      force_(other.force_),
      committed_(other.committed_),
      removed_(std::move(other.removed_)),
      lock_fd_(other.lock_fd_) {
  other.committed_ = true;  // the moved-from object owns nothing
  other.lock_fd_ = -1;
}

StagingDir::~StagingDir() {
  if (!committed_ && !temp_.empty()) {
    std::error_code ec;
    fs::remove_all(temp_, ec);
    Unregister(temp_);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::Status StagingDir::Commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(target_, ec)) {
    if (fs::is_empty(target_, ec)) {
      fs::remove(target_, ec);
    } else if (force_) {
      // The previous output is moved aside under a lock of this process, so that a run
      // starting meanwhile does not take `.old` for a dead run's leftover.
      old = fs::path(temp_ + ".old");
      const int old_lock = LockFolder(target_, /*wait=*/false);
      if (old_lock >= 0) old_locks_.push_back(old_lock);
      fs::rename(target_, old, ec);
      if (ec)
        return absl::PermissionDeniedError(
            absl::StrCat(target_, ": cannot replace: ", ec.message()));
    } else {
      return absl::AlreadyExistsError(absl::StrCat(target_, ": appeared while writing"));
    }
  }
  fs::rename(temp_, target_, ec);
  if (ec) {
    if (!old.empty()) fs::rename(old, target_, ec);
    return absl::PermissionDeniedError(
        absl::StrCat(target_, ": cannot move output into place: ", ec.message()));
  }
  if (!old.empty()) fs::remove_all(old, ec);
  for (int fd : old_locks_) ::close(fd);
  old_locks_.clear();
  committed_ = true;
  Unregister(temp_);
  return absl::OkStatus();
}

}  // namespace tpc
