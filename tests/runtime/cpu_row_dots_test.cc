// The int4 loops of the CPU backend (runtime/cpu/isa_loops.h): the decode loop on the
// codes, the dequantized tile in the order of A's even/odd pairs, and RowColumnDots in
// every vector width this CPU has, against plain loops written here.
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "catch2/catch.hpp"
#include "column_checks.h"
#include "one_op.h"
#include "runtime/cpu/isa_loops.h"
#include "tpc/runtime/backend.h"

namespace tpc::runtime::cpu {
namespace {

TEST_CASE("RowColumnDots gives every row against every column in each vector width",
          "[runtime][cpu][int4]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  int widths_run = 0;
  for (int lanes : {16, 8, 4}) {
    // Register tiles whole and partial in rows and columns, one vector along k to many,
    // rows padded (ld > k) and not.
    // One vector along k in a whole tile; 2 and 3 rows past AVX-512's 4-row tiles.
    for (auto [m, n, k, pad] : std::vector<std::array<int64_t, 4>>{{1, 1, 16, 0},
                                                                   {5, 7, 32, 16},
                                                                   {4, 4, 2048, 0},
                                                                   {9, 6, 48, 32},
                                                                   {2, 9, 64, 0},
                                                                   {4, 4, 16, 16},
                                                                   {6, 5, 32, 16},
                                                                   {7, 8, 16, 0}}) {
      const int64_t lda = k + pad, ldw = k + pad, ldc = n + 3;
      std::vector<float> a(static_cast<size_t>(m * lda)), w(static_cast<size_t>(n * ldw));
      // Rows padded with NaN past k: a read of the padding shows in every sum it reaches.
      for (int64_t i = 0; i < m * lda; ++i) {
        a[static_cast<size_t>(i)] = i % lda < k ? uniform(rng) : std::nanf("");
      }
      for (int64_t i = 0; i < n * ldw; ++i) {
        w[static_cast<size_t>(i)] = i % ldw < k ? uniform(rng) : std::nanf("");
      }
      std::vector<float> c(static_cast<size_t>(m * ldc), 12345.0f);
      INFO("lanes " << lanes << ", m " << m << ", n " << n << ", k " << k);
      if (!RowColumnDotsOfWidth(lanes, a.data(), lda, m, w.data(), ldw, n, k, c.data(), ldc)) {
        continue;  // not on this CPU
      }
      ++widths_run;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const float got = c[static_cast<size_t>(i * ldc + j)];
          if (j >= n) {
            REQUIRE(got == 12345.0f);  // past the row's n values: untouched
            continue;
          }
          double want = 0, size = 0;
          for (int64_t p = 0; p < k; ++p) {
            const double x = static_cast<double>(a[static_cast<size_t>(i * lda + p)]) *
                             w[static_cast<size_t>(j * ldw + p)];
            want += x;
            size += std::abs(x);
          }
          REQUIRE(std::abs(got - want) <= 1e-6 * size + 1e-7);
        }
      }
    }
  }
  CHECK(widths_run >= 8);  // the baseline's, at least
}

TEST_CASE("Int4DequantizeColumns writes each block's even codes, then its odd ones, scaled",
          "[runtime][cpu][int4]") {
  std::mt19937 rng(3);
  for (int64_t half : {16, 32, 64}) {
    for (int zero_kind = 0; zero_kind < 3; ++zero_kind) {  // packed, float, none (8)
      const int64_t blocks = 3, cols = 5, k = blocks * 2 * half, ld = k + 16;
      const int64_t code_stride = blocks * half, packed_stride = (blocks + 1) / 2;
      std::vector<uint8_t> codes(static_cast<size_t>(cols * code_stride));
      for (uint8_t& b : codes) b = static_cast<uint8_t>(rng() & 255);
      std::vector<float> scales(static_cast<size_t>(cols * blocks));
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.01f * static_cast<float>(i + 1);
      std::vector<float> zeros(scales.size());
      for (size_t i = 0; i < zeros.size(); ++i) zeros[i] = static_cast<float>(rng() % 16) + 0.5f;
      std::vector<uint8_t> packed(static_cast<size_t>(cols * packed_stride));
      for (uint8_t& b : packed) b = static_cast<uint8_t>(rng() & 255);
      std::vector<float> w(static_cast<size_t>(cols * ld), -1.0f);
      Int4DequantizeColumns(codes.data(), code_stride, scales.data(),
                            zero_kind == 1 ? zeros.data() : nullptr,
                            zero_kind == 0 ? packed.data() : nullptr, packed_stride, blocks, half,
                            cols, w.data(), ld);
      INFO("half " << half << ", zero points " << zero_kind);
      for (int64_t col = 0; col < cols; ++col) {
        for (int64_t b = 0; b < blocks; ++b) {
          const float zero =
              zero_kind == 0
                  ? static_cast<float>((packed[static_cast<size_t>(col * packed_stride + b / 2)] >>
                                        (4 * (b % 2))) &
                                       15)
              : zero_kind == 1 ? zeros[static_cast<size_t>(col * blocks + b)]
                               : 8.0f;
          const float scale = scales[static_cast<size_t>(col * blocks + b)];
          for (int64_t j = 0; j < 2 * half; ++j) {  // code j of the block
            const uint8_t byte = codes[static_cast<size_t>(col * code_stride + b * half + j / 2)];
            const int code = j % 2 == 0 ? byte & 15 : byte >> 4;
            const int64_t at = col * ld + b * 2 * half + (j % 2 == 0 ? j / 2 : half + j / 2);
            REQUIRE(w[static_cast<size_t>(at)] == (static_cast<float>(code) - zero) * scale);
          }
        }
        REQUIRE(w[static_cast<size_t>(col * ld + k)] == -1.0f);  // the padding: untouched
      }
    }
  }
}

