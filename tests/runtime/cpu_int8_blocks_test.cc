// MatMulNBits' accuracy_level 4 on the CPU (runtime/cpu/int8_blocks.h, math/nbits.h's
// int8 rounding): the rounding against values worked out by hand, the integer kernel
// against a plain double loop over the same codes, and what a NaN does.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "column_checks.h"
#include "one_op.h"
#include "runtime/cpu/huge_pages.h"
#include "runtime/cpu/int8_blocks.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/math/nbits.h"

namespace tpc::runtime::cpu {
namespace {

// `n` random bytes (a weight's codes or packed zero points) as a constant's bytes.
std::string RandomBytes(std::mt19937& rng, int64_t n) {
  std::string bytes(static_cast<size_t>(n), '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 255);
  return bytes;
}

TEST_CASE("Int8 rounding takes amax / 127 and rounds half to even", "[runtime][cpu][int8]") {
  // amax 127: the codes are the values rounded, halves to the even code.
  const std::vector<float> a = {2.5f, 3.5f, -2.5f, -0.5f, 127.0f, 1.49f, -126.5f, 0.0f};
  const auto at = [&](int64_t i) { return a[static_cast<size_t>(i)]; };
  const math::Int8Block b = math::Int8BlockOf(at, static_cast<int64_t>(a.size()));
  REQUIRE(b.scale == 1.0f);
  const std::vector<int> want = {2, 4, -2, 0, 127, 1, -126, 0};
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(math::Int8Code(a[i], b) == want[i]);
  // amax 2: each value times 63.5, rounded; the rounded activation is the code times 2/127.
  const std::vector<float> c = {1.0f, -2.0f, 0.3f};
  const math::Int8Block cb =
      math::Int8BlockOf([&](int64_t i) { return c[static_cast<size_t>(i)]; }, 3);
  REQUIRE(cb.scale == 2.0f / 127.0f);
  REQUIRE(math::Int8Code(1.0f, cb) == 64);  // 63.5: the even one
  REQUIRE(math::Int8Code(-2.0f, cb) == -127);
  REQUIRE(math::Int8Code(0.3f, cb) == 19);  // 19.05
  REQUIRE(math::Int8Rounded(0.3f, cb) == 19.0f * (2.0f / 127.0f));
  // Values under 127 / FLT_MAX: the inverse would overflow; codes 0, as MLAS's.
  const math::Int8Block tiny =
      math::Int8BlockOf([](int64_t i) { return i == 0 ? 1e-38f : -2e-39f; }, 2);
  REQUIRE(tiny.scale == 1e-38f / 127.0f);
  REQUIRE(math::Int8Code(1e-38f, tiny) == 0);
  REQUIRE(math::Int8Rounded(-2e-39f, tiny) == 0.0f);
  // A block of zeros: scale 0, codes 0. A NaN or an infinity: scale NaN, codes 0.
  const math::Int8Block zero = math::Int8BlockOf([](int64_t) { return 0.0f; }, 4);
  REQUIRE(zero.scale == 0.0f);
  REQUIRE(math::Int8Code(0.0f, zero) == 0);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::vector<float> v = {1.0f, bad, -3.0f};
    const math::Int8Block nb =
        math::Int8BlockOf([&](int64_t i) { return v[static_cast<size_t>(i)]; }, 3);
    REQUIRE(std::isnan(nb.scale));
    REQUIRE(math::Int8Code(bad, nb) == 0);
    REQUIRE(std::isnan(math::Int8Rounded(1.0f, nb)));
  }
}

TEST_CASE("Int8PanelsDot gives every column against every rounded row", "[runtime][cpu][int8]") {
  if (!HasInt8Dot()) {
    WARN(
        "skipped: this CPU has no AVX-512 VNNI (MatMulNBits then rounds A and multiplies in f32, "
        "which the node tests check)");
    return;
  }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  // 4- and 8-bit codes; blocks of 16 (64 bytes of a panel's codes hold half of a block's
  // 4-bit codes, a quarter of its 8-bit ones), 32, 64, 128 and 256; 1 row to 19 (8 at a time,
  // then the rest together: 1 to 7 rows, or none); 1, 6 and 17 columns (a partial panel,
  // one whole and a partial one), 33 (two whole ones and one column); odd block counts
  // (4-bit zero points ending in half a byte); packed zero points and none (2^(bits - 1)).
  // The panels are packed in two calls (the first panel last), as the pool's threads pack
  // them.
  for (int64_t bits : {4, 8}) {
    for (int64_t block : {16, 32, 64, 128, 256}) {
      for (int zero_kind = 0; zero_kind < 2; ++zero_kind) {  // packed, none
        for (int64_t rows : {1, 2, 3, 5, 8, 12, 14, 15, 19}) {
          for (int64_t cols : {1, 6, 17, 33}) {
            const int64_t k = block <= 32   ? (17 + rows % 3) * block
                              : block == 64 ? 5 * 64
                                            : 3 * block;
            const int64_t blocks = k / block, column_bytes = k * bits / 8;
            const int64_t packed_stride = (blocks * bits + 7) / 8, out_ld = cols + 1;
            std::vector<uint8_t> codes(static_cast<size_t>(cols * column_bytes));
            for (uint8_t& b : codes) b = static_cast<uint8_t>(rng() & 255);
            std::vector<float> scales(static_cast<size_t>(cols * blocks));
            for (float& v : scales) v = uniform(rng);
            std::vector<uint8_t> packed(static_cast<size_t>(cols * packed_stride));
            for (uint8_t& b : packed) b = static_cast<uint8_t>(rng() & 255);
            std::vector<float> a(static_cast<size_t>(rows * k));
            for (float& v : a) v = uniform(rng) * (1 + static_cast<float>(rng() % 4));
            const CodePanels layout{cols, k, bits, block, zero_kind == 0};
            AlignedVector<uint8_t> panels(static_cast<size_t>(layout.bytes()));
            const uint8_t* zeros = zero_kind == 0 ? packed.data() : nullptr;
            PackCodePanels(codes.data(), scales.data(), zeros, packed_stride, layout, 1,
                           layout.panels() - 1, panels.data());
            PackCodePanels(codes.data(), scales.data(), zeros, packed_stride, layout, 0, 1,
                           panels.data());
            Int8Activations q;
            q.Resize(rows, k, block);
            QuantizeInt8Activations(a.data(), 0, rows, &q);
            std::vector<float> out(static_cast<size_t>(rows * out_ld), testing::kUntouched);
            // The panels after the first, then the first: each call writes its own columns.
            if (layout.panels() > 1) {
              Int8PanelsDot(panels.data(), layout, 1, layout.panels() - 1, q, out.data(), out_ld);
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t c = 0; c < CodePanels::kColumns; ++c)
                  REQUIRE(out[static_cast<size_t>(r * out_ld + c)] == testing::kUntouched);
              }
            }
            Int8PanelsDot(panels.data(), layout, 0, 1, q, out.data(), out_ld);
            // The rounded rows, as MatMulNBits' other paths take them.
            std::vector<float> rounded(a.size());
            Int8RoundRows(a.data(), rows, k, block, rounded.data());
            INFO(bits << " bits, block " << block << ", zero points " << zero_kind << ", rows "
                      << rows << ", cols " << cols);
            const auto code_of = [&](const uint8_t* run, int64_t j) {
              return bits == 8 ? run[j] : (run[j / 2] >> (4 * (j % 2))) & 15;
            };
            testing::RequireColumns(out, rows, cols, out_ld, [&](int64_t r, int64_t c) {
              double want = 0, size = 0;
              for (int64_t j = 0; j < k; ++j) {
                const int64_t b = j / block;
                const double zero = zero_kind == 0 ? code_of(packed.data() + c * packed_stride, b)
                                                   : static_cast<double>(1 << (bits - 1));
                const int code = code_of(codes.data() + c * column_bytes, j);
                const double x = (code - zero) * scales[static_cast<size_t>(c * blocks + b)] *
                                 rounded[static_cast<size_t>(r * k + j)];
                want += x;
                size += std::abs(x);
              }
              return std::pair{want, size};
            });
          }
        }
      }
    }
  }
}

