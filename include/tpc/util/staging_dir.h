// Writing an output folder all or nothing: files go to a hidden temporary folder beside
// the target, which is renamed into place by Commit(). A failure, an exception or
// Ctrl-C leaves no half-written target behind.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpc {

class StagingDir {
 public:
  // Fails when `target` exists and is not an empty folder, unless `force`; fails when
  // the parent folder cannot be written. Temporary folders of earlier runs for the same
  // target whose process is gone (killed, crashed; each writer holds a flock on its
  // folder, which the kernel drops when it dies) are removed first: see removed().
  static absl::StatusOr<StagingDir> Create(const std::string& target, bool force);
  StagingDir(StagingDir&& other) noexcept;
  StagingDir& operator=(StagingDir&&) = delete;
  ~StagingDir();

  // The temporary folder to write into.
  const std::string& path() const { return temp_; }
  // The folder Commit() writes (absolute; a link to a folder resolved).
  const std::string& target() const { return target_; }
  std::string File(const std::string& name) const { return temp_ + "/" + name; }
  // Moves the temporary folder to the target (replacing an old one when forced).
  absl::Status Commit();
  // What Create() did with the folders of earlier runs that died (removed, or the previous
  // output restored), one sentence each, for the tool to say so.
  const std::vector<std::string>& removed() const { return removed_; }

 private:
  StagingDir(std::string target, std::string temp, bool force)
      : target_(std::move(target)), temp_(std::move(temp)), force_(force) {}
  std::string target_;
  std::string temp_;
  bool force_ = false;
  bool committed_ = false;
  std::vector<std::string> removed_;
  int lock_fd_ = -1;            // the temporary folder, flock'ed while this object lives
  std::vector<int> old_locks_;  // the previous output while Commit() moves it aside
};

}  // namespace tpc
