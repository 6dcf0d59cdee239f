// Greedy generation (`tp-run --generate`): the prefill and the decode steps of a KV-cache
// decoder, each step's presents fed back as the next step's pasts on every rank. The
// ranks generate the unsharded model's token ids, their cache never leaves them (each
// rank's present holds its heads only), and usage errors are clear.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/runtime/generate.h"
#include "tpc/runtime/placement_io.h"
#include "tpc/runtime/plan_runner.h"

namespace {

using tpc::testing::CommandResult;
using tpc::testing::RunTpCompile;
using tpc::testing::RunTpRun;
using tpc::testing::SourcePath;
using tpc::testing::TempDir;
namespace rt = tpc::runtime;

std::string Compile(const std::string& model, int n) {
  const std::string out = TempDir("generate_" + model + std::to_string(n)) + "/plan";
  CommandResult r = RunTpCompile(SourcePath("models/" + model + ".onnx") + " --tp " +
                                 std::to_string(n) + " --quiet -o " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return out;
}

}  // namespace

TEST_CASE("tp-run --generate gives the unsharded model's token ids", "[tools][generate]") {
  for (const char* model : {"gpt2_kv", "gpt2_kv_dynamo"}) {
    for (int n : {2, 4}) {
      DYNAMIC_SECTION(model << " N=" << n) {
        const std::string plan = Compile(model, n);
        for (const char* ranks : {"processes", "threads"}) {
          INFO(ranks);
          CommandResult r =
              RunTpRun(plan + " --generate 16 --prompt '10 20 30; 40 50 60'" + " --ranks " + ranks +
                       " --check-against " + SourcePath(std::string("models/") + model + ".onnx"));
          INFO(r.output);
          CHECK(r.exit_code == 0);
          CHECK_THAT(r.output, Catch::Contains("token ids equal") &&
                                   Catch::Contains("tokens (row 1): ") &&
                                   Catch::Contains("15 decode step(s)"));
        }
      }
    }
  }
}

// The library loop on the threads of one process: every rank's present holds its own heads
// (4 heads on 2 ranks: 2 each) and grows by the tokens of each step; every rank generates
// the same ids.
TEST_CASE("generation keeps each rank's cache on the rank", "[tools][generate]") {
  const std::string plan = Compile("gpt2_kv", 2);
  auto graphs = rt::LoadPlan(plan);
  REQUIRE(graphs.ok());
  std::vector<tpc::ir::Graph*> ptrs;
  for (auto& g : *graphs) ptrs.push_back(g.get());
  auto runner = rt::PlanRunner::Create(ptrs);
  REQUIRE(runner.ok());
  rt::Tensor prompt = rt::Tensor::Allocate(tpc::ir::DType::kI64, {1, 3});
  for (int64_t i = 0; i < 3; ++i) prompt.data<int64_t>()[i] = 7 + i;
  std::vector<std::vector<std::vector<int64_t>>> present_shapes(2);
  std::vector<rt::GenerateResult> results(2);
  absl::Status s =
      (*runner)->RunOnRanks([&](int r, rt::Executor& ex, rt::Communicator&) -> absl::Status {
        auto io = rt::FindDecoderIo(ex.inputs(), ex.outputs());
        if (!io.ok()) return io.status();
        rt::RankStep step =
            [&](const std::map<std::string, rt::Tensor>& feed,
                const rt::StepKind& kind) -> absl::StatusOr<std::map<std::string, rt::Tensor>> {
          if (kind.every_position) {
            return absl::InternalError("unpadded: the last position suffices");
          }
          auto out = ex.Run(feed);
          if (!out.ok()) return out.status();
          std::map<std::string, rt::Tensor> named;
          for (size_t k = 0; k < out->size(); ++k) named[ex.outputs()[k].name] = (*out)[k];
          present_shapes[static_cast<size_t>(r)].push_back(named.at("present_key_0").shape());
          return named;
        };
        auto g = rt::Generate(*io, ex.inputs(), ex.outputs(), prompt, 4, step);
        if (!g.ok()) return g.status();
        results[static_cast<size_t>(r)] = *g;
        return absl::OkStatus();
      });
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(results[0].tokens == results[1].tokens);
  REQUIRE(results[0].tokens.size() == 1);
  CHECK(results[0].tokens[0].size() == 4);
  for (int r = 0; r < 2; ++r) {
    const auto& shapes = present_shapes[static_cast<size_t>(r)];
    REQUIRE(shapes.size() == 4);
    for (size_t step = 0; step < shapes.size(); ++step) {
      // [batch 1, 2 of the 4 heads, 3 + step tokens, head dim 16]
      CHECK(shapes[step] == std::vector<int64_t>{1, 2, 3 + static_cast<int64_t>(step), 16});
    }
  }
}

// The cache split by batch, or a present placed otherwise than its past (gathered, then
// cut again as the past): the same ids as the unsharded model.
TEST_CASE("tp-run --generate runs caches split by batch or placed apart", "[tools][generate]") {
  for (const char* placements :
       {" --divisible batch --input-placement 'past_*=S(0)' --output-placement 'present_*=S(0)'",
        " --input-placement 'past_*=S(1)' --output-placement 'present_*=R'"}) {
    INFO(placements);
    const std::string out = TempDir("generate_placed") + "/plan";
    CommandResult c =
        RunTpCompile(SourcePath("models/gpt2_kv.onnx") + " --tp 2 --quiet -o " + out + placements);
    INFO(c.output);
    REQUIRE(c.exit_code == 0);
    CommandResult r =
        RunTpRun(out + " --generate 8 --prompt '10 20 30; 40 50 60' --check-against " +
                 SourcePath("models/gpt2_kv.onnx"));
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("token ids equal"));
  }
}