TEST_CASE("MatMulNBits at accuracy_level 4: a NaN in a row makes that row's outputs NaN",
          "[runtime][cpu][int8]") {
  // 4 bits: 20 rows in blocks of 32 and of 16 (the integer kernel where the CPU has it:
  // B is an input, rearranged at the call); 1 row (A rounded, then the f32 decode loop); 2
  // bits in blocks of 32 (A rounded, then the f32 tiles).
  for (auto [m, bits, block] :
       {std::array<int64_t, 3>{1, 4, 32}, {20, 4, 32}, {20, 4, 16}, {20, 2, 32}}) {
    const int64_t k = 128, n = 8, blocks = k / block;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    Tensor a = Tensor::Allocate(ir::DType::kF32, {m, k});
    for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = uniform(rng);
    a.data<float>()[(m - 1) * k + 70] = std::numeric_limits<float>::quiet_NaN();
    Tensor b = Tensor::Allocate(ir::DType::kU8, {n, blocks, block * bits / 8});
    for (int64_t i = 0; i < b.num_elements(); ++i) b.data<uint8_t>()[i] = rng() & 255;
    Tensor scales = Tensor::Allocate(ir::DType::kF32, {n * blocks});
    for (int64_t i = 0; i < scales.num_elements(); ++i) scales.data<float>()[i] = uniform(rng);
    auto backend = MakeCpuBackend(1);
    testing::OneOp o;
    o.Input("A", a);
    o.Input("B", b);
    o.Input("scales", scales);
    auto y =
        o.TryRun("MatMulNBits",
                 {{"K", k}, {"N", n}, {"bits", bits}, {"block_size", block}, {"accuracy_level", 4}},
                 1, "com.microsoft", backend.get());
    INFO(y.status().ToString());
    REQUIRE(y.ok());
    const float* p = (*y)[0].data<float>();
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        INFO("rows " << m << ", " << bits << " bits in blocks of " << block << ", row " << r
                     << ", column " << c);
        REQUIRE(std::isnan(p[r * n + c]) == (r == m - 1));
      }
    }
  }
}

