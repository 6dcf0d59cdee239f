// tpc._tpc: the C++ side of the Python package (python/tpc/__init__.py holds the API).
//
// A thin layer over tpc::Compile and runtime::PlanRunner. Arrays cross as the buffer
// protocol both ways (no numpy headers): inputs are read in place, outputs are handed
// over as objects that own their bytes, which numpy wraps without a copy. The GIL is
// released while C++ works. An absl::Status error becomes tpc._tpc.Error with the same
// message and the status code's name in `.code`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tpc/compile/compile.h"
#include "tpc/ir/dtype.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/runtime/placement_io.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/thread_pool.h"
#include "tpc/util/exceptions.h"
#include "tpc/util/status_macros.h"

namespace py = pybind11;

namespace {

py::object& ErrorType() {
  static py::object* type = nullptr;  // set once at import; lives as long as the module
  if (type == nullptr) type = new py::object();
  return *type;
}

// Called with the GIL held.
[[noreturn]] void Raise(const absl::Status& status) {
  py::object error = ErrorType()(std::string(status.message()));
  error.attr("code") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(ErrorType().ptr(), error.ptr());
  throw py::error_already_set();
}

template <typename T>
T ValueOr(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

// An output tensor handed to Python; numpy views its bytes through the buffer protocol.
struct OutputArray {
  tpc::runtime::Tensor tensor;
};

// numpy's buffer format character of each element type tpc returns.
std::optional<std::string> BufferFormat(tpc::ir::DType t) {
  using tpc::ir::DType;
  switch (t) {
    case DType::kF32:
      return std::string("f");
    case DType::kF64:
      return std::string("d");
    case DType::kF16:
      return std::string("e");
    case DType::kI64:
      return std::string("q");
    case DType::kI32:
      return std::string("i");
    case DType::kI16:
      return std::string("h");
    case DType::kI8:
      return std::string("b");
    case DType::kU8:
      return std::string("B");
    case DType::kU16:
      return std::string("H");
    case DType::kU32:
      return std::string("I");
    case DType::kU64:
      return std::string("Q");
    case DType::kBool:
      return std::string("?");
    default:
      return std::nullopt;
  }
}

class Plan {
 public:
  explicit Plan(tpc::CompiledPlan plan) : plan_(std::move(plan)) {}
  int64_t tp() const { return plan_.tp(); }
  std::string report_json() const { return tpc::compile::ReportJson(plan_.report()); }
  std::string summary(const std::string& dir) const {
    return tpc::compile::ReportSummary(plan_.report(), dir);
  }
  std::vector<std::string> explanations() const { return plan_.explanations(); }
  void save(const std::string& dir, bool force) {
    tpc::SaveOptions options;
    options.force = force;
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = tpc::CatchExceptions("tpc.Plan.save", [&] { return plan_.Save(dir, options); });
    }
    if (!s.ok()) Raise(s);
  }
  py::bytes rank_model(int64_t rank) const {
    std::string bytes;
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = tpc::CatchExceptions("tpc.Plan.rank_model", [&]() -> absl::Status {
        TPC_ASSIGN_OR_RETURN(::onnx::ModelProto model, plan_.RankModel(rank));
        if (!model.SerializeToString(&bytes)) {
          return absl::ResourceExhaustedError(
              absl::StrCat("rank ", rank,
                           "'s model is over protobuf's 2 GiB: save the plan "
                           "(Plan.save) and load DIR/rank",
                           rank, ".onnx with its weights"));
        }
        return absl::OkStatus();
      });
    }
    if (!s.ok()) Raise(s);
    return py::bytes(bytes);
  }

 private:
  tpc::CompiledPlan plan_;
};

// source: a path (is_bytes false) or the serialized model.
std::unique_ptr<Plan> Compile(py::object source, bool is_bytes, const std::string& name,
                              const std::string& model_dir, const tpc::CompileOptions& options) {
  std::string bytes;
  std::string path;
  if (is_bytes) {
    bytes = source.cast<std::string>();
  } else {
    path = source.cast<std::string>();
  }
  absl::StatusOr<tpc::CompiledPlan> plan = absl::UnknownError("not compiled");
  absl::Status s;
  {
    py::gil_scoped_release release;
    s = tpc::CatchExceptions("tpc.compile", [&]() -> absl::Status {
      plan = is_bytes ? tpc::CompileBytes(tpc::MappedFile::FromBytes(std::move(bytes), name), name,
                                          model_dir, options)
                      : tpc::Compile(path, options);
      return plan.status();
    });
  }
  if (!s.ok()) Raise(s);
  return std::make_unique<Plan>(ValueOr(std::move(plan)));
}

