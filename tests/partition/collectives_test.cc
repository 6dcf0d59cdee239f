// The collectives the partition stage inserts into the committed transformers, with no
// annotation: Megatron's two all-reduces per layer (or, with sequence parallelism, two
// all-gathers and two reduce-scatters and no all-reduce), the vocab-parallel loss's
// three small all-reduces, and bytes per layer equal to Megatron's figure
// 2 · b·s·h · sizeof(f32) (each way with sequence parallelism).
//
// Both views are checked and must agree: the collectives the shard stage planned
// (ShardResult::collectives, what report.json lists) and the tpc-domain ops actually
// inserted into the partitioned graph. A collective belongs to the layer of the block
// it serves: a reduction to the nearest weight MatMul/Gemm upstream (the row block that
// made the partial sums), a gather to the nearest one downstream (the column block it
// feeds), the layer read from that block's or its weight's name ("h.0", "layers.1",
// "layer.0"); that works for the dynamo export too, whose values are named `add_5`,
// `view_7`. Where the export names values by layer, the collectives' own names must
// say the same. A gather of an embedding lookup belongs to no layer.
#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/importer.h"
#include "tpc/partition/partition.h"
#include "tpc/shard/cost_model.h"
#include "tpc/shard/shard_pass.h"

namespace {

using tpc::ir::Graph;
using tpc::ir::Node;
using tpc::ir::Value;
using tpc::shard::CollectiveKind;

constexpr int kLayers = 2;      // every committed transformer has two
constexpr int64_t kBatch = 8;   // --dim batch=8
constexpr int64_t kSeq = 2048;  // --dim seq=2048
constexpr int64_t kF32 = 4;     // sizeof(float)

struct ModelSpec {
  const char* name;
  int64_t hidden;
  bool names_have_layers;  // value / node names carry "h.0", "layers.0", ...
  // LayerNorm after each sub-block (BERT): the gather before a layer's column block
  // moves the previous sub-block's (or the embeddings') LayerNorm output, and carries
  // that name.
  bool post_ln;
  // An untied embedding table splits on hidden: its lookup is all-gathered ([b, s, h],
  // the bytes of Megatron's vocab-parallel all-reduce there). With sequence
  // parallelism that gather also feeds layer 0's first column block (the norm between
  // runs replicated), so layer 0 has one all-gather of its own, not two, and the
  // forward one collective fewer than Megatron's. GPT-2's tied table is split by
  // vocab instead (an all-reduce, or a reduce-scatter with SP, outside the layers).
  bool embedding_gather;
};

const ModelSpec kGpt2{"gpt2", 64, true, false, false};
const ModelSpec kGpt2Dynamo{"gpt2_dynamo", 64, false, false, false};
const ModelSpec kGpt2Loss{"gpt2_loss", 64, true, false, false};
const ModelSpec kLlama{"llama", 64, true, false, true};
const ModelSpec kMistral{"mistral", 64, true, false, true};
const ModelSpec kBert{"bert", 64, true, true, true};
const ModelSpec kPhi3{"phi3", 64, true, false, true};
const ModelSpec kPhi3Gqa{"phi3_gqa", 64, true, false, true};

// Megatron's bytes of one per-layer collective: an activation [b, s, h] in f32.
double MegatronBytes(const ModelSpec& spec) {
  return static_cast<double>(kBatch * kSeq * spec.hidden * kF32);
}

std::optional<int> LayerOfName(const std::string& name) {
  static const std::regex re(R"((?:^|[./])(?:h|layers|layer)\.(\d+)[./])");
  std::smatch m;
  if (std::regex_search(name, m, re)) return std::stoi(m[1]);
  return std::nullopt;
}

// The layer named by a node: its own name, or one of its inputs' or outputs' names
// (a weight `m.transformer.h.0.attn.c_proj.weight` names the Gemm's layer).
std::optional<int> LayerOfNode(const Node* n) {
  if (auto l = LayerOfName(n->name())) return l;
  for (const Value* v : n->inputs()) {
    if (v == nullptr) continue;
    if (auto l = LayerOfName(v->name())) return l;
  }
  for (const Value* v : n->outputs()) {
    if (auto l = LayerOfName(v->name())) return l;
  }
  return std::nullopt;
}

// A MatMul or Gemm that reads a weight: a column or row block (or the LM head).
bool IsBlock(const Node* n) {
  if (!n->is_call() || (n->op_type() != "MatMul" && n->op_type() != "Gemm")) return false;
  for (const Value* in : n->inputs()) {
    if (in != nullptr && in->producer()->kind() == tpc::ir::NodeKind::kConstant) return true;
  }
  return false;
}

// The layer of the nearest block upstream of `start` (none when that block is outside
// the layers or there is none): the block whose partial sums a reduction combines.
std::optional<int> LayerUpstream(const Value* start) {
  std::deque<std::pair<const Node*, int>> queue = {{start->producer(), 0}};
  std::set<const Node*> seen;
  while (!queue.empty()) {
    auto [n, depth] = queue.front();
    queue.pop_front();
    if (!seen.insert(n).second) continue;
    if (IsBlock(n)) return LayerOfNode(n);
    if (depth >= 8) continue;
    for (const Value* in : n->inputs()) {
      if (in != nullptr) queue.push_back({in->producer(), depth + 1});
    }
  }
  return std::nullopt;
}

// The layer of the nearest block downstream of `start`: the block a gather feeds.
std::optional<int> LayerDownstream(const Value* start) {
  std::deque<std::pair<const Node*, int>> queue;
  for (const auto& use : start->uses()) queue.push_back({use.user, 0});
  std::set<const Node*> seen;
  while (!queue.empty()) {
    auto [n, depth] = queue.front();
    queue.pop_front();
    if (!seen.insert(n).second) continue;
    if (IsBlock(n)) return LayerOfNode(n);
    if (depth >= 8) continue;
    for (const Value* out : n->outputs()) {
      for (const auto& use : out->uses()) queue.push_back({use.user, depth + 1});
    }
  }
  return std::nullopt;
}

// The output of an embedding lookup (a Gather from a constant table) or a sum of them.
bool IsEmbeddingOutput(const Value* v) {
  const Node* p = v->producer();
  if (!p->is_call()) return false;
  if (p->op_type() == "Gather") {
    return p->input(0)->producer()->kind() == tpc::ir::NodeKind::kConstant;
  }
  if (p->op_type() != "Add") return false;
  for (const Value* in : p->inputs()) {
    if (!IsEmbeddingOutput(in)) return false;
  }
  return true;
}

bool IsReduction(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter;
}

// One collective of either view, with what the checks need (no pointers: the planned
// ones' values do not survive partitioning).
struct Collective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::string reduce;
  double bytes = 0;                  // whole-tensor bytes at the --dim sizes
  std::optional<int> layer_by_name;  // named in its node's or values' names
  std::optional<int> layer_by_flow;  // of the block it serves: what the counts use
  bool internal = false;             // planned inside an op (vocab-parallel softmax / loss)
  bool embedding = false;            // gathers an embedding lookup's output: in no layer
  std::string type;                  // inserted ops: the moved value's type
  std::string what;                  // for messages
};