TEST_CASE(
    "MatMulNBits over constant codes (copied onto huge pages, or into panels) gives the inputs' "
    "result",
    "[runtime][cpu][int8]") {
  // B 1 MiB and scales 256 KiB: both copied (kHugePageCopyBytes) at level 0, rearranged
  // into panels once at level 4 (where the CPU has VNNI); the same node fed the same bytes
  // as graph inputs (read where they are; rearranged at each call for 8 rows and more)
  // must give the same bits, on the first run (the copies made) and the second (the copies
  // kept).
  const int64_t m = 8;
  const int64_t k = 2048, n = 1024, block = 32, blocks = k / block;
  static_assert(int64_t{2048} * 1024 / 2 >= kHugePageCopyBytes);
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::string codes = RandomBytes(rng, n * k / 2);
  std::vector<float> scales(static_cast<size_t>(n * blocks));
  for (float& v : scales) v = uniform(rng) * 0.05f;
  const std::string zeros = RandomBytes(rng, n * blocks / 2);
  std::vector<float> bias(static_cast<size_t>(n));
  for (float& v : bias) v = uniform(rng);
  Tensor a = Tensor::Allocate(ir::DType::kF32, {m, k});
  for (int64_t i = 0; i < m * k; ++i) a.data<float>()[i] = uniform(rng);
  const std::string codes8 = RandomBytes(rng, n * k);  // 8-bit codes
  // Levels 0 and 4 without zero points and bias; level 4 with both (the panels keyed by
  // three constants); 8-bit codes at level 4 (their own layout of panels).
  struct Case {
    int64_t level, bits;
    bool extras;
  };
  for (const auto [level, bits, extras] :
       {Case{0, 4, false}, Case{4, 4, false}, Case{4, 4, true}, Case{4, 8, false}}) {
    const ir::Attributes attrs = {
        {"K", k}, {"N", n}, {"bits", bits}, {"block_size", block}, {"accuracy_level", level}};
    const std::string& weight = bits == 8 ? codes8 : codes;
    const std::vector<int64_t> b_shape = {n, blocks, block * bits / 8};
    ir::Graph g;
    g.opsets()[""] = 18;
    g.opsets()["com.microsoft"] = 1;
    ir::Value* x = g.AddPlaceholder("A", ir::TensorType(ir::DType::kF32, {ir::Dim(m), ir::Dim(k)}));
    ir::Value* b = g.AddConstant("B", ir::Tensor::FromBytes(ir::DType::kU8, b_shape, weight));
    ir::Value* s = g.AddConstant("scales", ir::Tensor::FromFloat({n * blocks}, scales));
    std::vector<ir::Value*> ins = {x, b, s};
    if (extras) {
      ins.push_back(g.AddConstant("zero_points",
                                  ir::Tensor::FromBytes(ir::DType::kU8, {n, blocks / 2}, zeros)));
      ins.push_back(nullptr);  // g_idx
      ins.push_back(g.AddConstant("bias", ir::Tensor::FromFloat({n}, bias)));
    }
    g.SetOutputs({g.AddCall("com.microsoft", "MatMulNBits", ins, {"Y"}, attrs)->output()});
    REQUIRE(onnx::InferShapes(g).ok());
    auto backend = MakeCpuBackend(1);
    auto ex = Executor::Create(g, *backend, nullptr);
    REQUIRE(ex.ok());
    // Made when the executor was created (Kernel::prepare), before the first run.
    const bool panels = level == 4 && HasInt8Dot();
    REQUIRE(StreamedConstantCopies(*backend) == (panels ? 0 : 2));
    REQUIRE(ConstantForms(*backend) == (panels ? 1 : 0));
    Tensor tb = Tensor::Allocate(ir::DType::kU8, b_shape);
    std::memcpy(tb.raw(), weight.data(), weight.size());
    Tensor ts = Tensor::Allocate(ir::DType::kF32, {n * blocks});
    std::memcpy(ts.raw(), scales.data(), scales.size() * sizeof(float));
    testing::OneOp o;
    o.Input("A", a);
    o.Input("B", tb);
    o.Input("scales", ts);
    if (extras) {
      Tensor tz = Tensor::Allocate(ir::DType::kU8, {n, blocks / 2});
      std::memcpy(tz.raw(), zeros.data(), zeros.size());
      Tensor tbias = Tensor::Allocate(ir::DType::kF32, {n});
      std::memcpy(tbias.raw(), bias.data(), bias.size() * sizeof(float));
      o.Input("zero_points", tz);
      o.None();
      o.Input("bias", tbias);
    }
    auto want = o.TryRun("MatMulNBits", attrs, 1, "com.microsoft", backend.get());
    REQUIRE(want.ok());
    for (int run = 0; run < 2; ++run) {
      auto got = (*ex)->Run({{"A", a}});
      INFO("accuracy_level " << level << ", " << bits << " bits, zero points and bias " << extras
                             << ", run " << run);
      REQUIRE(got.ok());
      REQUIRE(std::memcmp((*got)[0].raw(), (*want)[0].raw(), (*want)[0].nbytes()) == 0);
    }
    // Level 0 copies the codes and the scales (once each); level 4 rearranges them into
    // panels instead.
    REQUIRE(StreamedConstantCopies(*backend) == (panels ? 0 : 2));
    REQUIRE(ConstantForms(*backend) == (panels ? 1 : 0));
  }
}