// inputs: (name, dtype name, shape, buffer) each; returns (name, array) in the model's
// output order.
std::vector<std::pair<std::string, OutputArray>> Run(const std::string& dir, py::list inputs,
                                                     int threads) {
  namespace rt = tpc::runtime;
  std::vector<py::buffer_info> held;  // released (with the GIL held) when this returns
  std::map<std::string, rt::Tensor> tensors;
  for (py::handle item : inputs) {
    auto t = item.cast<py::tuple>();
    const auto name = t[0].cast<std::string>();
    const auto dtype_name = t[1].cast<std::string>();
    auto shape = t[2].cast<std::vector<int64_t>>();
    auto dtype = tpc::ir::DTypeFromName(dtype_name);
    if (!dtype)
      Raise(absl::InvalidArgumentError(
          absl::StrCat("input '", name, "': element type ", dtype_name, " is not one tpc runs")));
    held.push_back(t[3].cast<py::buffer>().request());
    rt::Tensor tensor(*dtype, std::move(shape), held.back().ptr);
    const auto bytes = static_cast<size_t>(held.back().size * held.back().itemsize);
    if (tensor.num_elements() < 0 || (tensor.nbytes() > 0 && tensor.nbytes() > bytes)) {
      Raise(absl::InvalidArgumentError(absl::StrCat("input '", name, "': ", tensor.TypeString(),
                                                    " needs ", tensor.nbytes(),
                                                    " bytes; the buffer holds ", bytes)));
    }
    tensors[name] = tensor;
  }
  if (threads < 0 || threads > tpc::runtime::kMaxThreads) {
    Raise(absl::InvalidArgumentError(
        absl::StrCat("threads must be from 0 (all cores) to ", tpc::runtime::kMaxThreads)));
  }
  std::vector<std::pair<std::string, OutputArray>> out;
  absl::Status s;
  {
    py::gil_scoped_release release;
    s = tpc::CatchExceptions("tpc.run", [&]() -> absl::Status {
      TPC_ASSIGN_OR_RETURN(auto graphs, rt::LoadPlan(dir));
      TPC_ASSIGN_OR_RETURN(const tpc::proto::Plan manifest, tpc::plan::ReadManifest(dir));
      std::vector<tpc::ir::Graph*> ptrs;
      for (auto& g : graphs) ptrs.push_back(g.get());
      rt::PlanRunnerOptions options;
      options.threads = threads;
      TPC_ASSIGN_OR_RETURN(options.io, rt::IoPlacementsFromPlan(manifest));
      TPC_ASSIGN_OR_RETURN(auto runner, rt::PlanRunner::Create(ptrs, options));
      TPC_ASSIGN_OR_RETURN(auto results, runner->Run(tensors));
      const auto& specs = runner->executor(0).outputs();
      for (size_t k = 0; k < specs.size(); ++k) {
        out.emplace_back(specs[k].name, OutputArray{results[0][k]});
      }
      return absl::OkStatus();
    });
  }
  if (!s.ok()) Raise(s);
  return out;
}

}  // namespace

PYBIND11_MODULE(_tpc, m) {
  m.doc() = "tpc's C++ core; use the tpc package";
  ErrorType() = py::reinterpret_borrow<py::object>(
      PyErr_NewException("tpc._tpc.Error", PyExc_RuntimeError, nullptr));
  m.attr("Error") = ErrorType();

  py::class_<OutputArray>(m, "OutputArray", py::buffer_protocol())
      .def_buffer([](OutputArray& a) -> py::buffer_info {
        const tpc::runtime::Tensor& t = a.tensor;
        auto format = BufferFormat(t.dtype());
        if (!format) {
          Raise(absl::UnimplementedError(
              absl::StrCat("an output of element type ", tpc::ir::DTypeName(t.dtype()),
                           " has no numpy type (bf16: compile with dtype='f32' boundaries)")));
        }
        const auto item = static_cast<py::ssize_t>(tpc::ir::DTypeSize(t.dtype()));
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
        std::vector<py::ssize_t> strides(shape.size(), item);
        for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
        return py::buffer_info(t.raw(), item, *format, static_cast<py::ssize_t>(shape.size()),
                               shape, strides);
      });

  py::class_<Plan>(m, "Plan")
      .def_property_readonly("tp", &Plan::tp)
      .def("report_json", &Plan::report_json)
      .def("summary", &Plan::summary)
      .def("explanations", &Plan::explanations)
      .def("save", &Plan::save, py::arg("dir"), py::arg("force"))
      .def("rank_model", &Plan::rank_model, py::arg("rank"));

  // tp-compile's options, set field by field from tpc.compile's keywords.
  py::class_<tpc::CompileOptions>(m, "CompileOptions")
      .def(py::init<>())
      .def_readwrite("tp", &tpc::CompileOptions::tp)
      .def_readwrite("dtype", &tpc::CompileOptions::dtype)
      .def_readwrite("objective", &tpc::CompileOptions::objective)
      .def_readwrite("weight_slack", &tpc::CompileOptions::weight_slack)
      .def_readwrite("memory_budget", &tpc::CompileOptions::memory_budget)
      .def_readwrite("device_profile", &tpc::CompileOptions::device_profile)
      .def_readwrite("dims", &tpc::CompileOptions::dims)
      .def_readwrite("divisible", &tpc::CompileOptions::divisible)
      .def_readwrite("sequence_parallel", &tpc::CompileOptions::sequence_parallel)
      .def_readwrite("seq_dim", &tpc::CompileOptions::seq_dim)
      .def_readwrite("styles", &tpc::CompileOptions::styles)
      .def_readwrite("styles_origin", &tpc::CompileOptions::styles_origin)
      .def_readwrite("input_placements", &tpc::CompileOptions::input_placements)
      .def_readwrite("output_placements", &tpc::CompileOptions::output_placements)
      .def_readwrite("explain", &tpc::CompileOptions::explain);
  m.def("compile", &Compile, py::arg("source"), py::arg("is_bytes"), py::arg("name"),
        py::arg("model_dir"), py::arg("options"));
  m.def("run", &Run, py::arg("dir"), py::arg("inputs"), py::arg("threads"));
  m.def("version", [] { return std::string(tpc::plan::Version()); });
}
