// Per-rank weights reassemble into the original model, byte for byte. For gpt2, llama
// and bert at N ∈ {2, 4} (import → shard → partition → WriteRankFiles/WriteManifest into
// a temporary folder), every rank's initializers are read back from rank{i}.onnx and
// its external data in rank{i}.weights:
//   - a split one, concatenated over the ranks along its split dim (for a blocked split
//     S(d/k), Megatron's fused QKV, block by block: each block's parts in rank order),
//     gives back the whole tensor: the original model's bytes when it comes from the
//     model, else the partitioned graph's per-rank table (a rank's vocab offset);
//   - a replicated one is the whole tensor in every rank.
// plan.json parses into tpc.proto.Plan; its hashes match the files and its shard index
// matches each rank model's external data. tp-compile writes the same rank files and a
// report.json that parses.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/partition/weight_slice.h"
#include "tpc/plan/plan_writer.h"
#include "tpc/proto/plan.pb.h"
#include "tpc/shard/shard_pass.h"
#include "tpc/util/half.h"
#include "tpc/util/sha256.h"

namespace {

namespace fs = std::filesystem;
using tpc::ir::Placement;
using tpc::testing::ReadFile;
using tpc::testing::SourcePath;

::onnx::ModelProto LoadModel(const std::string& path) {
  ::onnx::ModelProto m;
  INFO(path);
  REQUIRE(m.ParseFromString(ReadFile(path)));
  return m;
}

// The original model's tensors by name: initializers and Constant nodes' values (the
// committed models hold them all as raw_data).
std::map<std::string, std::string> OriginalTensors(const ::onnx::ModelProto& m) {
  std::map<std::string, std::string> out;
  for (const auto& t : m.graph().initializer()) {
    INFO(t.name());
    REQUIRE(t.has_raw_data());
    out[t.name()] = t.raw_data();
  }
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != "Constant" || n.output_size() != 1) continue;
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.t().has_raw_data()) out[n.output(0)] = a.t().raw_data();
    }
  }
  return out;
}

// One rank's initializer: its dims and bytes (inline or from the weights file), and
// where the model says its external data is.
struct RankTensor {
  std::vector<int64_t> dims;
  std::string bytes;
  bool external = false;
  int64_t offset = -1;
  int64_t length = -1;
};

std::map<std::string, RankTensor> RankTensors(const std::string& dir, int64_t rank) {
  const ::onnx::ModelProto m = LoadModel(dir + "/rank" + std::to_string(rank) + ".onnx");
  const std::string weights = ReadFile(dir + "/rank" + std::to_string(rank) + ".weights");
  std::map<std::string, RankTensor> out;
  for (const auto& t : m.graph().initializer()) {
    RankTensor rt;
    rt.dims.assign(t.dims().begin(), t.dims().end());
    if (t.data_location() == ::onnx::TensorProto::EXTERNAL) {
      rt.external = true;
      std::string location;
      for (const auto& kv : t.external_data()) {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") rt.offset = std::stoll(kv.value());
        if (kv.key() == "length") rt.length = std::stoll(kv.value());
      }
      INFO(t.name());
      CHECK(location == "rank" + std::to_string(rank) + ".weights");
      REQUIRE(rt.offset >= 0);
      REQUIRE(rt.length >= 0);
      CHECK(rt.offset % 64 == 0);
      REQUIRE(rt.offset + rt.length <= static_cast<int64_t>(weights.size()));
      rt.bytes = weights.substr(static_cast<size_t>(rt.offset), static_cast<size_t>(rt.length));
    } else {
      INFO(t.name());
      REQUIRE(t.has_raw_data());
      rt.bytes = t.raw_data();
    }
    out[t.name()] = std::move(rt);
  }
  return out;
}

