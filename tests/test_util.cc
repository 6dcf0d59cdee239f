#include "test_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace tpc::testing {
namespace {

struct TempDirs {
  std::vector<std::filesystem::path> paths;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& p : paths) std::filesystem::remove_all(p, ec);
  }
};
TempDirs& Dirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string SourcePath(const std::string& relative) {
  return std::string(TPC_SOURCE_DIR) + "/" + relative;
}

std::string TempDir(const std::string& tag) {
  static int counter = 0;
  std::filesystem::path p = std::filesystem::temp_directory_path() /
                            ("tpc_test_" + std::to_string(::getpid()) + "_" + tag + "_" +
                             std::to_string(counter++));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  Dirs().paths.push_back(p);
  return p.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

}  // namespace tpc::testing
