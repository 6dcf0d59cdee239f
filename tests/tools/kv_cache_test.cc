// A decoder step with a KV cache (models/gpt2_kv.onnx): compiled with the cache inputs
// and outputs split on the heads (--input-placement 'past_*=S(1)', --output-placement
// 'present_*=S(1)'), tp-run is given the FULL cache, each rank takes its heads, and the
// assembled outputs equal the unsharded run and torch's, as processes and as threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "test_util.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/runtime/tensor_io.h"

namespace {

using tpc::testing::CommandResult;
using tpc::testing::ReadFile;
using tpc::testing::RunTpCompile;
using tpc::testing::RunTpRun;
using tpc::testing::SourcePath;
using tpc::testing::TempDir;

const char* const kPlacements =
    " --input-placement 'past_*=S(1)' --output-placement 'present_*=S(1)'";

// `placements`: the flags above, or none (tp-compile finds the cache pairs itself).
std::string CompileKv(int n, const std::string& dir, const std::string& placements) {
  const std::string out = dir + "/plan";
  CommandResult r = RunTpCompile(SourcePath("models/gpt2_kv.onnx") + " --tp " + std::to_string(n) +
                                 " --quiet" + placements + " -o " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return out;
}

// The placement plan.json records for `value` among `list` ("" when it is not there).
template <typename List>
std::string PlacementIn(const List& list, const std::string& value) {
  for (const auto& vp : list) {
    if (vp.value() != value) continue;
    REQUIRE(vp.placements_size() == 1);
    const auto& p = vp.placements(0);
    switch (p.kind()) {
      case tpc::proto::Placement::SHARD:
        return "S(" + std::to_string(p.dim()) + ")";
      case tpc::proto::Placement::REPLICATE:
        return "R";
      default:
        return "P(" + p.reduce() + ")";
    }
  }
  return "";
}

// Output K of a run (`dir`/output_K.pb) against torch's (models/gpt2_kv/test_data_set_0),
// within tp-run's default tolerances.
void CheckAgainstTorch(const std::string& dir, int k) {
  INFO("output " << k);
  auto got = tpc::runtime::ReadTensorProtoFile(dir + "/output_" + std::to_string(k) + ".pb");
  auto want = tpc::runtime::ReadTensorProtoFile(
      SourcePath("models/gpt2_kv/test_data_set_0/output_" + std::to_string(k) + ".pb"));
  REQUIRE(got.ok());
  REQUIRE(want.ok());
  REQUIRE(got->tensor.shape() == want->tensor.shape());
  int64_t outside = 0;
  for (int64_t i = 0; i < want->tensor.num_elements(); ++i) {
    const float a = got->tensor.data<float>()[i], e = want->tensor.data<float>()[i];
    outside += std::abs(a - e) > 1e-5 + 1e-4 * std::abs(e);
  }
  CHECK(outside == 0);
}

// Random inputs of other sizes: the cache length is a dim of its own, and may be 0 (the
// prompt's step); both runs equal the unsharded model.
void CheckOtherSizes(const std::string& plan, const std::string& model) {
  CommandResult random = RunTpRun(plan + " --ranks threads --dim batch=3 --dim seq=2" +
                                  " --dim past=7 --check-against " + model);
  INFO(random.output);
  CHECK(random.exit_code == 0);
  CHECK_THAT(random.output, Catch::Contains("f32[3, 4, 9, 16]") &&
                                Catch::Contains("PASS: every output within tolerance"));
  CommandResult prompt = RunTpRun(plan + " --ranks threads --dim batch=2 --dim seq=4" +
                                  " --dim past=0 --check-against " + model);
  INFO(prompt.output);
  CHECK(prompt.exit_code == 0);
  CHECK_THAT(prompt.output, Catch::Contains("f32[2, 4, 4, 16]") &&
                                Catch::Contains("PASS: every output within tolerance"));
}

}  // namespace

TEST_CASE("a plan with sharded KV-cache inputs runs from the full cache", "[tools][processes]") {
  const std::string model = SourcePath("models/gpt2_kv.onnx");
  const std::string data = SourcePath("models/gpt2_kv/test_data_set_0");
  for (int n : {2, 4}) {
    for (bool flags : {true, false}) {
      INFO("--tp " << n << (flags ? " with --input/--output-placement" : " with no flags"));
      const std::string dir =
          TempDir("kv_cache_" + std::to_string(n) + (flags ? "_flags" : "_auto"));
      const std::string plan = CompileKv(n, dir, flags ? kPlacements : "");

      // Every cache input and output is split on its heads (by the globs, or found as a
      // past → Concat → present pair); the tokens and logits stay whole.
      auto manifest = tpc::plan::ReadManifest(plan);
      INFO(manifest.status().ToString());
      REQUIRE(manifest.ok());
      CHECK(PlacementIn(manifest->inputs(), "input_ids") == "R");
      CHECK(PlacementIn(manifest->outputs(), "logits") == "R");
      for (int layer = 0; layer < 2; ++layer) {
        for (const char* kv : {"key", "value"}) {
          const std::string suffix = std::string(kv) + "_" + std::to_string(layer);
          CHECK(PlacementIn(manifest->inputs(), "past_" + suffix) == "S(1)");
          CHECK(PlacementIn(manifest->outputs(), "present_" + suffix) == "S(1)");
        }
      }

      // The test data: 3 new tokens after a real cache of 5 ([2, 4, 5, 16] per tensor),
      // given whole; the assembled outputs equal the unsharded run and torch's.
      CommandResult processes = RunTpRun(plan + " --input-dir " + data + " --check-against " +
                                         model + " --output-dir " + dir + "/processes");
      INFO(processes.output);
      CHECK(processes.exit_code == 0);
      CHECK_THAT(processes.output, Catch::Contains("as processes") &&
                                       Catch::Contains("f32[2, 4, 8, 16]") &&
                                       Catch::Contains("PASS: every output within tolerance"));
      CommandResult threads =
          RunTpRun(plan + " --ranks threads --input-dir " + data + " --check-against " + model +
                   " --output-dir " + dir + "/threads");
      INFO(threads.output);
      CHECK(threads.exit_code == 0);
      CHECK_THAT(threads.output, Catch::Contains("PASS: every output within tolerance"));
      for (int k = 0; k < 5; ++k) {
        CheckAgainstTorch(dir + "/processes", k);
        CHECK(ReadFile(dir + "/processes/output_" + std::to_string(k) + ".pb") ==
              ReadFile(dir + "/threads/output_" + std::to_string(k) + ".pb"));
      }

      CheckOtherSizes(plan, model);
    }
  }
}

// A cache output the user places keeps that placement, and its input stays as placed
// (R by default): the automatic pairing never overrides a flag.
TEST_CASE("a user placement of a KV-cache output overrides the automatic head split", "[tools]") {
  const std::string dir = TempDir("kv_cache_override");
  const std::string plan = CompileKv(2, dir, " --output-placement 'present_*=R'");
  auto manifest = tpc::plan::ReadManifest(plan);
  REQUIRE(manifest.ok());
  for (int layer = 0; layer < 2; ++layer) {
    for (const char* kv : {"key", "value"}) {
      const std::string suffix = std::string(kv) + "_" + std::to_string(layer);
      CHECK(PlacementIn(manifest->inputs(), "past_" + suffix) == "R");
      CHECK(PlacementIn(manifest->outputs(), "present_" + suffix) == "R");
    }
  }
}

// The dynamo exporter's KV-cache decoder (outputs `past + seq` long, cache inputs through
// no single-input Concat): the cache pairs are found the same way, and the plan equals
// torch's outputs and the unsharded run.
TEST_CASE("the dynamo export's KV cache stays split on its heads with no flags",
          "[tools][processes]") {
  const std::string model = SourcePath("models/gpt2_kv_dynamo.onnx");
  const std::string data = SourcePath("models/gpt2_kv_dynamo/test_data_set_0");
  for (int n : {2, 4}) {
    INFO("--tp " << n);
    const std::string dir = TempDir("kv_dynamo_" + std::to_string(n));
    CommandResult compiled =
        RunTpCompile(model + " --tp " + std::to_string(n) + " --quiet -o " + dir + "/plan");
    INFO(compiled.output);
    REQUIRE(compiled.exit_code == 0);
    auto manifest = tpc::plan::ReadManifest(dir + "/plan");
    REQUIRE(manifest.ok());
    CHECK(PlacementIn(manifest->inputs(), "input_ids") == "R");
    CHECK(PlacementIn(manifest->outputs(), "logits") == "R");
    for (int layer = 0; layer < 2; ++layer) {
      for (const char* kv : {"key", "value"}) {
        const std::string suffix = std::string(kv) + "_" + std::to_string(layer);
        CHECK(PlacementIn(manifest->inputs(), "past_" + suffix) == "S(1)");
        CHECK(PlacementIn(manifest->outputs(), "present_" + suffix) == "S(1)");
      }
    }
    CommandResult run = RunTpRun(dir + "/plan --input-dir " + data + " --check-against " + model);
    INFO(run.output);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.output, Catch::Contains("PASS: every output within tolerance") &&
                               Catch::Contains("f32[2, 4, 8, 16]"));
    CheckOtherSizes(dir + "/plan", model);
  }
}