TEST_CASE("tp-run --generate refuses what it cannot run, saying why", "[tools][generate]") {
  const std::string plan = Compile("gpt2_kv", 2);
  struct Case {
    std::string args, message;
  };
  const std::string gpt2 = Compile("gpt2", 2);
  const std::string sp = TempDir("generate_sp") + "/plan";
  REQUIRE(RunTpCompile(SourcePath("models/gpt2_kv.onnx") +
                       " --tp 2 --quiet --sequence-parallel -o " + sp)
              .exit_code == 0);
  for (const Case& c : std::vector<Case>{
           {plan + " --generate 4", "--prompt or --input-ids"},
           {plan + " --generate 0 --prompt '1 2'", "--generate must be a positive"},
           {plan + " --generate 4 --prompt '1 x'", "'x' is not a token id"},
           {plan + " --generate 4 --prompt '1 2; 3'", "need the model's attention_mask"},
           {plan + " --generate 4 --prompt '1 2;'", "a row (';'-separated) is empty"},
           {plan + " --prompt '1 2'", "go with --generate"},
           {plan + " --generate 4 --prompt '1 2' --repeat 3", "--repeat does not go with"},
           {gpt2 + " --generate 4 --prompt '1 2' --ranks threads", "no KV cache"},
           {sp + " --generate 4 --prompt '1 2'", "--sequence-parallel"},
           {sp + " --generate 4 --prompt '1 2' --ranks threads", "--sequence-parallel"},
       }) {
    INFO(c.args);
    CommandResult r = RunTpRun(c.args);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains(c.message));
  }
}

namespace {

// The generated ids of each row of `prompt` ("tokens (row K): ..." lines), or a failure.
std::vector<std::string> Rows(const std::string& plan, const std::string& prompt,
                              const std::string& more = "") {
  CommandResult r = RunTpRun(plan + " --generate 6 --prompt '" + prompt + "'" + more);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> rows;
  for (size_t at = r.output.find("tokens (row "); at != std::string::npos;
       at = r.output.find("tokens (row ", at + 1)) {
    const size_t colon = r.output.find(':', at);
    rows.push_back(r.output.substr(colon, r.output.find('\n', colon) - colon));
  }
  return rows;
}

}  // namespace

// Prompts of different lengths in one batch: each row generates what it generates alone.
// Optimum's exports mask the padding at the rows' starts (position ids, where the model
// takes them, from each row's first token); onnxruntime-genai's GroupQueryAttention takes
// each row from its start, so their rows are padded at the ends.
TEST_CASE("tp-run --generate: a batch of prompts of different lengths = each alone",
          "[tools][generate]") {
  const std::vector<std::string> prompts = {"5 6 7 8 9", "11 12", "3 4 5"};
  for (const auto& [model, n] :
       std::vector<std::pair<std::string, int>>{{"optimum/llama", 1},
                                                {"optimum/gemma", 2},
                                                {"genai/llama_fp32", 1},
                                                {"genai/gemma_int4", 2},
                                                {"genai/lfm2moe_fp32", 2}}) {
    INFO(model << " N=" << n);
    const std::string plan = TempDir("generate_padded") + "/plan";
    const std::string onnx = SourcePath("models/" + model + "/model.onnx");
    CommandResult c = RunTpCompile(onnx + " --tp " + std::to_string(n) + " --quiet -o " + plan);
    INFO(c.output);
    REQUIRE(c.exit_code == 0);
    const std::vector<std::string> batch =
        Rows(plan, prompts[0] + "; " + prompts[1] + "; " + prompts[2], " --check-against " + onnx);
    REQUIRE(batch.size() == prompts.size());
    for (size_t b = 0; b < prompts.size(); ++b) {
      INFO("row " << b << ": " << prompts[b]);
      const std::vector<std::string> alone = Rows(plan, prompts[b]);
      REQUIRE(alone.size() == 1);
      CHECK(batch[b] == alone[0]);
    }
  }
}

