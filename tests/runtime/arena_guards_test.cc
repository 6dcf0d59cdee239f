// The arena's guards (ExecutorOptions::guard_bytes): a kernel that writes just outside its
// output, where the next value of the one arena allocation lies (AddressSanitizer sees
// nothing there), fails the run naming its node; guards change no result.
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/arena_guards.h"
#include "tpc/runtime/executor.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;

// x -> Neg -> Abs -> Neg: the first two values are the arena's.
std::unique_ptr<ir::Graph> Chain() {
  auto g = std::make_unique<ir::Graph>();
  g->opsets()[""] = 18;
  ir::Value* v = g->AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(4), Dim(64)}));
  const char* ops[] = {"Neg", "Abs", "Neg"};
  for (int i = 0; i < 3; ++i) {
    v = g->AddCall("", ops[i], {v}, {"v" + std::to_string(i)})->output();
  }
  g->SetOutputs({v});
  REQUIRE(onnx::InferShapes(*g).ok());
  return g;
}

// y = f(x) elementwise, for the kernels below; y's data.
template <typename F>
absl::StatusOr<float*> Elementwise(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape()));
  auto* out = reinterpret_cast<float*>(y->raw());
  const auto* in = reinterpret_cast<const float*>(x.raw());
  for (int64_t i = 0; i < x.num_elements(); ++i) out[i] = f(in[i]);
  return out;
}

// Where a broken Neg writes one element outside its output (0: nowhere; -1: before it).
int g_stray = 0;

absl::Status StrayNeg(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(float* out, Elementwise(ctx, [](float v) { return -v; }));
  const int64_t n = ctx.input(0).num_elements();
  if (g_stray > 0) out[n + g_stray - 1] = 1.0f;
  if (g_stray < 0) out[-1] = 1.0f;
  return absl::OkStatus();
}

// The CPU backend with some operators' kernels replaced.
class SwappedBackend final : public Backend {
 public:
  explicit SwappedBackend(std::map<std::string, KernelFn> swapped) : cpu_(MakeCpuBackend(1)) {
    for (const auto& [op, fn] : swapped) kernels_[op] = Kernel{.fn = fn};
  }
  std::string name() const override { return "cpu"; }
  const Kernel* FindKernel(std::string_view domain, std::string_view op) const override {
    auto it = kernels_.find(std::string(op));
    return it != kernels_.end() ? &it->second : cpu_->FindKernel(domain, op);
  }
  void* Allocate(size_t bytes) override { return cpu_->Allocate(bytes); }
  void Free(void* p) override { cpu_->Free(p); }
  void CopyFromHost(void* d, const void* s, size_t n) override { cpu_->CopyFromHost(d, s, n); }
  void CopyToHost(void* d, const void* s, size_t n) override { cpu_->CopyToHost(d, s, n); }
  void Copy(void* d, const void* s, size_t n) override { cpu_->Copy(d, s, n); }
  ThreadPool& pool() override { return cpu_->pool(); }

 private:
  std::unique_ptr<Backend> cpu_;
  std::map<std::string, Kernel> kernels_;
};

Tensor Input() {
  Tensor x = Tensor::Allocate(DType::kF32, {4, 64});
  for (int64_t i = 0; i < x.num_elements(); ++i)
    x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  return x;
}

TEST_CASE("A kernel that writes outside its arena value fails the run with guards",
          "[runtime][memory]") {
  auto g = Chain();
  SwappedBackend backend({{"Neg", StrayNeg}});
  for (int stray : {1, 16, -1}) {
    g_stray = stray;
    auto ex = Executor::Create(*g, backend, nullptr, {.guard_bytes = 64});
    REQUIRE(ex.ok());
    auto out = (*ex)->Run({{"x", Input()}});
    INFO("stray " << stray << ": " << out.status().ToString());
    REQUIRE(!out.ok());
    const std::string m(out.status().message());
    // The first Neg, writing its output v0.
    CHECK_THAT(m, Catch::Contains("Neg") && Catch::Contains("writing 'v0'") &&
                      Catch::Contains("TPC_ARENA_GUARDS"));
    CHECK_THAT(m, Catch::Contains(stray < 0 ? "4 byte(s) before the value"
                                            : std::to_string(4 * (stray - 1)) +
                                                  " byte(s) past the end of the value"));
  }
  g_stray = 0;
  auto ex = Executor::Create(*g, backend, nullptr, {.guard_bytes = 64});
  REQUIRE(ex.ok());
  CHECK((*ex)->Run({{"x", Input()}}).ok());
}

