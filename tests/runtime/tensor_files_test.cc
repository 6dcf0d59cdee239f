// Output files are written whole or not at all: through a temporary file renamed over the
// target, so a full disk (here a file size limit) leaves no partial file and says why.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "test_util.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

// A tensor of `n` floats 0, 1, 2, ...
Tensor CountingFloats(int64_t n) {
  Tensor t = Tensor::Allocate(ir::DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST_CASE("tensor files are written whole or not at all, saying why", "[tensor_io]") {
  const std::string dir = tpc::testing::TempDir("tensor_files");
  const Tensor small = CountingFloats(16), big = CountingFloats(1 << 18);  // 1 MiB
  for (const char* ext : {".npy", ".pb"}) {
    INFO(ext);
    const std::string path = dir + "/out" + ext;
    auto write = [&](const Tensor& t) {
      return std::string(ext) == ".npy" ? WriteNpyFile(path, t)
                                        : WriteTensorProtoFile(path, t, "y");
    };
    REQUIRE(write(small).ok());
    auto back = ReadTensorFile(path);
    REQUIRE(back.ok());
    CHECK(back->tensor.num_elements() == 16);
    // In a child limited to 64 KiB files: the 1 MiB write fails, the 16-float file stays
    // as it was and no temporary file is left.
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::signal(SIGXFSZ, SIG_IGN);  // the write returns EFBIG instead
      const rlimit limit{64 << 10, 64 << 10};
      setrlimit(RLIMIT_FSIZE, &limit);
      const absl::Status s = write(big);
      const bool said =
          !s.ok() && s.message().find("cannot write (File too large)") != absl::string_view::npos;
      _exit(said ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    back = ReadTensorFile(path);
    REQUIRE(back.ok());
    CHECK(back->tensor.num_elements() == 16);
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
    CHECK(files == (std::string(ext) == ".npy" ? 1 : 2));
  }
}

}  // namespace
}  // namespace tpc::runtime