const char* ReduceName(tpc::ir::ReduceOp op) { return tpc::ir::ReduceOpName(op); }

// Size of a dim at the --dim sizes (every symbol the committed models use is set).
double DimSize(const tpc::ir::Dim& d, const std::map<std::string, int64_t>& sizes) {
  REQUIRE_FALSE(d.is_unknown());
  double total = 0;
  for (const auto& t : d.terms()) {
    double term = static_cast<double>(t.coeff) / static_cast<double>(t.den);
    for (const std::string& s : t.symbols) {
      INFO("symbol " << s);
      REQUIRE(sizes.count(s) == 1);
      term *= static_cast<double>(sizes.at(s));
    }
    total += term;
  }
  return total;
}

double Bytes(const tpc::ir::TensorType& t, const std::map<std::string, int64_t>& sizes) {
  REQUIRE(t.shape.has_value());
  double bytes = static_cast<double>(tpc::ir::DTypeSize(t.dtype));
  for (const tpc::ir::Dim& d : *t.shape) bytes *= DimSize(d, sizes);
  return bytes;
}

std::optional<CollectiveKind> KindOfOp(const Node* n) {
  if (!n->is_call() || n->domain() != tpc::partition::kTpcDomain) return std::nullopt;
  if (n->op_type() == "AllReduce") return CollectiveKind::kAllReduce;
  if (n->op_type() == "AllGather") return CollectiveKind::kAllGather;
  if (n->op_type() == "ReduceScatter") return CollectiveKind::kReduceScatter;
  if (n->op_type() == "AllToAll") return CollectiveKind::kAllToAll;
  return std::nullopt;  // tpc::Shard is local
}