// Abs that notes where its output ends, and Neg that writes one element there (a value
// neither its input nor its output).
float* g_abs_end = nullptr;
absl::Status NotedAbs(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(float* out, Elementwise(ctx, [](float v) { return v < 0 ? -v : v; }));
  g_abs_end = out + ctx.input(0).num_elements();
  return absl::OkStatus();
}
absl::Status FarNeg(KernelContext& ctx) {
  TPC_RETURN_IF_ERROR(Elementwise(ctx, [](float v) { return -v; }).status());
  if (g_abs_end == nullptr) return absl::InternalError("Neg ran before Abs");
  *g_abs_end = 1.0f;
  return absl::OkStatus();
}

TEST_CASE("On the host, a write into any live value's guard fails the step that made it",
          "[runtime][memory]") {
  // a = Abs(x), b = Neg(x), Add(a, b): Neg runs while `a`, not its own, is alive.
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(4), Dim(64)}));
  ir::Value* a = g.AddCall("", "Abs", {x}, {"a"})->output();
  ir::Value* b = g.AddCall("", "Neg", {x}, {"b"})->output();
  g.SetOutputs({g.AddCall("", "Add", {a, b}, {"sum"})->output()});
  REQUIRE(onnx::InferShapes(g).ok());
  SwappedBackend backend({{"Neg", FarNeg}, {"Abs", NotedAbs}});
  g_abs_end = nullptr;
  auto ex = Executor::Create(g, backend, nullptr, {.guard_bytes = 64});
  REQUIRE(ex.ok());
  auto out = (*ex)->Run({{"x", Input()}});
  INFO(out.status().ToString());
  REQUIRE(!out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("(Neg)") &&
                                                      Catch::Contains("while 'a' was alive") &&
                                                      Catch::Contains("0 byte(s) past the end"));
}

TEST_CASE("Guards change no result, only the arena's size", "[runtime][memory]") {
  auto g = Chain();
  auto cpu = MakeCpuBackend(1);
  std::vector<std::vector<float>> results;
  std::vector<int64_t> arenas;
  for (int64_t guard : {int64_t{0}, int64_t{64}, int64_t{256}}) {
    auto ex = Executor::Create(*g, *cpu, nullptr, {.guard_bytes = guard});
    REQUIRE(ex.ok());
    auto out = (*ex)->Run({{"x", Input()}});
    REQUIRE(out.ok());
    const Tensor& y = (*out)[0];
    results.emplace_back(y.data<float>(), y.data<float>() + y.num_elements());
    arenas.push_back((*ex)->last_stats().arena_bytes);
  }
  CHECK(results[1] == results[0]);
  CHECK(results[2] == results[0]);
  // Two values alive at once, each with two guards.
  CHECK(arenas[1] == arenas[0] + 2 * 2 * 64);
  CHECK(arenas[2] == arenas[0] + 2 * 2 * 256);
}

TEST_CASE("TPC_ARENA_GUARDS asks for guards of whole cache lines", "[runtime][memory]") {
  auto guards = [](const char* v) {
    const tpc::testing::ScopedEnv env("TPC_ARENA_GUARDS", v);
    return ArenaGuardsFromEnvironment();
  };
  CHECK(guards(nullptr) == 0);
  CHECK(guards("") == 0);
  CHECK(guards("0") == 0);
  CHECK(guards("nonsense") == 0);
  CHECK(guards("1") == 64);
  CHECK(guards("256") == 256);
  CHECK(guards("100") == 128);
  CHECK(guards("999999999") == 1 << 20);
  CHECK(guards("9223372036854775807") == 1 << 20);
}

TEST_CASE("Guards of a size the arena cannot keep aligned are rounded, bad ones refused",
          "[runtime][memory]") {
  auto g = Chain();
  auto cpu = MakeCpuBackend(1);
  for (int64_t bad : {int64_t{-64}, kMaxArenaGuard + 1}) {
    auto ex = Executor::Create(*g, *cpu, nullptr, {.guard_bytes = bad});
    REQUIRE(!ex.ok());
    CHECK_THAT(std::string(ex.status().message()), Catch::Contains("guard_bytes"));
  }
  auto ex = Executor::Create(*g, *cpu, nullptr, {.guard_bytes = 10});
  REQUIRE(ex.ok());
  REQUIRE((*ex)->Run({{"x", Input()}}).ok());
  auto plain = Executor::Create(*g, *cpu, nullptr, {.guard_bytes = 0});
  REQUIRE(plain.ok());
  REQUIRE((*plain)->Run({{"x", Input()}}).ok());
  // 10 bytes became 64 a side.
  CHECK((*ex)->last_stats().arena_bytes == (*plain)->last_stats().arena_bytes + 2 * 2 * 64);
}

}  // namespace
}  // namespace tpc::runtime
