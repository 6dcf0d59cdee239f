// Tied weights: copies of one matrix (or its transpose) are found, uniform tensors
// are not taken for copies, and each copy links to the original (a star, not a clique).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/shard/tied_weights.h"
#include "tpc/util/mapped_file.h"

namespace {

using tpc::ir::Graph;
using tpc::ir::Tensor;

std::vector<float> Ramp(int n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("tied weights: equal and transposed copies, not uniform tensors", "[shard]") {
  Graph g;
  // a [32, 64] with distinct values; b = a; t = transpose(a).
  const std::vector<float> a = Ramp(32 * 64, 1.0f);
  std::vector<float> t(a.size());
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 64; ++j)
      t[static_cast<size_t>(j * 32 + i)] = a[static_cast<size_t>(i * 64 + j)];
  }
  g.AddConstant("a", Tensor::FromFloat({32, 64}, a));
  g.AddConstant("other", Tensor::FromFloat({32, 64}, Ramp(32 * 64, 5.0f)));
  g.AddConstant("b", Tensor::FromFloat({32, 64}, a));
  g.AddConstant("t", Tensor::FromFloat({64, 32}, t));
  g.AddConstant("c", Tensor::FromFloat({32, 64}, a));
  // Two zero matrices and two zero biases: equal bytes, yet not one parameter.
  g.AddConstant("z1", Tensor::FromFloat({32, 64}, std::vector<float>(32 * 64, 0.0f)));
  g.AddConstant("z2", Tensor::FromFloat({32, 64}, std::vector<float>(32 * 64, 0.0f)));
  g.AddConstant("bias1", Tensor::FromFloat({2048}, Ramp(2048, 0)));
  g.AddConstant("bias2", Tensor::FromFloat({2048}, Ramp(2048, 0)));

  const auto pairs = tpc::shard::FindTiedWeights(g);
  REQUIRE(pairs.size() == 3);
  // Every copy ties to the first one it equals (a star, not all pairs).
  CHECK(pairs[0].a->name() == "a");
  CHECK(pairs[0].b->name() == "b");
  CHECK_FALSE(pairs[0].transposed);
  CHECK(pairs[1].a->name() == "a");
  CHECK(pairs[1].b->name() == "t");
  CHECK(pairs[1].transposed);
  CHECK(pairs[2].a->name() == "a");
  CHECK(pairs[2].b->name() == "c");
}

TEST_CASE("tied weights: samples agreeing is not enough, the whole matrix must", "[shard]") {
  Graph g;
  const std::vector<float> a = Ramp(64 * 64, 1.0f);
  // Equal but for one element: whichever elements are sampled, the full compare sees it.
  for (size_t differ : {size_t{0}, a.size() / 2, a.size() - 1}) {
    std::vector<float> b = a;
    b[differ] = -1.0f;
    Graph one;
    one.AddConstant("a", Tensor::FromFloat({64, 64}, a));
    one.AddConstant("b", Tensor::FromFloat({64, 64}, b));
    INFO("element " << differ);
    CHECK(tpc::shard::FindTiedWeights(one).empty());
  }
}

// File-backed resident memory of this process (RssFile in /proc/self/status), bytes.
size_t RssFileBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoull(line.substr(8)) * 1024;  // kB
  }
  return 0;
}

// A file of zero weights (a model initialised with zeros, or shaped like a large one
// for a dry run) is read at a few sampled elements per matrix, not whole: the mapped
// pages this process touches (RssFile) grow by far less than the file's size.
TEST_CASE("tied weights: uniform matrices in a large file are sampled, not read", "[shard]") {
  const std::string dir = tpc::testing::TempDir("tied_sparse");
  const std::string path = dir + "/zeros.bin";
  constexpr int64_t kRows = 4096;
  constexpr int64_t kCols = 4096;
  constexpr int64_t kMatrices = 8;  // 8 × 64 MiB, a sparse file (holes read as zeros)
  const size_t matrix_bytes = static_cast<size_t>(kRows * kCols * 4);
  {
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(matrix_bytes * kMatrices)) == 0);
    ::close(fd);
  }
  {
    auto file = tpc::MappedFile::Open(path);
    REQUIRE(file.ok());
    Graph g;
    for (int64_t k = 0; k < kMatrices; ++k) {
      g.AddConstant("w" + std::to_string(k),
                    Tensor::FromMapped(tpc::ir::DType::kF32, {kRows, kCols}, *file,
                                       static_cast<size_t>(k) * matrix_bytes));
    }
    const size_t before = RssFileBytes();
    CHECK(tpc::shard::FindTiedWeights(g).empty());
    const size_t grown = RssFileBytes() - before;
    // 32 sampled elements per matrix, each mapping a few pages around it; reading the
    // matrices whole would map all 512 MiB.
    INFO("RssFile grew by " << grown << " bytes");
    CHECK(grown < 32u << 20);
  }
  std::filesystem::remove_all(dir);
}
