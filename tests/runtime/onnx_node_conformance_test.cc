// The ONNX backend node tests (onnx/backend/test/data/node/test_*: a one-op model,
// inputs and expected outputs) run through the CPU executor: every test whose operators
// all have a CPU kernel and whose model tpc imports must pass. `make deps` puts the
// data in .cache/onnx-node-tests (from onnx 1.17.0's wheel); without it the test skips.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "catch2/catch.hpp"
#include "tpc/onnx/importer.h"
#include "tpc/onnx/model_file.h"
#include "tpc/runtime/backends.h"
#include "tpc/runtime/compare.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime {
namespace {

namespace fs = std::filesystem;

// Tests of supported operators that need what tpc deliberately lacks.
const std::set<std::string> kExcluded = {
    // Training-mode Dropout draws random masks; tpc runs inference (Dropout = identity).
    "test_dropout_random_old",
    "test_training_dropout",
    "test_training_dropout_default",
    "test_training_dropout_default_mask",
    "test_training_dropout_mask",
    "test_training_dropout_zero_ratio",
    "test_training_dropout_zero_ratio_mask",
    // String tensors: tpc has no string element type.
    "test_cast_FLOAT_to_STRING",
    // These files store bfloat16 tensors as uint16 (a quirk of onnx 1.17's test data), so
    // the inputs do not have the model's declared type.
    "test_cast_BFLOAT16_to_FLOAT",
    "test_cast_FLOAT_to_BFLOAT16",
    "test_castlike_BFLOAT16_to_FLOAT",
    "test_castlike_BFLOAT16_to_FLOAT_expanded",
    "test_castlike_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16_expanded",
    // onnx 1.17's expected output counts the padding that ceil_mode adds past the end in
    // the divisor; onnx's newer reference and onnxruntime do not (nor does tpc).
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True",
    // onnx 1.17's expected outputs wrap the int8 results that overflow (-236 becomes 20);
    // the operator saturates them (to -128), as onnx's newer reference and onnxruntime do.
    // Every element that does not overflow matches.
    "test_qlinearmatmul_2D_int8_float16",
    "test_qlinearmatmul_2D_int8_float32",
    "test_qlinearmatmul_3D_int8_float16",
    "test_qlinearmatmul_3D_int8_float32",
};

// Empty when `got` matches `want` (rtol 1e-3, atol 1e-4; NaN equals NaN). bfloat16 keeps 8
// significant bits: onnx's reference rounds to it after every step, tpc computes in f32 and
// rounds once, so a bf16 result may differ by a few of its ulps (2^-8 relative each).
std::string Mismatch(const Tensor& got, const Tensor& want) {
  const bool bf16 = want.dtype() == ir::DType::kBF16;
  const Comparison c = CompareTensors(got, want, bf16 ? 1e-2 : 1e-3, bf16 ? 1e-3 : 1e-4);
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return absl::StrCat("got ", got.TypeString(), ", expected ", want.TypeString());
  if (c.pass) return "";
  return absl::StrCat("element ", c.first_bad, ": got ", ElementAsDouble(got, c.first_bad),
                      ", expected ", ElementAsDouble(want, c.first_bad));
}

// Why a test cannot run ("" when it can): an operator without a kernel.
std::string Unsupported(const std::string& model_path, const Backend& backend) {
  auto model = onnx::ReadModelFile(model_path);
  if (!model.ok()) return "unreadable";
  for (const auto& node : model->proto.graph().node()) {
    if (node.op_type() == "Constant" && node.domain().empty()) continue;  // folded on import
    if (backend.FindKernel(node.domain(), node.op_type()) == nullptr) return node.op_type();
  }
  return "";
}

// What one folder of node tests gave.
struct NodeTestRun {
  int run = 0, passed = 0, unsupported = 0, not_imported = 0, excluded = 0;
  std::map<std::string, int> missing;  // first operator without a kernel -> tests
  std::vector<std::string> refused;    // `test: why` for each test the importer refuses
  std::vector<std::string> failures;   // `test: why` for each test run that did not pass
};

// Runs test_data_set_0 of the test in `dir`; "" when it passes, else why not.
std::string RunOne(const ir::Graph& graph, Backend& backend, const std::string& dir) {
  auto ex = Executor::Create(graph, backend, nullptr);
  if (!ex.ok()) return ex.status().ToString();
  const std::string data = dir + "/test_data_set_0";
  std::map<std::string, Tensor> inputs;
  const auto& specs = (*ex)->inputs();
  for (size_t k = 0; k < specs.size(); ++k) {
    auto t = ReadTensorProtoFile(absl::StrCat(data, "/input_", k, ".pb"));
    if (!t.ok()) return absl::StrCat("input ", k, ": ", t.status().ToString());
    inputs[specs[k].name] = t->tensor;
  }
  auto out = (*ex)->Run(inputs);
  if (!out.ok()) return out.status().ToString();
  for (size_t k = 0; k < out->size(); ++k) {
    auto want = ReadTensorProtoFile(absl::StrCat(data, "/output_", k, ".pb"));
    if (!want.ok()) return want.status().ToString();
    std::string m = Mismatch((*out)[k], want->tensor);
    if (!m.empty()) return absl::StrCat("output ", k, ": ", m);
  }
  return "";
}

NodeTestRun RunNodeTests(const std::string& root, Backend& backend_ref) {
  std::vector<std::string> tests;
  for (const auto& e : fs::directory_iterator(root)) tests.push_back(e.path().filename().string());
  std::sort(tests.begin(), tests.end());
  Backend* backend = &backend_ref;
  NodeTestRun r;
  for (const std::string& name : tests) {
    const std::string dir = root + "/" + name;
    const std::string model_path = dir + "/model.onnx";
    if (!fs::exists(model_path) || !fs::exists(dir + "/test_data_set_0")) continue;
    if (kExcluded.count(name)) {
      ++r.excluded;
      continue;
    }
    if (std::string op = Unsupported(model_path, *backend); !op.empty()) {
      ++r.unsupported;
      ++r.missing[op];
      continue;
    }
    auto graph = onnx::ImportModel(model_path);
    if (!graph.ok()) {
      ++r.not_imported;
      std::string why(graph.status().message());
      if (absl::StartsWith(why, model_path)) why = why.substr(model_path.size() + 2);
      r.refused.push_back(absl::StrCat(name, ": ", why));
      continue;
    }
    ++r.run;
    std::string why = RunOne(**graph, *backend, dir);
    if (why.empty()) {
      ++r.passed;
    } else {
      r.failures.push_back(absl::StrCat(name, ": ", why));
    }
  }
  return r;
}

NodeTestRun RunNodeTests(const std::string& root) {
  auto backend = MakeCpuBackend(1);
  return RunNodeTests(root, *backend);
}

// The summary line, then the operators without a kernel (by tests) and the refusals.
std::string Summary(const NodeTestRun& r) {
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [op, n] : r.missing) by_count.emplace_back(-n, op);
  std::sort(by_count.begin(), by_count.end());
  std::vector<std::string> missing;
  for (const auto& [n, op] : by_count) missing.push_back(absl::StrCat(op, " ", -n));
  return absl::StrCat("node tests: ", r.run, " run, ", r.passed, " passed, ", r.failures.size(),
                      " failed; ", r.unsupported, " use an operator without a CPU kernel, ",
                      r.not_imported, " are refused by the importer, ", r.excluded,
                      " excluded\nwithout a kernel (tests): ", absl::StrJoin(missing, ", "),
                      "\nrefused:\n  ", absl::StrJoin(r.refused, "\n  "));
}