TEST_CASE("rt::Generate refuses padding inside a row or a row of padding only",
          "[tools][generate]") {
  rt::DecoderIo io;
  io.input_ids = "input_ids";
  io.attention_mask = "attention_mask";
  io.cache.push_back({"past_key_0", "present_key_0"});
  io.logits = "logits";
  const rt::RankStep never =
      [](const std::map<std::string, rt::Tensor>&,
         const rt::StepKind&) -> absl::StatusOr<std::map<std::string, rt::Tensor>> {
    FAIL("ran the model");
    return std::map<std::string, rt::Tensor>{};
  };
  for (const auto& [ids, message] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{-1, 5, -1, 7, 8, 9}, "row 0: token 2 is -1"},
           {{-1, -1, -1, 7, 8, 9}, "prompt row 0 holds no token"},
           {{3, 4, 5, 7, -2, 9}, "row 1: token 1 is -2"}}) {
    rt::Tensor prompt = rt::Tensor::Allocate(tpc::ir::DType::kI64, {2, 3});
    std::copy(ids.begin(), ids.end(), prompt.data<int64_t>());
    auto g = rt::Generate(io, {}, {}, prompt, 2, never);
    INFO(g.status().ToString());
    CHECK_FALSE(g.ok());
    CHECK_THAT(std::string(g.status().message()), Catch::Contains(message));
  }
}

// A state (LFM2's convolution state) holds each row's last positions, padding included:
// rows of different lengths generate one at a time, each from a prefill of its own
// tokens alone (batch 1, its own empty state), and the results join as one batch's.
TEST_CASE("rt::Generate: with a state, rows of different lengths generate alone",
          "[tools][generate]") {
  using tpc::ir::Dim;
  using tpc::ir::DType;
  using tpc::ir::TensorType;
  rt::DecoderIo io;
  io.input_ids = "input_ids";
  io.attention_mask = "attention_mask";
  io.cache.push_back({.past = "past.0.conv", .present = "present.0.conv", .state = true});
  io.logits = "logits";
  const Dim batch = Dim::Symbol("batch"), seq = Dim::Symbol("seq");
  const std::vector<rt::IoSpec> inputs = {
      {"input_ids", TensorType(DType::kI64, {batch, seq})},
      {"attention_mask", TensorType(DType::kI64, {batch, Dim::Symbol("total")})},
      {"past.0.conv", TensorType(DType::kF32, {batch, 4, 3})}};
  const std::vector<rt::IoSpec> outputs = {
      {"logits", TensorType(DType::kF32, {batch, seq, 5})},
      {"present.0.conv", TensorType(DType::kF32, {batch, 4, 3})}};
  struct Call {
    bool prefill;
    std::vector<int64_t> ids;
    float state;  // the state's first element: the row's tokens so far, summed
  };
  std::vector<Call> calls;
  // Logits whose argmax is (last id + 1) % 5; the state sums the ids it has seen.
  const rt::RankStep step =
      [&](const std::map<std::string, rt::Tensor>& feed,
          const rt::StepKind& kind) -> absl::StatusOr<std::map<std::string, rt::Tensor>> {
    const rt::Tensor& ids = feed.at("input_ids");
    const rt::Tensor& past = feed.at("past.0.conv");
    REQUIRE(ids.dim(0) == 1);
    REQUIRE(past.dim(0) == 1);
    const int64_t n = ids.dim(1);
    calls.push_back(
        {kind.prefill, {ids.data<int64_t>(), ids.data<int64_t>() + n}, past.data<float>()[0]});
    rt::Tensor logits = rt::Tensor::Allocate(DType::kF32, {1, n, 5});
    logits.data<float>()[(n - 1) * 5 + (ids.data<int64_t>()[n - 1] + 1) % 5] = 1;
    rt::Tensor present = rt::Tensor::Allocate(DType::kF32, {1, 4, 3});
    present.data<float>()[0] = past.data<float>()[0];
    for (int64_t i = 0; i < n; ++i) {
      present.data<float>()[0] += static_cast<float>(ids.data<int64_t>()[i]);
    }
    return std::map<std::string, rt::Tensor>{{"logits", logits}, {"present.0.conv", present}};
  };
  rt::Tensor prompt = rt::Tensor::Allocate(DType::kI64, {2, 3});
  const std::vector<int64_t> ids = {-1, -1, 3, 1, 2, 4};
  std::copy(ids.begin(), ids.end(), prompt.data<int64_t>());
  auto g = rt::Generate(io, inputs, outputs, prompt, 2, step);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  CHECK(g->tokens == std::vector<std::vector<int64_t>>{{4, 0}, {0, 1}});
  CHECK(g->rows_one_at_a_time);
  REQUIRE(calls.size() == 4);
  CHECK(calls[0].prefill);
  CHECK(calls[0].ids == std::vector<int64_t>{3});
  CHECK(calls[0].state == 0);
  CHECK_FALSE(calls[1].prefill);
  CHECK(calls[1].ids == std::vector<int64_t>{4});
  CHECK(calls[1].state == 3);
  CHECK(calls[2].prefill);
  CHECK(calls[2].ids == std::vector<int64_t>{1, 2, 4});
  CHECK(calls[2].state == 0);  // its own empty state, not row 0's
  CHECK(calls[3].ids == std::vector<int64_t>{0});
  CHECK(calls[3].state == 7);
  REQUIRE(g->last_logits.dim(0) == 2);
  CHECK(g->last_logits.data<float>()[0] == 1);      // row 0's last step read 4: argmax 0
  CHECK(g->last_logits.data<float>()[5 + 1] == 1);  // row 1's read 0: argmax 1
}