struct Compiled {
  std::vector<Collective> planned;
  std::vector<Collective> inserted;
  tpc::partition::PartitionStats stats;
  std::string loss_tokens;  // gpt2_loss: dim 0 of the loss's scores ("" otherwise)
};

Compiled Compile(const ModelSpec& spec, int n, bool sp) {
  auto graph = tpc::testing::ImportCommitted(spec.name);
  tpc::shard::ShardOptions options = tpc::testing::TpOptions(n, sp);
  options.dim_sizes = {{"batch", kBatch}, {"seq", kSeq}};
  auto result = tpc::shard::ShardGraph(*graph, options);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  Compiled out;
  for (const tpc::shard::PlannedCollective& c : result->collectives) {
    Collective p;
    p.kind = c.kind;
    p.reduce = ReduceName(c.reduce);
    p.bytes = c.bytes;
    p.internal = c.internal;
    if (c.value != nullptr) {
      p.what = c.value->name();
      p.layer_by_name = LayerOfName(c.value->name());
      p.embedding = !IsReduction(c.kind) && IsEmbeddingOutput(c.value);
      if (!p.embedding) {
        p.layer_by_flow = IsReduction(c.kind) ? LayerUpstream(c.value) : LayerDownstream(c.value);
      }
    } else if (c.user != nullptr) {
      p.what = c.user->name();
      p.layer_by_name = LayerOfName(c.user->name());
      p.layer_by_flow = LayerOfNode(c.user);
    }
    out.planned.push_back(p);
  }
  for (Node* node : graph->nodes()) {
    if (node->is_call() && node->op_type() == "SoftmaxCrossEntropyLoss") {
      out.loss_tokens = (*node->input(0)->type().shape)[0].ToString();
    }
  }
  auto stats = tpc::partition::PartitionGraph(*graph, *result, options);
  INFO(stats.status().ToString());
  REQUIRE(stats.ok());
  out.stats = *stats;
  const std::map<std::string, int64_t>& sizes = options.dim_sizes;
  for (Node* node : graph->nodes()) {
    const std::optional<CollectiveKind> kind = KindOfOp(node);
    if (!kind) continue;
    Collective c;
    c.kind = *kind;
    c.reduce = node->attr_string("reduce", "sum");
    c.what = node->name();
    // Whole-tensor bytes: what a reduction reduces (its input, P), what a gather makes.
    const Value* whole = *kind == CollectiveKind::kReduceScatter ? node->input(0) : node->output(0);
    c.bytes = Bytes(whole->type(), sizes);
    c.type = node->output(0)->type().ToString();
    c.layer_by_name = LayerOfNode(node);
    c.embedding = !IsReduction(*kind) && IsEmbeddingOutput(node->input(0));
    if (!c.embedding) {
      c.layer_by_flow =
          IsReduction(*kind) ? LayerUpstream(node->input(0)) : LayerDownstream(node->output(0));
    }
    out.inserted.push_back(c);
  }
  return out;
}

