#include "tpc/onnx/exporter.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proto_convert.h"
#include "tpc/onnx/tensor_proto.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/tee_streambuf.h"
#include "tpc/util/write_error.h"

namespace tpc::onnx {
namespace {

using internal::SetAttribute;
using internal::SetType;

// ONNX IR version written: 8 is what opsets up to 17 need; 10 covers the newest
// opsets tpc reads.
int64_t IrVersionFor(int64_t opset) { return opset <= 17 ? 8 : 10; }

// A tensor written to the weights file: its node, where, how many bytes, and whether
// the plan writer's `write_constant` provides them.
struct ExternalTensor {
  const ir::Node* node;
  int64_t offset;
  int64_t nbytes;
  bool sliced;
};

// The dims a constant is exported with: its value's type (per-rank constants are
// smaller than their data).
absl::StatusOr<std::vector<int64_t>> ConstantDims(const ir::Node& node) {
  const ir::TensorType& type = node.output(0)->type();
  if (!type.shape) return node.tensor().shape();
  std::vector<int64_t> dims;
  for (const ir::Dim& d : *type.shape) {
    if (!d.is_static()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "constant '", node.output(0)->name(), "' has a non-static type ", type.ToString()));
    }
    dims.push_back(d.value());
  }
  return dims;
}

// The node's name, made unique among `taken` (onnxruntime refuses two nodes of one
// name): rewrites can give a name again after the value it came from was renamed, and
// nodes may have none. A taken or empty name gets the first free `NAME.k` (`OP.k`).
std::string UniqueNodeName(const ir::Node& node, absl::flat_hash_set<std::string>& taken) {
  const std::string base = node.name().empty() ? node.op_type() : node.name();
  std::string name = base;
  for (int k = 1; !taken.insert(name).second; ++k) name = absl::StrCat(base, ".", k);
  return name;
}

// Builds the model; tensors at or above the threshold are registered in `external`
// (written later by the caller) instead of being copied into the proto.
absl::StatusOr<::onnx::ModelProto> BuildModel(const ir::Graph& graph, const ExportOptions& options,
                                              std::vector<ExternalTensor>* external) {
  ::onnx::ModelProto model;
  model.set_ir_version(IrVersionFor(graph.onnx_opset()));
  model.set_producer_name(options.producer_name);
  if (!options.producer_version.empty()) model.set_producer_version(options.producer_version);
  for (const auto& [key, value] : options.metadata) {
    auto* kv = model.add_metadata_props();
    kv->set_key(key);
    kv->set_value(value);
  }
  for (const auto& [domain, version] : graph.opsets()) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  ::onnx::GraphProto* g = model.mutable_graph();
  g->set_name(graph.name().empty() ? "main" : graph.name());
  int64_t offset = 0;
  absl::flat_hash_set<std::string> node_names;
  for (ir::Node* node : graph.nodes()) {
    switch (node->kind()) {
      case ir::NodeKind::kPlaceholder: {
        auto* in = g->add_input();
        in->set_name(node->output(0)->name());
        SetType(node->output(0)->type(), in->mutable_type());
        break;
      }
      case ir::NodeKind::kConstant: {
        const ir::Tensor& t = node->tensor();
        if (!t.has_data()) {
          return absl::FailedPreconditionError(
              absl::StrCat("constant '", node->output(0)->name(), "' has no data (elided)"));
        }
        TPC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ConstantDims(*node));
        // Per-rank (a slice) or converted (tp-compile --dtype): the plan writer's bytes.
        const ir::DType dtype = node->output(0)->type().dtype;
        const bool sliced = dims != t.shape() || dtype != t.dtype();
        if (sliced && !options.write_constant) {
          return absl::FailedPreconditionError(
              absl::StrCat("constant '", node->output(0)->name(),
                           "' is per-rank; export it through a plan writer"));
        }
        int64_t nbytes = ir::DTypeSize(dtype);
        for (int64_t d : dims) nbytes *= d;
        ::onnx::TensorProto* proto = g->add_initializer();
        const bool ext =
            !options.weights_file.empty() && nbytes >= options.external_threshold_bytes;
        if (!ext) {
          if (!sliced) {
            *proto = TensorToProto(t, node->output(0)->name());
            break;
          }
          std::ostringstream bytes;
          TPC_RETURN_IF_ERROR(options.write_constant(*node, bytes));
          proto->set_name(node->output(0)->name());
          proto->set_data_type(static_cast<int32_t>(dtype));
          for (int64_t d : dims) proto->add_dims(d);
          proto->set_raw_data(bytes.str());
          break;
        }
        proto->set_name(node->output(0)->name());
        proto->set_data_type(static_cast<int32_t>(dtype));
        for (int64_t d : dims) proto->add_dims(d);
        offset = (offset + options.alignment - 1) / options.alignment * options.alignment;
        proto->set_data_location(::onnx::TensorProto::EXTERNAL);
        auto add = [&](const char* k, const std::string& v) {
          auto* kv = proto->add_external_data();
          kv->set_key(k);
          kv->set_value(v);
        };
        add("location", options.weights_file);
        add("offset", absl::StrCat(offset));
        add("length", absl::StrCat(nbytes));
        external->push_back({node, offset, nbytes, sliced});
        offset += nbytes;
        break;
      }
      case ir::NodeKind::kCall: {
        auto* n = g->add_node();
        n->set_name(UniqueNodeName(*node, node_names));
        n->set_op_type(node->op_type());
        if (!node->domain().empty()) n->set_domain(node->domain());
        for (ir::Value* in : node->inputs()) n->add_input(in == nullptr ? "" : in->name());
        for (int i = 0; i < node->num_outputs(); ++i) n->add_output(node->output(i)->name());
        for (const auto& [name, value] : node->attrs()) {
          TPC_RETURN_IF_ERROR(SetAttribute(name, value, n->add_attribute()));
        }
        if (options.value_info) {
          for (int i = 0; i < node->num_outputs(); ++i) {
            auto* vi = g->add_value_info();
            vi->set_name(node->output(i)->name());
            SetType(node->output(i)->type(), vi->mutable_type());
          }
        }
        break;
      }
      case ir::NodeKind::kOutput:
        for (ir::Value* v : node->inputs()) {
          auto* out = g->add_output();
          out->set_name(v->name());
          SetType(v->type(), out->mutable_type());
        }
        break;
    }
  }
  // Graph outputs are declared by g->output(); a value_info for them is redundant.
  return model;
}

}  // namespace

