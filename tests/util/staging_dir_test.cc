// StagingDir: a signal that ends the process (Ctrl-C, kill, the terminal closing) leaves no
// temporary folder; a signal the process ignores stays ignored.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "test_util.h"
#include "tpc/util/staging_dir.h"

namespace {

namespace fs = std::filesystem;

// Runs, in a child: SIGHUP's disposition set to `start`, a StagingDir for `target` with a
// file in it, then SIGHUP raised; the child exits 0 if it survives. Returns its status.
int StageThenHangUp(const std::string& target, void (*start)(int)) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGHUP, start);
    auto staging = tpc::StagingDir::Create(target, false);
    if (!staging.ok()) _exit(3);
    tpc::testing::WriteFile(staging->File("rank0.weights"), "half-written");
    std::raise(SIGHUP);
    _exit(0);  // (the destructor is skipped: a survivor leaves its folder)
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

int TemporariesIn(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    n += e.path().filename().string().find(".tmp-") != std::string::npos ? 1 : 0;
  }
  return n;
}

TEST_CASE("SIGHUP removes the temporary folder, unless the process ignores it", "[util]") {
  const std::string dir = tpc::testing::TempDir("staging_hup");
  const int killed = StageThenHangUp(dir + "/plan", SIG_DFL);
  CHECK(WIFSIGNALED(killed));
  CHECK(WTERMSIG(killed) == SIGHUP);
  CHECK(TemporariesIn(dir) == 0);
  CHECK_FALSE(fs::exists(dir + "/plan"));

  // Started under nohup: SIGHUP stays ignored and the process goes on.
  const int survived = StageThenHangUp(dir + "/plan", SIG_IGN);
  CHECK(WIFEXITED(survived));
  CHECK(WEXITSTATUS(survived) == 0);
  CHECK(TemporariesIn(dir) == 1);  // (left by the child's _exit, as a crash would)
}

}  // namespace