// The whole tensor from the ranks' slices along dim `d` split in blocks (equal ones, or
// of the relative sizes p.block_weights): for each index of the dims before d, for each
// block, the ranks' parts in rank order.
std::string Reassemble(const std::vector<const RankTensor*>& parts,
                       const std::vector<int64_t>& whole_shape, int64_t elem_size,
                       const Placement& p) {
  const int64_t n = static_cast<int64_t>(parts.size());
  const size_t d = static_cast<size_t>(p.dim);
  int64_t outer = 1;
  for (size_t i = 0; i < d; ++i) outer *= whole_shape[i];
  int64_t inner = elem_size;
  for (size_t i = d + 1; i < whole_shape.size(); ++i) inner *= whole_shape[i];
  std::vector<int64_t> weights = p.block_weights;
  if (weights.empty()) weights.assign(static_cast<size_t>(p.blocks), 1);
  int64_t units = 0;
  for (int64_t w : weights) units += w;
  const int64_t unit_rows = whole_shape[d] / units;
  std::vector<size_t> at(static_cast<size_t>(n), 0);  // bytes of each rank's slice taken
  std::string out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t w : weights) {
      const size_t run = static_cast<size_t>(unit_rows * w / n * inner);  // one rank's part
      for (int64_t r = 0; r < n; ++r) {
        const std::string& slice = parts[static_cast<size_t>(r)]->bytes;
        REQUIRE(at[static_cast<size_t>(r)] + run <= slice.size());
        out.append(slice, at[static_cast<size_t>(r)], run);
        at[static_cast<size_t>(r)] += run;
      }
    }
  }
  return out;
}

struct Compiled {
  std::unique_ptr<tpc::ir::Graph> graph;
  std::vector<tpc::plan::RankFiles> ranks;
  std::string dir;
};

Compiled CompileWithLibrary(const std::string& model, int64_t n) {
  const std::string source = SourcePath("models/" + model + ".onnx");
  auto graph = tpc::onnx::ImportModel(source);
  REQUIRE(graph.ok());
  tpc::testing::ShardAndPartition(**graph, tpc::testing::TpOptions(n));
  Compiled c;
  c.dir = tpc::testing::TempDir("slices_" + model);
  tpc::plan::PlanOptions po;
  po.tp = n;
  po.source_model = source;
  auto ranks = tpc::plan::WriteRankFiles(**graph, c.dir, po);
  INFO(ranks.status().ToString());
  REQUIRE(ranks.ok());
  const absl::Status manifest = tpc::plan::WriteManifest(**graph, *ranks, c.dir, po);
  INFO(manifest.ToString());
  REQUIRE(manifest.ok());
  c.graph = std::move(*graph);
  c.ranks = std::move(*ranks);
  return c;
}