absl::StatusOr<::onnx::ModelProto> ExportModelProto(const ir::Graph& graph,
                                                    const ExportOptions& options) {
  ExportOptions inline_all = options;
  inline_all.weights_file.clear();
  std::vector<ExternalTensor> external;
  return BuildModel(graph, inline_all, &external);
}

absl::Status ExportModel(const ir::Graph& graph, const std::string& onnx_path,
                         const ExportOptions& options) {
  std::vector<ExternalTensor> external;
  TPC_ASSIGN_OR_RETURN(::onnx::ModelProto model, BuildModel(graph, options, &external));
  namespace fs = std::filesystem;
  fs::path dir = fs::path(onnx_path).parent_path();
  if (!options.weights_file.empty()) {
    fs::path weights = dir / options.weights_file;
    std::ofstream file(weights, std::ios::binary | std::ios::trunc);
    if (!file) return WriteError(weights.string(), errno, /*opening=*/true);
    TeeStreambuf tee(
        file.rdbuf(),
        options.observe_weights ? options.observe_weights : [](const char*, size_t) {});
    std::ostream out(&tee);
    int64_t pos = 0;
    static const char kZeros[256] = {};
    for (const ExternalTensor& e : external) {
      while (pos < e.offset) {
        int64_t pad = std::min<int64_t>(e.offset - pos, sizeof(kZeros));
        out.write(kZeros, pad);
        pos += pad;
      }
      if (e.sliced) {
        const absl::Status written = options.write_constant(*e.node, out);
        // A failed write (a full disk) is named by the file and the reason.
        if (!written.ok()) return out ? written : WriteError(weights.string(), errno, false);
      } else {
        const ir::Tensor& t = e.node->tensor();
        out.write(reinterpret_cast<const char*>(t.data()),
                  static_cast<std::streamsize>(t.nbytes()));
      }
      pos += e.nbytes;
    }
    if (!out.flush() || !file.flush()) return WriteError(weights.string(), errno, false);
  }
  std::ofstream out(onnx_path, std::ios::binary | std::ios::trunc);
  if (!out) return WriteError(onnx_path, errno, /*opening=*/true);
  if (!model.SerializeToOstream(&out) || !out.flush()) return WriteError(onnx_path, errno, false);
  return absl::OkStatus();
}

}  // namespace tpc::onnx