TEST_CASE("Int4ColumnsDot gives every column against every row of A", "[runtime][cpu][int4]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  // One row (pairs of columns, an odd one left), 2 to 5 rows (groups of 4 and the rest);
  // blocks of 32 (compiled for that size) and 64; every kind of zero point.
  for (int64_t half : {16, 32}) {
    for (int zero_kind = 0; zero_kind < 3; ++zero_kind) {  // packed, float, none (8)
      for (int64_t rows : {1, 2, 3, 5}) {
        for (int64_t cols : {1, 2, 5}) {
          const int64_t blocks = 3, k = blocks * 2 * half, a_stride = k + 16, out_ld = cols + 2;
          const int64_t packed_stride = (blocks + 1) / 2;
          std::vector<uint8_t> codes(static_cast<size_t>(cols * blocks * half));
          for (uint8_t& b : codes) b = static_cast<uint8_t>(rng() & 255);
          std::vector<float> scales(static_cast<size_t>(cols * blocks));
          for (float& v : scales) v = uniform(rng);
          std::vector<float> zeros(scales.size());
          for (float& v : zeros) v = static_cast<float>(rng() % 16) + 0.5f;
          std::vector<uint8_t> packed(static_cast<size_t>(cols * packed_stride));
          for (uint8_t& b : packed) b = static_cast<uint8_t>(rng() & 255);
          std::vector<float> a(static_cast<size_t>(rows * a_stride));
          for (float& v : a) v = uniform(rng);
          std::vector<float> out(static_cast<size_t>(rows * out_ld), testing::kUntouched);
          Int4ColumnsDot(codes.data(), scales.data(), zero_kind == 1 ? zeros.data() : nullptr,
                         zero_kind == 0 ? packed.data() : nullptr, packed_stride, cols, blocks,
                         half, a.data(), a_stride, rows, out.data(), out_ld);
          INFO("half " << half << ", zero points " << zero_kind << ", rows " << rows << ", cols "
                       << cols);
          testing::RequireColumns(out, rows, cols, out_ld, [&](int64_t r, int64_t c) {
            double want = 0, size = 0;
            for (int64_t b = 0; b < blocks; ++b) {
              const size_t cb = static_cast<size_t>(c * blocks + b);
              const float zero =
                  zero_kind == 0 ? static_cast<float>(
                                       (packed[static_cast<size_t>(c * packed_stride + b / 2)] >>
                                        (4 * (b % 2))) &
                                       15)
                  : zero_kind == 1 ? zeros[cb]
                                   : 8.0f;
              for (int64_t j = 0; j < 2 * half; ++j) {  // code j of the block
                const uint8_t byte = codes[static_cast<size_t>((c * blocks + b) * half + j / 2)];
                const int code = j % 2 == 0 ? byte & 15 : byte >> 4;
                // A's pairs: the block's even values, then its odd ones.
                const float av = a[static_cast<size_t>(r * a_stride + b * 2 * half +
                                                       (j % 2 == 0 ? j / 2 : half + j / 2))];
                const double x = (static_cast<double>(code) - zero) * scales[cb] * av;
                want += x;
                size += std::abs(x);
              }
            }
            return std::pair{want, size};
          });
        }
      }
    }
  }
}

TEST_CASE("MatMulNBits' prefill gives the same bits on 1 and 4 threads", "[runtime][cpu][int4]") {
  // 70 rows (two passes), 300 columns at K 4096 (tiles of 16: 19, shared out among the
  // threads, each with a buffer of its own), packed zero points, a bias.
  const int64_t m = 70, k = 4096, n = 300, block = 32, blocks = k / block;
  std::mt19937 rng(11);
  Tensor b = Tensor::Allocate(ir::DType::kU8, {n, blocks, block / 2});
  for (int64_t i = 0; i < b.num_elements(); ++i) b.data<uint8_t>()[i] = rng() & 255;
  Tensor zp = Tensor::Allocate(ir::DType::kU8, {n, (blocks + 1) / 2});
  for (int64_t i = 0; i < zp.num_elements(); ++i) zp.data<uint8_t>()[i] = rng() & 255;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Tensor a = Tensor::Allocate(ir::DType::kF32, {m, k});
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = uniform(rng);
  Tensor scales = Tensor::Allocate(ir::DType::kF32, {n * blocks});
  for (int64_t i = 0; i < scales.num_elements(); ++i) scales.data<float>()[i] = uniform(rng);
  Tensor bias = Tensor::Allocate(ir::DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) bias.data<float>()[i] = uniform(rng);
  std::vector<std::vector<float>> got;
  for (int threads : {1, 4}) {
    auto backend = MakeCpuBackend(threads);
    testing::OneOp o;
    o.Input("A", a);
    o.Input("B", b);
    o.Input("scales", scales);
    o.Input("zero_points", zp);
    o.None();  // g_idx
    o.Input("bias", bias);
    auto y = o.TryRun("MatMulNBits", {{"K", k}, {"N", n}, {"bits", 4}, {"block_size", block}}, 1,
                      "com.microsoft", backend.get());
    INFO(y.status().ToString());
    REQUIRE(y.ok());
    const float* p = (*y)[0].data<float>();
    got.emplace_back(p, p + m * n);
  }
  REQUIRE(got[0] == got[1]);
}

}  // namespace
}  // namespace tpc::runtime::cpu