std::string Sha(const std::string& path) {
  auto s = tpc::Sha256File(path);
  INFO(path << ": " << s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

tpc::proto::Plan ReadPlan(const std::string& dir) {
  tpc::proto::Plan plan;
  const auto status =
      google::protobuf::util::JsonStringToMessage(ReadFile(dir + "/plan.json"), &plan);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return plan;
}

std::string TpCompile() {
  const char* env = std::getenv("TPC_TP_COMPILE");
  return env != nullptr ? env : std::string(TPC_BINARY_DIR) + "/tp-compile";
}

int RunTpCompile(const std::string& args, std::string* output) {
  FILE* pipe = ::popen((TpCompile() + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, got);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("weight slices reassemble into the original weights", "[plan][weights]") {
  for (const char* model : {"gpt2", "llama", "bert"}) {
    for (int64_t n : {2, 4}) {
      DYNAMIC_SECTION(model << " N=" << n) {
        const Compiled c = CompileWithLibrary(model, n);
        const std::map<std::string, std::string> original =
            OriginalTensors(LoadModel(SourcePath(std::string("models/") + model + ".onnx")));
        std::vector<std::map<std::string, RankTensor>> ranks;
        for (int64_t r = 0; r < n; ++r) ranks.push_back(RankTensors(c.dir, r));

        int split = 0, split_from_model = 0, blocked = 0, replicated = 0;
        for (tpc::ir::Node* node : c.graph->nodes()) {
          if (node->kind() != tpc::ir::NodeKind::kConstant) continue;
          const std::string& name = node->output(0)->name();
          const tpc::ir::Tensor& whole = node->tensor();
          REQUIRE(whole.has_data());
          const std::string ir_bytes(reinterpret_cast<const char*>(whole.data()), whole.nbytes());
          const auto orig = original.find(name);
          // Import keeps the model's bytes (a constant the rewrite added has no original).
          if (orig != original.end()) {
            INFO(name);
            CHECK(orig->second == ir_bytes);
          }
          const auto& sharding = node->output(0)->sharding();
          const Placement p = sharding ? sharding->placements.at(0) : Placement::Replicate();
          std::vector<const RankTensor*> parts;
          for (int64_t r = 0; r < n; ++r) {
            auto it = ranks[static_cast<size_t>(r)].find(name);
            INFO("rank " << r << " lacks " << name);
            REQUIRE(it != ranks[static_cast<size_t>(r)].end());
            parts.push_back(&it->second);
          }
          INFO(name << " " << p.ToString() << " " << node->output(0)->type().ToString());
          if (p.kind == Placement::Kind::kShard) {
            ++split;
            split_from_model += orig != original.end() ? 1 : 0;
            blocked += p.blocks > 1 ? 1 : 0;
            std::vector<int64_t> local = whole.shape();
            REQUIRE(local[static_cast<size_t>(p.dim)] % (n * p.BlockUnits()) == 0);
            local[static_cast<size_t>(p.dim)] /= n;
            for (const RankTensor* part : parts) {
              CHECK(part->dims == local);
              CHECK(part->bytes.size() * static_cast<size_t>(n) == whole.nbytes());
            }
            const std::string joined =
                Reassemble(parts, whole.shape(), tpc::ir::DTypeSize(whole.dtype()), p);
            CHECK(joined == (orig != original.end() ? orig->second : ir_bytes));
          } else {
            ++replicated;
            for (const RankTensor* part : parts) {
              CHECK(part->dims == whole.shape());
              CHECK(part->bytes == (orig != original.end() ? orig->second : ir_bytes));
            }
          }
        }
        INFO(split << " split (" << split_from_model << " from the model, " << blocked
                   << " blocked), " << replicated << " replicated");
        // Every projection and the embedding split; GPT-2's fused QKV as 3 blocks.
        CHECK(split_from_model >= 6);
        CHECK(replicated > 0);
        if (std::string(model) == "gpt2") CHECK(blocked >= 2);
        // Nothing in a rank's file that the graph does not hold.
        for (const auto& rank : ranks) {
          for (const auto& [name, t] : rank) {
            INFO(name);
            CHECK(c.graph->FindValue(name) != nullptr);
          }
        }
      }
    }
  }
}

TEST_CASE("plan.json: parses, hashes match the files, shard index matches the models",
          "[plan][manifest]") {
  for (const char* model : {"gpt2", "llama", "bert"}) {
    for (int64_t n : {2, 4}) {
      DYNAMIC_SECTION(model << " N=" << n) {
        const Compiled c = CompileWithLibrary(model, n);
        const tpc::proto::Plan plan = ReadPlan(c.dir);
        CHECK(plan.tpc_version() == tpc::plan::Version());
        CHECK(plan.source_sha256() == Sha(SourcePath(std::string("models/") + model + ".onnx")));
        REQUIRE(plan.mesh().axes_size() == 1);
        CHECK(plan.mesh().axes(0).name() == "tp");
        CHECK(plan.mesh().axes(0).size() == n);
        REQUIRE(plan.ranks_size() == n);
        CHECK(plan.inputs_size() == static_cast<int>(c.graph->inputs().size()));
        CHECK(plan.outputs_size() == static_cast<int>(c.graph->outputs().size()));
        for (int64_t r = 0; r < n; ++r) {
          const tpc::proto::RankPlan& rp = plan.ranks(static_cast<int>(r));
          INFO("rank " << r);
          CHECK(rp.rank() == r);
          CHECK(rp.model() == "rank" + std::to_string(r) + ".onnx");
          CHECK(rp.weights() == "rank" + std::to_string(r) + ".weights");
          CHECK(rp.sha256() == Sha(c.dir + "/" + rp.model()));
          CHECK(rp.weights_sha256() == Sha(c.dir + "/" + rp.weights()));
          CHECK(rp.sha256() == c.ranks[static_cast<size_t>(r)].model_sha256);
          CHECK(rp.weight_bytes() == c.ranks[static_cast<size_t>(r)].weight_bytes);
          // Every external initializer is indexed, where the model says it is.
          const std::map<std::string, RankTensor> tensors = RankTensors(c.dir, r);
          int external = 0;
          int64_t bytes = 0;
          for (const auto& [name, t] : tensors) {
            external += t.external ? 1 : 0;
            bytes += static_cast<int64_t>(t.bytes.size());
          }
          CHECK(rp.shards_size() == external);
          for (const tpc::proto::WeightShard& s : rp.shards()) {
            INFO(s.name());
            auto it = tensors.find(s.name());
            REQUIRE(it != tensors.end());
            CHECK(it->second.external);
            CHECK(s.file() == rp.weights());
            CHECK(s.offset() == it->second.offset);
            CHECK(s.length() == it->second.length);
            CHECK(std::vector<int64_t>(s.shape().begin(), s.shape().end()) == it->second.dims);
          }
          // weight_bytes counts every constant the rank holds, inline ones included.
          CHECK(rp.weight_bytes() == bytes);
        }
      }
    }
  }
}

TEST_CASE("tp-compile writes the library's rank files, plan.json and report.json",
          "[plan][manifest]") {
  for (const char* model : {"gpt2", "bert"}) {
    DYNAMIC_SECTION(model) {
      const Compiled c = CompileWithLibrary(model, 2);
      const std::string out = tpc::testing::TempDir("slices_bin") + "/plan";
      std::string output;
      const int rc = RunTpCompile(SourcePath(std::string("models/") + model + ".onnx") +
                                      " --tp 2 --objective memory --quiet -o " + out,
                                  &output);
      INFO(output);
      REQUIRE(rc == 0);
      for (const char* file : {"plan.json", "report.json", "rank0.onnx", "rank0.weights",
                               "rank1.onnx", "rank1.weights"}) {
        INFO(file);
        CHECK(fs::is_regular_file(out + "/" + file));
      }
      const tpc::proto::Plan plan = ReadPlan(out);
      REQUIRE(plan.ranks_size() == 2);
      for (int r = 0; r < 2; ++r) {
        INFO("rank " << r);
        CHECK(plan.ranks(r).sha256() == Sha(out + "/" + plan.ranks(r).model()));
        CHECK(plan.ranks(r).weights_sha256() == Sha(out + "/" + plan.ranks(r).weights()));
        // The same program and weights as the library pipeline with the same options.
        CHECK(plan.ranks(r).sha256() == c.ranks[static_cast<size_t>(r)].model_sha256);
        CHECK(plan.ranks(r).weights_sha256() == c.ranks[static_cast<size_t>(r)].weights_sha256);
      }
      CHECK(plan.options().at("tp") == "2");
      // report.json is JSON with the report's main fields.
      google::protobuf::Struct report;
      const auto status =
          google::protobuf::util::JsonStringToMessage(ReadFile(out + "/report.json"), &report);
      INFO(status.ToString());
      REQUIRE(status.ok());
      const auto& fields = report.fields();
      for (const char* key : {"tp", "per_rank_weight_bytes", "partition", "collectives_per_forward",
                              "collectives", "weights"}) {
        INFO(key);
        CHECK(fields.count(key) == 1);
      }
      CHECK(fields.at("tp").number_value() == 2);
      REQUIRE(fields.at("per_rank_weight_bytes").list_value().values_size() == 2);
      CHECK(fields.at("per_rank_weight_bytes").list_value().values(0).number_value() ==
            static_cast<double>(c.ranks[0].weight_bytes));
    }
  }
}

// A fused [q | k | v] weight of unequal parts, S(1/1:1:2) (Qwen 3.5's Q/K/V projection
// before its convolution): each rank's file holds its columns of each part, in order.
TEST_CASE("a weight split in unequal blocks: each rank writes its part of each",
          "[plan][weights]") {
  // [2, 8] f32, columns as q 0-1, k 2-3, v 4-7.
  std::string bytes;
  for (int i = 0; i < 16; ++i) {
    const float f = static_cast<float>(i);
    bytes.append(reinterpret_cast<const char*>(&f), sizeof f);
  }
  const tpc::ir::Tensor w = tpc::ir::Tensor::FromBytes(tpc::ir::DType::kF32, {2, 8}, bytes);
  const Placement p = Placement::ShardInWeightedBlocks(1, {1, 1, 2});
  auto floats = [](const std::string& s) {
    std::vector<float> out(s.size() / sizeof(float));
    std::memcpy(out.data(), s.data(), s.size());
    return out;
  };
  std::vector<const RankTensor*> parts;
  RankTensor files[2];
  for (int64_t r = 0; r < 2; ++r) {
    std::ostringstream out;
    REQUIRE(tpc::partition::WriteSlice(w, p, r, 2, out).ok());
    files[r].bytes = out.str();
    CHECK(static_cast<int64_t>(files[r].bytes.size()) == tpc::partition::SliceBytes(w, p, 2));
    parts.push_back(&files[r]);
  }
  CHECK(floats(files[0].bytes) == std::vector<float>{0, 2, 4, 5, 8, 10, 12, 13});
  CHECK(floats(files[1].bytes) == std::vector<float>{1, 3, 6, 7, 9, 11, 14, 15});
  CHECK(Reassemble(parts, {2, 8}, 4, p) == bytes);
  std::ostringstream out;
  CHECK_FALSE(tpc::partition::WriteSlice(w, p, 0, 4, out).ok());  // 8 is not 4 units of 4
}

// A half plan's weights: f32 values beyond the type's range saturate to its largest
// finite value (finfo(float32).min, exports' mask value, as -inf makes 0 · -inf = NaN);
// infinities and NaN stay what they are.
TEST_CASE("weights written in half precision saturate, not overflow", "[weights]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {-3.4028235e38f, 3.4028235e38f, 65520.0f, -70000.0f,
                                     1.5f,           -inf,          inf,      65535.0f};
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  const tpc::ir::Tensor w = tpc::ir::Tensor::FromBytes(
      tpc::ir::DType::kF32, {static_cast<int64_t>(values.size())}, bytes);
  for (const tpc::ir::DType to : {tpc::ir::DType::kF16, tpc::ir::DType::kBF16}) {
    std::ostringstream out;
    REQUIRE(tpc::partition::WriteSlice(w, Placement::Replicate(), 0, 1, out, to).ok());
    const std::string written = out.str();
    REQUIRE(written.size() == values.size() * 2);
    std::vector<float> got;
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, written.data() + 2 * i, 2);
      got.push_back(to == tpc::ir::DType::kF16 ? tpc::HalfToFloat(h) : tpc::BFloat16ToFloat(h));
    }
    const float top = to == tpc::ir::DType::kF16 ? 65504.0f : 3.3895314e38f;
    const bool f16 = to == tpc::ir::DType::kF16;
    CHECK(got == std::vector<float>{-top, top, f16 ? top : 65536.0f, f16 ? -top : -70144.0f, 1.5f,
                                    -inf, inf, f16 ? top : 65536.0f});
  }
}