TEST_CASE("ONNX backend node tests pass for every supported operator", "[runtime][conformance]") {
  const std::string root = TPC_SOURCE_DIR "/.cache/onnx-node-tests/node";
  if (!fs::is_directory(root)) {
    WARN("skipped: " << root << " is missing (make deps fetches the ONNX node tests)");
    return;
  }
  const NodeTestRun r = RunNodeTests(root);
  WARN("onnx 1.17 " << Summary(r));
  INFO("failing:\n  " << absl::StrJoin(r.failures, "\n  "));
  CHECK(r.run > 0);
  REQUIRE(r.failures.empty());
}

// onnx 1.17's data predates opset 23 (Attention, RotaryEmbedding, RMSNormalization): these
// tests are generated from the installed onnx package by
// tests/runtime/generate_opset23_node_tests.py into .cache/onnx-node-tests-23.
TEST_CASE("ONNX backend node tests of the opset 23 operators pass", "[runtime][conformance]") {
  const std::string root = TPC_SOURCE_DIR "/.cache/onnx-node-tests-23/node";
  if (!fs::is_directory(root)) {
    WARN("skipped: " << root << " is missing (python3 "
                     << "tests/runtime/generate_opset23_node_tests.py writes it)");
    return;
  }
  const NodeTestRun r = RunNodeTests(root);
  WARN("opset 23 " << Summary(r));
  INFO("failing:\n  " << absl::StrJoin(r.failures, "\n  "));
  CHECK(r.run > 0);
  REQUIRE(r.failures.empty());
}

