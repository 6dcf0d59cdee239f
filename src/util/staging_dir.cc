#include "tpc/util/staging_dir.h"

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>

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
  fs::path temp = parent / absl::StrCat(".", t.filename().string(), ".tmp-", ::getpid());
  fs::remove_all(temp, ec);
  if (!fs::create_directory(temp, ec)) {
    return absl::PermissionDeniedError(
        absl::StrCat(target, ": cannot create a folder in ", parent.string(), ": ", ec.message()));
  }
  Register(temp.string());
  return StagingDir(t.string(), temp.string(), force);
}

StagingDir::StagingDir(StagingDir&& other) noexcept
    : target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      force_(other.force_),
      committed_(other.committed_) {
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
