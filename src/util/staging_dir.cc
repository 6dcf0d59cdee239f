#include "tpc/util/staging_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tpc {
namespace {

namespace fs = std::filesystem;

// Temporary folders alive in this process, removed on SIGINT/SIGTERM.
std::mutex g_mu;
std::set<std::string>* g_live = nullptr;

void OnSignal(int sig) {
  // Best effort: the process is going away; leave no temporary folder behind.
  if (g_live != nullptr) {
    for (const auto& p : *g_live) {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void Register(const std::string& p) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_live == nullptr) {
    g_live = new std::set<std::string>();
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
  }
  g_live->insert(p);
}

void Unregister(const std::string& p) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_live != nullptr) g_live->erase(p);
}

// True when no process `pid` runs, or the one that does started after `folder` was last
// written (the pid was reused): the folder's writer is gone.
bool WriterGone(int64_t pid, const fs::path& folder) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return true;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  struct stat proc {};
  struct stat dir {};
  if (::stat(absl::StrCat("/proc/", pid).c_str(), &proc) != 0 || ::stat(folder.c_str(), &dir) != 0)
    return false;
  return proc.st_ctime > dir.st_mtime + 1;
}

// Removes `.NAME.tmp-PID` (and `.NAME.tmp-PID.old`) folders in `parent` left by runs for
// the same target whose process is gone.
std::vector<std::string> RemoveStale(const fs::path& parent, const std::string& name) {
  std::vector<std::string> removed;
  const std::string prefix = absl::StrCat(".", name, ".tmp-");
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (entry.rfind(prefix, 0) != 0) continue;
    absl::string_view rest = absl::string_view(entry).substr(prefix.size());
    if (absl::EndsWith(rest, ".old")) rest.remove_suffix(4);
    int64_t pid = 0;
    if (!absl::SimpleAtoi(rest, &pid) || pid == ::getpid()) continue;
    std::error_code sub;
    if (!it->is_directory(sub) || it->is_symlink(sub) || !WriterGone(pid, it->path())) continue;
    fs::remove_all(it->path(), sub);
    if (!sub) removed.push_back(it->path().string());
  }
  return removed;
}

}  // namespace

absl::StatusOr<StagingDir> StagingDir::Create(const std::string& target, bool force) {
  std::error_code ec;
  fs::path t = fs::absolute(fs::path(target), ec);
  if (target.empty() || ec) return absl::InvalidArgumentError("no output folder given");
  if (t.filename().empty()) t = t.parent_path();
  if (fs::exists(t, ec)) {
    if (!fs::is_directory(t, ec)) {
      return absl::AlreadyExistsError(absl::StrCat(target, ": exists and is not a folder"));
    }
    if (!fs::is_empty(t, ec) && !force) {
      return absl::AlreadyExistsError(
          absl::StrCat(target, ": folder exists and is not empty (use --force to replace it)"));
    }
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
  std::vector<std::string> removed = RemoveStale(parent, t.filename().string());
  fs::path temp = parent / absl::StrCat(".", t.filename().string(), ".tmp-", ::getpid());
  fs::remove_all(temp, ec);
  if (!fs::create_directory(temp, ec)) {
    return absl::PermissionDeniedError(
        absl::StrCat(target, ": cannot create a folder in ", parent.string(), ": ", ec.message()));
  }
  Register(temp.string());
  StagingDir out(t.string(), temp.string(), force);
  out.removed_ = std::move(removed);
  return out;
}

StagingDir::StagingDir(StagingDir&& other) noexcept
    : target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      force_(other.force_),
      committed_(other.committed_),
      removed_(std::move(other.removed_)) {
  other.committed_ = true;  // the moved-from object owns nothing
}

StagingDir::~StagingDir() {
  if (committed_ || temp_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
  Unregister(temp_);
}

absl::Status StagingDir::Commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(target_, ec)) {
    if (fs::is_empty(target_, ec)) {
      fs::remove(target_, ec);
    } else if (force_) {
      old = fs::path(temp_ + ".old");
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
  committed_ = true;
  Unregister(temp_);
  return absl::OkStatus();
}

}  // namespace tpc
