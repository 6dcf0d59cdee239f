// Kernel tests' helper: a one-op graph run through shape inference and the CPU executor.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/executor.h"

namespace tpc::runtime::testing {

inline Tensor F32(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t = Tensor::Allocate(ir::DType::kF32, std::move(shape));
  REQUIRE(static_cast<int64_t>(v.size()) == t.num_elements());
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}
inline Tensor I64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  Tensor t = Tensor::Allocate(ir::DType::kI64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
inline std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.num_elements()};
}

// A one-op graph over placeholders (given inputs) and constants.
struct OneOp {
  ir::Graph g;
  std::map<std::string, Tensor> feeds;
  std::vector<ir::Value*> ins;

  explicit OneOp(int64_t opset = 18) { g.opsets()[""] = opset; }
  void Input(const std::string& name, Tensor t) {
    std::vector<ir::Dim> dims(t.shape().begin(), t.shape().end());
    ins.push_back(g.AddPlaceholder(name, ir::TensorType(t.dtype(), dims)));
    feeds[name] = t;
  }
  void Ints(std::vector<int64_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    ins.push_back(g.AddConstant("c" + std::to_string(ins.size()), ir::Tensor::FromInt64({n}, v)));
  }
  void None() { ins.push_back(nullptr); }
  // The output's type, for ops that shape inference does not know (the fusion pass's,
  // which exist only at run time): set, it is not inferred.
  std::optional<ir::TensorType> output_type;
  std::vector<Tensor> Run(const std::string& op, ir::Attributes attrs = {}, int outputs = 1) {
    auto out = TryRun(op, std::move(attrs), outputs);
    INFO(out.status().ToString());
    REQUIRE(out.ok());
    return *out;
  }
  // The run's outputs or its error; `domain` "tpc" for tpc's own ops.
  // `backend`: the one to run on (default: a CPU backend of 2 threads).
  absl::StatusOr<std::vector<Tensor>> TryRun(const std::string& op, ir::Attributes attrs = {},
                                             int outputs = 1, const std::string& domain = "",
                                             Backend* backend = nullptr) {
    std::vector<std::string> names;
    for (int i = 0; i < outputs; ++i) names.push_back("y" + std::to_string(i));
    if (!domain.empty()) g.opsets()[domain] = 1;
    ir::Node* n = g.AddCall(domain, op, ins, names, std::move(attrs), "the_op");
    g.SetOutputs(n->outputs());
    if (output_type) {
      n->output()->set_type(*output_type);
    } else {
      REQUIRE(onnx::InferShapes(g).ok());
    }
    std::unique_ptr<Backend> cpu;
    if (backend == nullptr) {
      cpu = MakeCpuBackend(2);
      backend = cpu.get();
    }
    auto ex = Executor::Create(g, *backend, nullptr);
    REQUIRE(ex.ok());
    return (*ex)->Run(feeds);
  }
};

}  // namespace tpc::runtime::testing