std::string Describe(const std::vector<Collective>& cs) {
  std::string out;
  for (const Collective& c : cs) {
    auto layer = [](std::optional<int> l) { return l ? std::to_string(*l) : std::string("-"); };
    out += std::string(tpc::shard::CollectiveName(c.kind)) + "(" + c.reduce + ") " + c.what + " " +
           c.type + " bytes=" + std::to_string(static_cast<int64_t>(c.bytes)) +
           " layer name/flow=" + layer(c.layer_by_name) + "/" + layer(c.layer_by_flow) +
           (c.internal ? " internal" : "") + (c.embedding ? " embedding" : "") + "\n";
  }
  return out;
}

// Per layer and kind: how many, and their bytes.
struct LayerCount {
  int count = 0;
  double bytes = 0;
};
using PerLayer = std::map<int, std::map<CollectiveKind, LayerCount>>;

PerLayer ByLayer(const std::vector<Collective>& cs) {
  PerLayer out;
  for (const Collective& c : cs) {
    if (c.internal) continue;
    if (auto l = c.layer_by_flow) {
      LayerCount& lc = out[*l][c.kind];
      ++lc.count;
      lc.bytes += c.bytes;
    }
  }
  return out;
}

// Each per-layer collective moves one [b, s, h] f32 activation.
void CheckEachIsOneActivation(const std::vector<Collective>& cs, const ModelSpec& spec) {
  for (const Collective& c : cs) {
    if (c.internal || !c.layer_by_flow) continue;
    INFO(c.what);
    CHECK(c.bytes == MegatronBytes(spec));
  }
}

void CheckLayers(const ModelSpec& spec, int n, bool sp) {
  const Compiled c = Compile(spec, n, sp);
  INFO(spec.name << " N=" << n << (sp ? " SP" : "") << "\nplanned:\n"
                 << Describe(c.planned) << "inserted:\n"
                 << Describe(c.inserted));
  // Every planned collective is inserted, and nothing else.
  CHECK(c.inserted.size() == c.planned.size());
  CHECK(static_cast<int>(c.inserted.size()) == c.stats.collectives);

  for (const std::vector<Collective>* view : {&c.planned, &c.inserted}) {
    const PerLayer layers = ByLayer(*view);
    REQUIRE(layers.size() == kLayers);
    double gathered = 0;  // all-gather bytes in layers and of the embedding
    for (const Collective& x : *view) {
      if (x.embedding) gathered += x.bytes;
    }
    CHECK(gathered == (spec.embedding_gather ? MegatronBytes(spec) : 0.0));
    for (const auto& [layer, kinds] : layers) {
      INFO("layer " << layer);
      auto count = [&](CollectiveKind k) { return kinds.count(k) > 0 ? kinds.at(k).count : 0; };
      auto bytes = [&](CollectiveKind k) { return kinds.count(k) > 0 ? kinds.at(k).bytes : 0.0; };
      // Megatron, per layer and forward: 2 all-reduces of b·s·h·4 bytes; with
      // sequence parallelism the same bytes as 2 all-gathers + 2 reduce-scatters.
      const double megatron = 2 * MegatronBytes(spec);
      if (!sp) {
        CHECK(count(CollectiveKind::kAllReduce) == 2);
        CHECK(bytes(CollectiveKind::kAllReduce) == megatron);
        CHECK(count(CollectiveKind::kAllGather) == 0);
        CHECK(count(CollectiveKind::kReduceScatter) == 0);
      } else {
        const int own_gathers = layer == 0 && spec.embedding_gather ? 1 : 2;
        CHECK(count(CollectiveKind::kAllReduce) == 0);
        CHECK(count(CollectiveKind::kAllGather) == own_gathers);
        CHECK(count(CollectiveKind::kReduceScatter) == 2);
        CHECK(bytes(CollectiveKind::kAllGather) == own_gathers * MegatronBytes(spec));
        CHECK(bytes(CollectiveKind::kReduceScatter) == megatron);
        gathered += bytes(CollectiveKind::kAllGather);
      }
      CHECK(count(CollectiveKind::kAllToAll) == 0);
    }
    // With SP, the layers' gathers and the embedding's: Megatron's 2 per layer in bytes.
    if (sp) CHECK(gathered == kLayers * 2 * MegatronBytes(spec));
    CheckEachIsOneActivation(*view, spec);
  }
  if (spec.names_have_layers) {
    // Where the export names values by layer, the names say the same: every reduction
    // is named after the row block it follows, every gather (pre-LN models) after the
    // norm that feeds its column block.
    for (const std::vector<Collective>* view : {&c.planned, &c.inserted}) {
      for (const Collective& x : *view) {
        if (x.internal || (spec.post_ln && !IsReduction(x.kind))) continue;
        INFO(x.what);
        CHECK(x.layer_by_flow == x.layer_by_name);
      }
    }
  }
}

}  // namespace