TEST_CASE("MatMulNBits in f16 copies its constants once, though it reads f32 copies made per call",
          "[runtime][cpu][int8]") {
  // A and the scales in f16: the executor hands the kernel f32 copies of both, made afresh
  // at every call (MatMulNBits has no half-precision loops). The scales' copy is 256 KiB
  // (kHugePageCopyBytes): copied onto huge pages (level 0) or rearranged with the codes into
  // panels (level 4) once, not at every run (each run's copy at a new address was once
  // taken for a new constant: a copy more per run, kept for good).
  const int64_t k = 2048, n = 1024, block = 32, blocks = k / block;
  static_assert(int64_t{1024} * (2048 / 32) * 4 >= kHugePageCopyBytes);
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::string codes = RandomBytes(rng, n * k / 2);
  std::vector<double> scales(static_cast<size_t>(n * blocks));
  for (double& v : scales) v = uniform(rng) * 0.05;
  std::vector<double> a_values(static_cast<size_t>(k));
  for (double& v : a_values) v = uniform(rng);
  const ir::Tensor a_half = ir::Tensor::FromDoubles(ir::DType::kF16, {1, k}, a_values);
  Tensor a = Tensor::Allocate(ir::DType::kF16, {1, k});
  std::memcpy(a.raw(), a_half.data(), a_half.nbytes());
  for (int64_t level : {0, 4}) {
    const ir::Attributes attrs = {
        {"K", k}, {"N", n}, {"bits", int64_t{4}}, {"block_size", block}, {"accuracy_level", level}};
    ir::Graph g;
    g.opsets()[""] = 18;
    g.opsets()["com.microsoft"] = 1;
    ir::Value* x = g.AddPlaceholder("A", ir::TensorType(ir::DType::kF16, {ir::Dim(1), ir::Dim(k)}));
    ir::Value* b =
        g.AddConstant("B", ir::Tensor::FromBytes(ir::DType::kU8, {n, blocks, block / 2}, codes));
    ir::Value* s =
        g.AddConstant("scales", ir::Tensor::FromDoubles(ir::DType::kF16, {n * blocks}, scales));
    g.SetOutputs({g.AddCall("com.microsoft", "MatMulNBits", {x, b, s}, {"Y"}, attrs)->output()});
    REQUIRE(onnx::InferShapes(g).ok());
    auto backend = MakeCpuBackend(1);
    auto ex = Executor::Create(g, *backend, nullptr);
    REQUIRE(ex.ok());
    const bool panels = level == 4 && HasInt8Dot();
    REQUIRE(StreamedConstantCopies(*backend) == (panels ? 0 : 2));  // prepared
    REQUIRE(ConstantForms(*backend) == (panels ? 1 : 0));
    std::vector<uint8_t> first;
    for (int run = 0; run < 3; ++run) {
      auto got = (*ex)->Run({{"A", a}});
      INFO("accuracy_level " << level << ", run " << run);
      REQUIRE(got.ok());
      const auto* bytes = static_cast<const uint8_t*>((*got)[0].raw());
      if (run == 0) first.assign(bytes, bytes + (*got)[0].nbytes());
      REQUIRE(std::memcmp(bytes, first.data(), first.size()) == 0);
      REQUIRE(StreamedConstantCopies(*backend) == (panels ? 0 : 2));
      REQUIRE(ConstantForms(*backend) == (panels ? 1 : 0));
    }
  }
}

}  // namespace
}  // namespace tpc::runtime::cpu
