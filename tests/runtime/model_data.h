// The committed models' test data for the runtime tests: the models with a
// test_data_set_0, their inputs, and other valid data of the same shapes.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/runtime/tensor.h"
#include "tpc/runtime/tensor_io.h"

namespace tpc::runtime::testing {

inline std::map<std::string, Tensor> ReadInputs(const std::string& data) {
  std::map<std::string, Tensor> inputs;
  for (int k = 0; std::filesystem::exists(data + "/input_" + std::to_string(k) + ".pb"); ++k) {
    auto t = ReadTensorProtoFile(data + "/input_" + std::to_string(k) + ".pb");
    REQUIRE(t.ok());
    inputs[t->name] = t->tensor;
  }
  return inputs;
}

// The committed models with test data: models/NAME.onnx with models/NAME/test_data_set_0,
// and the real exports of onnxruntime-genai and optimum, models/{genai,optimum}/NAME/
// model.onnx (name "genai/NAME"), as (name, model path, data dir).
inline std::vector<std::array<std::string, 3>> ModelsWithData() {
  std::vector<std::array<std::string, 3>> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(tpc::testing::SourcePath("models"))) {
    if (entry.path().extension() != ".onnx") continue;
    const std::string name = entry.path().stem().string();
    const std::string data = tpc::testing::SourcePath("models/" + name + "/test_data_set_0");
    if (std::filesystem::exists(data)) out.push_back({name, entry.path().string(), data});
  }
  for (const std::string exporter : {"genai", "optimum"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(tpc::testing::SourcePath("models/" + exporter))) {
      const std::string data = entry.path().string() + "/test_data_set_0";
      if (std::filesystem::exists(data)) {
        out.push_back({exporter + "/" + entry.path().filename().string(),
                       entry.path().string() + "/model.onnx", data});
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether some node of `g` computes an f16 or bf16 value (a model made in half precision).
inline bool ComputesInHalf(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : n->outputs()) {
      if (v != nullptr &&
          (v->type().dtype == ir::DType::kF16 || v->type().dtype == ir::DType::kBF16)) {
        return true;
      }
    }
  }
  return false;
}

// Other data of the same shapes: floats halved, integers (token ids, masks) in reverse
// order, so every value stays valid.
inline std::map<std::string, Tensor> OtherData(const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : inputs) {
    Tensor c = Tensor::Allocate(t.dtype(), t.shape());
    const int64_t n = t.num_elements();
    const size_t size = static_cast<size_t>(ir::DTypeSize(t.dtype()));
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(c.raw() + static_cast<size_t>(i) * size,
                  t.raw() + static_cast<size_t>(n - 1 - i) * size, size);
    }
    if (t.dtype() == ir::DType::kF32) {
      for (int64_t i = 0; i < n; ++i) c.data<float>()[i] = t.data<float>()[i] * 0.5f;
    }
    out[name] = c;
  }
  return out;
}

}  // namespace tpc::runtime::testing