// Qwen 3.5's position_ids are M-RoPE's [3, batch, seq]: every stream holds the tokens'
// positions (text only), the prefill's from 0 and a step's from the tokens so far.
TEST_CASE("rt::Generate feeds M-RoPE's three position streams", "[tools][generate]") {
  using tpc::ir::Dim;
  using tpc::ir::DType;
  using tpc::ir::TensorType;
  const Dim batch = Dim::Symbol("batch"), seq = Dim::Symbol("seq");
  const std::vector<rt::IoSpec> inputs = {
      {"input_ids", TensorType(DType::kI64, {batch, seq})},
      {"position_ids", TensorType(DType::kI64, {3, batch, seq})},
      {"past.0.recurrent", TensorType(DType::kF32, {batch, 2, 4, 4})}};
  const std::vector<rt::IoSpec> outputs = {
      {"logits", TensorType(DType::kF32, {batch, seq, 5})},
      {"present.0.recurrent", TensorType(DType::kF32, {batch, 2, 4, 4})}};
  auto io = rt::FindDecoderIo(inputs, outputs);
  REQUIRE(io.ok());
  CHECK(io->position_streams == 3);
  std::vector<std::vector<int64_t>> seen;
  const rt::RankStep step =
      [&](const std::map<std::string, rt::Tensor>& feed,
          const rt::StepKind&) -> absl::StatusOr<std::map<std::string, rt::Tensor>> {
    const rt::Tensor& pos = feed.at("position_ids");
    const rt::Tensor& ids = feed.at("input_ids");
    REQUIRE(pos.shape() == std::vector<int64_t>{3, ids.dim(0), ids.dim(1)});
    seen.emplace_back(pos.data<int64_t>(), pos.data<int64_t>() + pos.num_elements());
    const int64_t b = ids.dim(0), n = ids.dim(1);
    rt::Tensor logits = rt::Tensor::Allocate(DType::kF32, {b, n, 5});
    for (int64_t r = 0; r < b; ++r) logits.data<float>()[(r * n + n - 1) * 5 + 1] = 1;
    return std::map<std::string, rt::Tensor>{
        {"logits", logits},
        {"present.0.recurrent", rt::Tensor::Allocate(DType::kF32, {b, 2, 4, 4})}};
  };
  rt::Tensor prompt = rt::Tensor::Allocate(DType::kI64, {2, 2});
  auto g = rt::Generate(*io, inputs, outputs, prompt, 2, step);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  REQUIRE(seen.size() == 2);
  // [3, 2 rows, 2 tokens], then [3, 2 rows, 1 token] at position 2.
  CHECK(seen[0] == std::vector<int64_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  CHECK(seen[1] == std::vector<int64_t>{2, 2, 2, 2, 2, 2});
  auto symbolic = inputs;
  symbolic[1].type = TensorType(DType::kI64, {Dim::Symbol("s"), batch, seq});
  auto bad = rt::FindDecoderIo(symbolic, outputs);
  CHECK_FALSE(bad.ok());
}
