// GPT-2's real vocabulary (50257, which no N > 1 divides): the embedding and the LM head
// are split by vocab with padding, the logits are never all-reduced, the head moves at
// most Megatron's bytes (one all-gather of the vocab-split logits), and the sharded run
// equals the unsharded one. The model is a GPT-2-shaped slice built here (tied embedding
// stored twice, as the legacy exporter writes it): a committed one would be over 2 MiB.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/exporter.h"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/tensor.h"
#include "tpc/runtime/tensor_io.h"
#include "tpc/shard/shard_pass.h"

namespace {

using tpc::ir::Dim;
using tpc::ir::DType;
using tpc::ir::Tensor;
using tpc::ir::TensorType;
using tpc::testing::CommandResult;
using tpc::testing::RunTpCompile;
using tpc::testing::RunTpRun;

constexpr int64_t kVocab = 50257;
constexpr int64_t kPaddedHidden = 16;

std::vector<float> Normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// input_ids → Gather(wte) → x + MLP(x) → MatMul(·, wteᵀ stored as its own constant).
std::string WriteVocabModel(const std::string& dir) {
  tpc::ir::Graph g;
  g.opsets()[""] = 17;
  tpc::ir::Value* ids = g.AddPlaceholder(
      "input_ids", TensorType(DType::kI64, {Dim::Symbol("batch"), Dim::Symbol("seq")}));
  const std::vector<float> wte = Normal(kVocab * kPaddedHidden, 1);
  std::vector<float> head(wte.size());
  for (int64_t v = 0; v < kVocab; ++v) {
    for (int64_t h = 0; h < kPaddedHidden; ++h) {
      head[static_cast<size_t>(h * kVocab + v)] = wte[static_cast<size_t>(v * kPaddedHidden + h)];
    }
  }
  tpc::ir::Value* table = g.AddConstant("wte", Tensor::FromFloat({kVocab, kPaddedHidden}, wte));
  tpc::ir::Value* lm = g.AddConstant("lm_head", Tensor::FromFloat({kPaddedHidden, kVocab}, head));
  tpc::ir::Value* w1 =
      g.AddConstant("fc", Tensor::FromFloat({kPaddedHidden, 4 * kPaddedHidden},
                                            Normal(4 * kPaddedHidden * kPaddedHidden, 2)));
  tpc::ir::Value* w2 =
      g.AddConstant("proj", Tensor::FromFloat({4 * kPaddedHidden, kPaddedHidden},
                                              Normal(4 * kPaddedHidden * kPaddedHidden, 3)));
  auto call = [&](const std::string& op, std::vector<tpc::ir::Value*> in, const std::string& out,
                  tpc::ir::Attributes attrs = {}) {
    return g.AddCall("", op, std::move(in), {out}, std::move(attrs), "/" + out + "/" + op)
        ->output(0);
  };
  tpc::ir::Value* x = call("Gather", {table, ids}, "embedded", {{"axis", int64_t{0}}});
  tpc::ir::Value* h = call("Tanh", {call("MatMul", {x, w1}, "fc_out")}, "act");
  tpc::ir::Value* r = call("Add", {x, call("MatMul", {h, w2}, "proj_out")}, "residual");
  tpc::ir::Value* logits = call("MatMul", {r, lm}, "logits");
  g.SetOutputs({logits});
  REQUIRE(tpc::onnx::InferShapes(g).ok());
  const std::string path = dir + "/gpt2_vocab.onnx";
  tpc::onnx::ExportOptions options;
  options.weights_file = "gpt2_vocab.weights";
  const absl::Status s = tpc::onnx::ExportModel(g, path, options);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return path;
}

TEST_CASE("vocab 50257: split by vocab with padding and the logits never all-reduced",
          "[tools][vocab]") {
  const std::string dir = tpc::testing::TempDir("vocab_padding");
  const std::string model = WriteVocabModel(dir);
  for (int64_t n : {2, 4, 8}) {
    DYNAMIC_SECTION("N=" << n) {
      const int64_t padded = (kVocab + n - 1) / n * n;
      auto graph = tpc::onnx::ImportModel(model);
      REQUIRE(graph.ok());
      auto result = tpc::shard::ShardGraph(**graph, tpc::testing::TpOptions(n));
      INFO(result.status().ToString());
      REQUIRE(result.ok());
      // The table is padded and split by vocab, and stored once: the head reads it
      // transposed through a Gemm (the exporter's transposed copy is gone).
      const tpc::ir::Value* wte = (*graph)->FindValue("wte/padded");
      REQUIRE(wte != nullptr);
      CHECK(wte->type().ToString() == "f32[" + std::to_string(padded) + ", 16]");
      CHECK(wte->sharding()->placements[0].ToString() == "S(0)");
      CHECK((*graph)->FindValue("lm_head") == nullptr);
      CHECK((*graph)->FindValue("lm_head/padded") == nullptr);
      int heads = 0;
      for (const auto& use : wte->uses()) {
        if (use.user->op_type() != "Gemm") continue;
        ++heads;
        CHECK(use.user->attr_int("transB", 0) == 1);
      }
      CHECK(heads == 1);
      // Collectives that move logits-sized values: only all-gathers, at most Megatron's
      // one all-gather of the vocab-split logits (its vocab padded to a multiple of
      // 128·N), here at the default dim sizes (batch = seq = 512).
      const double megatron_vocab =
          static_cast<double>((kVocab + 128 * n - 1) / (128 * n) * (128 * n));
      const double megatron_bytes = 512.0 * 512.0 * megatron_vocab * 4;
      double head_bytes = 0;
      for (const tpc::shard::PlannedCollective& c : result->collectives) {
        if (c.value == nullptr || !c.value->type().shape) continue;
        const Dim& last = c.value->type().shape->back();
        if (!last.is_static() || last.value() < kVocab) continue;
        INFO(c.value->name());
        CHECK(c.kind == tpc::shard::CollectiveKind::kAllGather);
        head_bytes += c.bytes;
      }
      CHECK(head_bytes > 0);
      CHECK(head_bytes <= megatron_bytes);
      // The plan runs and equals the unsharded model.
      const std::string plan = dir + "/plan" + std::to_string(n);
      CommandResult compiled = RunTpCompile(model + " --tp " + std::to_string(n) + " -o " + plan);
      INFO(compiled.output);
      REQUIRE(compiled.exit_code == 0);
      // The summary says what was rewritten before solving.
      CHECK_THAT(compiled.output, Catch::Contains("'wte' is padded from 50257 to " +
                                                  std::to_string(padded) + " rows") &&
                                      Catch::Contains("reads 'wte' transposed through a Gemm"));
      CHECK_THAT(tpc::testing::ReadFile(plan + "/report.json"), Catch::Contains("\"rewrites\""));
      CommandResult run =
          RunTpRun(plan + " --ranks threads --dim batch=2 --dim seq=5 --check-against " + model);
      INFO(run.output);
      CHECK(run.exit_code == 0);
      CHECK_THAT(run.output, Catch::Contains("PASS: every output within tolerance"));
      // The logits have the true vocabulary.
      CHECK_THAT(run.output, Catch::Contains(std::to_string(kVocab)));
      // An id in the padding is the error the unpadded model gives, not a zero row.
      tpc::runtime::Tensor bad = tpc::runtime::Tensor::Allocate(DType::kI64, {1, 2});
      bad.data<int64_t>()[0] = 7;
      bad.data<int64_t>()[1] = kVocab;  // one past the last real row, inside the padding
      const std::string bad_path = dir + "/bad_ids" + std::to_string(n) + ".npy";
      REQUIRE(tpc::runtime::WriteNpyFile(bad_path, bad).ok());
      CommandResult refused = RunTpRun(plan + " --ranks threads --input input_ids=" + bad_path);
      INFO(refused.output);
      CHECK(refused.exit_code != 0);
      CHECK_THAT(refused.output,
                 Catch::Contains("/embedded/Gather") && Catch::Contains("out of range"));
    }
  }
}

}  // namespace