// onnxruntime's com.microsoft operators (and the ones it registers in the default domain,
// SimplifiedLayerNormalization) have no ONNX test data: onnxruntime is their reference.
// tests/runtime/generate_contrib_node_tests.py writes one-op tests with its outputs into
// .cache/ort-contrib-node-tests.
TEST_CASE("onnxruntime's contrib operators give onnxruntime's outputs", "[runtime][conformance]") {
  const std::string root = TPC_SOURCE_DIR "/.cache/ort-contrib-node-tests/node";
  if (!fs::is_directory(root)) {
    WARN("skipped: " << root << " is missing (python3 "
                     << "tests/runtime/generate_contrib_node_tests.py writes it)");
    return;
  }
  const NodeTestRun r = RunNodeTests(root);
  WARN("com.microsoft " << Summary(r));
  INFO("failing:\n  " << absl::StrJoin(r.failures, "\n  "));
  CHECK(r.run > 0);
  // Every generated test names an operator tpc implements: none may be skipped.
  CHECK(r.unsupported == 0);
  CHECK(r.not_imported == 0);
  REQUIRE(r.failures.empty());
}

// The same tests through the CUDA backend (its kernels, and the CPU kernels on host copies
// for the rest): on a GPU, every test the CPU backend passes must pass.
TEST_CASE("ONNX backend node tests pass on the CUDA backend", "[runtime][conformance][cuda]") {
  if (!CudaBuiltIn()) {
    WARN("skipped: this build has no CUDA backend");
    return;
  }
  if (GpuCount() == 0) {
    WARN("skipped: no GPU here (tools/gpu_check.sh runs this on a GPU machine)");
    return;
  }
  auto backend = MakeBackend({.name = "cuda", .threads = 1});
  REQUIRE(backend.ok());
  for (const char* sub : {"/.cache/onnx-node-tests/node", "/.cache/onnx-node-tests-23/node",
                          "/.cache/ort-contrib-node-tests/node"}) {
    // TPC_SOURCE_ROOT: the checkout's place on a GPU machine the tests were carried to.
    const char* moved = std::getenv("TPC_SOURCE_ROOT");
    const std::string root = std::string(moved != nullptr ? moved : TPC_SOURCE_DIR) + sub;
    if (!fs::is_directory(root)) {
      WARN("skipped " << root << ": missing");
      continue;
    }
    const NodeTestRun r = RunNodeTests(root, **backend);
    WARN("cuda " << root << ": " << Summary(r));
    INFO("failing:\n  " << absl::StrJoin(r.failures, "\n  "));
    CHECK(r.run > 0);
    CHECK(r.failures.empty());
  }
}

}  // namespace
}  // namespace tpc::runtime
