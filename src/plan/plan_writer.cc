#include "tpc/plan/plan_writer.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "onnx/onnx_pb.h"
#include "tpc/onnx/exporter.h"
#include "tpc/partition/weight_slice.h"
#include "tpc/proto/plan.pb.h"
#include "tpc/util/sha256.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/write_error.h"

#ifndef TPC_VERSION
#define TPC_VERSION "0.0.0"
#endif

namespace tpc::plan {
namespace {

const ir::Placement* ShardOf(const ir::Value& v) {
  if (!v.sharding() || v.sharding()->placements.empty()) return nullptr;
  const ir::Placement& p = v.sharding()->placements[0];
  return p.kind == ir::Placement::Kind::kShard ? &p : nullptr;
}

// Bytes of one rank's weights (constants as the rank's file holds them); `sliced`
// counts only the per-rank slices (what the progress callback reports).
int64_t WeightBytes(const ir::Graph& graph, int64_t n, bool sliced_only) {
  int64_t total = 0;
  for (ir::Node* node : graph.nodes()) {
    if (node->kind() != ir::NodeKind::kConstant) continue;
    const ir::Placement* p = ShardOf(*node->output(0));
    // A constant converted to half precision (tp-compile --dtype) holds half the bytes.
    const ir::Tensor& t = node->tensor();
    const int64_t scale = ir::DTypeSize(node->output(0)->type().dtype);
    const int64_t from = std::max<int64_t>(ir::DTypeSize(t.dtype()), 1);
    if (p != nullptr) {
      total += partition::SliceBytes(t, *p, n) / from * scale;
    } else if (!sliced_only) {
      total += static_cast<int64_t>(t.nbytes()) / from * scale;
    }
  }
  return total;
}

absl::Status CheckSources(const ir::Graph& graph) {
  std::set<const MappedFile*> files;
  for (ir::Node* node : graph.nodes()) {
    if (node->kind() == ir::NodeKind::kConstant && node->tensor().mapped_file() != nullptr) {
      files.insert(node->tensor().mapped_file());
    }
  }
  for (const MappedFile* f : files) TPC_RETURN_IF_ERROR(f->CheckIntact());
  return absl::OkStatus();
}

proto::Placement ToProto(const ir::Placement& p) {
  proto::Placement out;
  switch (p.kind) {
    case ir::Placement::Kind::kReplicate:
      out.set_kind(proto::Placement::REPLICATE);
      break;
    case ir::Placement::Kind::kShard:
      out.set_kind(proto::Placement::SHARD);
      out.set_dim(p.dim);
      if (p.has_groups()) out.set_groups(p.groups);
      TPC_CHECK(!p.has_symbolic_blocks());  // graph inputs and outputs take none
      if (p.blocks > 1) out.set_blocks(p.blocks);
      for (int64_t w : p.block_weights) out.add_block_weights(w);
      break;
    case ir::Placement::Kind::kPartial: {
      out.set_kind(proto::Placement::PARTIAL);
      static const char* kReduce[] = {"sum", "max", "min", "avg"};
      out.set_reduce(kReduce[static_cast<int>(p.reduce)]);
      break;
    }
  }
  return out;
}

void AddPlacements(const std::vector<ir::Value*>& values,
                   google::protobuf::RepeatedPtrField<proto::ValuePlacement>* out) {
  for (const ir::Value* v : values) {
    proto::ValuePlacement* vp = out->Add();
    vp->set_value(v->name());
    *vp->add_placements() =
        ToProto(v->sharding() ? v->sharding()->placements[0] : ir::Placement::Replicate());
  }
}

// The weight shard index of a written rank model: where each external initializer is.
absl::Status AddShardIndex(const std::string& model_path, proto::RankPlan* rp) {
  std::ifstream in(model_path, std::ios::binary);
  ::onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    return absl::InternalError(absl::StrCat(model_path, ": cannot re-read"));
  for (const auto& t : model.graph().initializer()) {
    if (t.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    proto::WeightShard* w = rp->add_shards();
    w->set_name(t.name());
    w->set_source(t.name());
    for (int64_t d : t.dims()) w->add_shape(d);
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") w->set_file(kv.value());
      int64_t v = 0;
      if ((kv.key() == "offset" || kv.key() == "length") && !absl::SimpleAtoi(kv.value(), &v)) {
        return absl::InternalError(absl::StrCat(model_path, ": bad external data ", kv.key()));
      }
      if (kv.key() == "offset") w->set_offset(v);
      if (kv.key() == "length") w->set_length(v);
    }
  }
  return absl::OkStatus();
}

// The export options of rank r's file: its metadata, and its constants written as the
// rank's slices (`written` sees the sliced bytes of each).
onnx::ExportOptions RankExportOptions(int64_t r, int64_t n, const std::string& source_hash,
                                      std::function<void(int64_t bytes)> written) {
  onnx::ExportOptions eo;
  eo.producer_version = TPC_VERSION;
  eo.metadata = {{"tpc.rank", absl::StrCat(r)},
                 {"tpc.tp", absl::StrCat(n)},
                 {"tpc.source_sha256", source_hash},
                 {"tpc.version", TPC_VERSION}};
  eo.write_constant = [r, n, written](const ir::Node& constant, std::ostream& out) -> absl::Status {
    // A rank's slice, or a whole constant converted to another float type.
    const ir::Placement* p = ShardOf(*constant.output(0));
    const ir::Placement whole = ir::Placement::Replicate();
    TPC_RETURN_IF_ERROR(partition::WriteSlice(constant.tensor(), p != nullptr ? *p : whole, r, n,
                                              out, constant.output(0)->type().dtype));
    if (p != nullptr && written) written(partition::SliceBytes(constant.tensor(), *p, n));
    return absl::OkStatus();
  };
  return eo;
}

absl::StatusOr<std::string> SourceHash(const PlanOptions& options) {
  if (!options.source_sha256.empty()) return options.source_sha256;
  return Sha256File(options.source_model);
}

}  // namespace

const char* Version() { return TPC_VERSION; }

int64_t RankWeightBytes(const ir::Graph& graph, int64_t tp) {
  return WeightBytes(graph, tp, /*sliced_only=*/false);
}

absl::StatusOr<::onnx::ModelProto> RankModelProto(const ir::Graph& graph, int64_t rank,
                                                  const PlanOptions& options) {
  TPC_ASSIGN_OR_RETURN(const std::string source_hash, SourceHash(options));
  TPC_RETURN_IF_ERROR(CheckSources(graph));
  return onnx::ExportModelProto(graph, RankExportOptions(rank, options.tp, source_hash, nullptr));
}

absl::StatusOr<std::vector<RankFiles>> WriteRankFiles(const ir::Graph& graph,
                                                      const std::string& dir,
                                                      const PlanOptions& options) {
  const int64_t n = options.tp;
  const int64_t per_rank = WeightBytes(graph, n, /*sliced_only=*/false);
  const int64_t total = WeightBytes(graph, n, /*sliced_only=*/true) * n;
  int64_t done = 0;
  std::vector<RankFiles> ranks;
  TPC_ASSIGN_OR_RETURN(const std::string source_hash, SourceHash(options));
  for (int64_t r = 0; r < n; ++r) {
    TPC_RETURN_IF_ERROR(CheckSources(graph));
    RankFiles files;
    files.rank = r;
    files.model = absl::StrCat("rank", r, ".onnx");
    files.weights = absl::StrCat("rank", r, ".weights");
    files.weight_bytes = per_rank;
    files.source_sha256 = source_hash;
    onnx::ExportOptions eo = RankExportOptions(r, n, source_hash, [&](int64_t bytes) {
      done += bytes;
      if (options.progress) options.progress(done, total);
    });
    eo.weights_file = files.weights;
    // The weights are hashed as they are written (the small model file is read back).
    Sha256 weights_hash;
    eo.observe_weights = [&](const char* data, size_t size) { weights_hash.Update(data, size); };
    TPC_RETURN_IF_ERROR(onnx::ExportModel(graph, absl::StrCat(dir, "/", files.model), eo));
    TPC_ASSIGN_OR_RETURN(files.model_sha256, Sha256File(absl::StrCat(dir, "/", files.model)));
    files.weights_sha256 = weights_hash.HexDigest();
    std::error_code ec;
    files.model_size =
        static_cast<int64_t>(std::filesystem::file_size(absl::StrCat(dir, "/", files.model), ec));
    const std::string weights_path = absl::StrCat(dir, "/", files.weights);
    files.weights_size = std::filesystem::exists(weights_path, ec)
                             ? static_cast<int64_t>(std::filesystem::file_size(weights_path, ec))
                             : 0;
    if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot stat rank ", r, "'s files"));
    ranks.push_back(std::move(files));
  }
  TPC_RETURN_IF_ERROR(CheckSources(graph));
  return ranks;
}

absl::Status WriteManifest(const ir::Graph& graph, const std::vector<RankFiles>& ranks,
                           const std::string& dir, const PlanOptions& options) {
  proto::Plan plan;
  plan.set_tpc_version(Version());
  plan.set_source_model(options.source_model);
  std::string source_hash = ranks.empty() ? "" : ranks[0].source_sha256;
  if (source_hash.empty()) {
    TPC_ASSIGN_OR_RETURN(source_hash, SourceHash(options));
  }
  plan.set_source_sha256(source_hash);
  proto::MeshAxis* axis = plan.mutable_mesh()->add_axes();
  axis->set_name("tp");
  axis->set_size(options.tp);
  for (const RankFiles& f : ranks) {
    proto::RankPlan* rp = plan.add_ranks();
    rp->set_rank(f.rank);
    rp->set_model(f.model);
    rp->set_sha256(f.model_sha256);
    rp->set_weights(f.weights);
    rp->set_weights_sha256(f.weights_sha256);
    rp->set_weight_bytes(f.weight_bytes);
    rp->set_model_size(f.model_size);
    rp->set_weights_size(f.weights_size);
    TPC_RETURN_IF_ERROR(AddShardIndex(absl::StrCat(dir, "/", f.model), rp));
  }
  AddPlacements(graph.inputs(), plan.mutable_inputs());
  AddPlacements(graph.outputs(), plan.mutable_outputs());
  for (const auto& [k, v] : options.options) (*plan.mutable_options())[k] = v;
  // Byte for byte the same for the same plan: MessageToJsonString goes through a binary
  // serialization whose map order varies, so serialize deterministically and convert.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream raw(&binary);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    if (!plan.SerializeToCodedStream(&coded)) return absl::InternalError("plan.json: serialize");
  }
  static const std::string kTypeUrlPrefix = "type.googleapis.com";
  std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, google::protobuf::DescriptorPool::generated_pool()));
  std::string json;
  google::protobuf::util::JsonPrintOptions jo;
  jo.add_whitespace = true;
  jo.preserve_proto_field_names = true;
  jo.always_print_primitive_fields = true;  // rank 0 and offset 0 too
  auto status = google::protobuf::util::BinaryToJsonString(
      resolver.get(), absl::StrCat(kTypeUrlPrefix, "/", plan.GetDescriptor()->full_name()), binary,
      &json, jo);
  if (!status.ok()) return absl::InternalError(absl::StrCat("plan.json: ", status.ToString()));
  std::ofstream out(absl::StrCat(dir, "/plan.json"), std::ios::trunc);
  if (!out) return WriteError(absl::StrCat(dir, "/plan.json"), errno, /*opening=*/true);
  if (!(out << json) || !out.flush())
    return WriteError(absl::StrCat(dir, "/plan.json"), errno, false);
  return absl::OkStatus();
}

}  // namespace tpc::plan