TEST_CASE("collectives per layer: GPT-2 (legacy and dynamo) and BERT at N=2 and 4",
          "[partition][collectives]") {
  for (const ModelSpec* spec : {&kGpt2, &kGpt2Dynamo, &kBert}) {
    for (int n : {2, 4}) {
      for (bool sp : {false, true}) {
        DYNAMIC_SECTION(spec->name << " N=" << n << (sp ? " SP" : "")) {
          CheckLayers(*spec, n, sp);
        }
      }
    }
  }
}

TEST_CASE("collectives per layer: Phi-3 (fused projections cut by Slice) at N=2 and 4",
          "[partition][collectives]") {
  // (The dynamo exports name their folded weights val_N, so layers are not attributed
  // here; megatron_test checks them through the nodes' module scopes.)
  for (const ModelSpec* spec : {&kPhi3}) {
    for (int n : {2, 4}) {
      for (bool sp : {false, true}) {
        DYNAMIC_SECTION(spec->name << " N=" << n << (sp ? " SP" : "")) {
          CheckLayers(*spec, n, sp);
        }
      }
    }
  }
}

TEST_CASE("collectives per layer: Llama, Mistral and Phi-3 with GQA at N=2",
          "[partition][collectives]") {
  for (const ModelSpec* spec : {&kLlama, &kMistral, &kPhi3Gqa}) {
    for (bool sp : {false, true}) {
      DYNAMIC_SECTION(spec->name << (sp ? " SP" : "")) { CheckLayers(*spec, 2, sp); }
    }
  }
}

// The lowered vocab-parallel cross-entropy: a max and two sums over the split class
// dim, each of one value per token ([tokens, 1]), on top of the layers' collectives.
TEST_CASE("collectives: the vocab-parallel loss costs 3 small all-reduces",
          "[partition][collectives]") {
  for (int n : {2, 4}) {
    for (bool sp : {false, true}) {
      DYNAMIC_SECTION("gpt2_loss N=" << n << (sp ? " SP" : "")) {
        CheckLayers(kGpt2Loss, n, sp);
        const Compiled c = Compile(kGpt2Loss, n, sp);
        INFO("planned:\n" << Describe(c.planned) << "inserted:\n" << Describe(c.inserted));
        REQUIRE_FALSE(c.loss_tokens.empty());
        const std::string row = "f32[" + c.loss_tokens + ", 1]";
        std::vector<std::string> reduces;
        for (const Collective& x : c.inserted) {
          if (x.type == row) {
            CHECK(x.kind == CollectiveKind::kAllReduce);
            CHECK_FALSE(x.layer_by_name.has_value());
            reduces.push_back(x.reduce);
          }
        }
        CHECK(reduces == std::vector<std::string>{"max", "sum", "sum"});
        // The shard stage plans them inside the loss op, with their [tokens, 1] bytes.
        std::vector<std::string> internal;
        for (const Collective& x : c.planned) {
          if (!x.internal) continue;
          CHECK(x.kind == CollectiveKind::kAllReduce);
          internal.push_back(x.reduce);
          CHECK(x.bytes < MegatronBytes(kGpt2Loss) / 32);
        }
        CHECK(internal.size() == 3);
      }
    }
  }
}
