#include "tpc/shard/styles.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tpc/shard/op_record.h"
#include "tpc/util/status_macros.h"
#include "tpc/util/suggest.h"

namespace tpc::shard {
namespace {

using ir::Placement;

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The module a node was exported for, as a module path: '/model/layers.0/mlp/MatMul' ->
// 'model.layers.0.mlp'; "" for a name without that shape.
std::string ModulePathOf(const std::string& node_name) {
  const size_t last = node_name.rfind('/');
  if (node_name.empty() || node_name[0] != '/' || last == std::string::npos || last < 2) return "";
  std::string module = node_name.substr(1, last - 1);
  std::replace(module.begin(), module.end(), '/', '.');
  return module;
}

// A float constant of rank >= 1 that a node reads: what colwise/rowwise/replicate place.
bool IsWeightInput(const ir::Value* in) {
  return in != nullptr && in->producer()->kind() == ir::NodeKind::kConstant &&
         ir::IsFloating(in->type().dtype) && in->type().rank() >= 1;
}

bool Matches(const std::string& pattern, const std::string& name) {
  return !name.empty() && ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// `R`, `S(1)`, `S(-1)`, `S(2/3)`, `S(1@2)`, `P(sum)`; negative dims count from `rank`.
std::optional<Placement> ParsePlacementFor(const std::string& text, int64_t rank) {
  std::string t = text;
  if (t.size() > 3 && t[0] == 'S' && t[1] == '(' && t[2] == '-' && rank > 0) {
    // Normalise S(-k[/b]) to S(rank-k[/b]).
    const auto close = t.find_first_of("/@)");
    int64_t k = 0;
    if (!absl::SimpleAtoi(t.substr(3, close - 3), &k)) return std::nullopt;
    t = absl::StrCat("S(", rank - k, t.substr(close));
  }
  auto p = Placement::Parse(t);
  if (p && p->kind == Placement::Kind::kShard && (p->dim < 0 || p->dim >= rank))
    return std::nullopt;
  return p;
}

class StyleParser {
 public:
  StyleParser(const std::string& origin, const ir::Graph& graph, const ShardOptions& options)
      : origin_(origin), graph_(graph), options_(options) {}

  absl::Status Line(int number, const std::string& raw) {
    std::string line = Trim(raw.substr(0, raw.find('#')));
    if (line.empty()) return absl::OkStatus();
    where_ = absl::StrCat(origin_, ":", number);
    // Before splitting at the last colon: group members may contain colons themselves
    // (the legacy exporter's `onnx::MatMul_NNN`).
    if (line.rfind("group:", 0) == 0) return Group(Trim(line.substr(6)));
    const auto colon = line.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where_, ": expected 'PATTERN: STYLE', got '", line, "'"));
    }
    const std::string pattern = Trim(line.substr(0, colon));
    const std::string style = Trim(line.substr(colon + 1));
    if (pattern == "group") return Group(style);
    if (pattern.empty() || style.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where_, ": expected 'PATTERN: STYLE', got '", line, "'"));
    }
    static const char* kStyles[] = {"colwise", "rowwise", "replicate", "sequence"};
    bool known = false;
    for (const char* s : kStyles) known = known || style == s;
    if (!known && !Placement::Parse(style) && !(style.size() > 3 && style.rfind("S(-", 0) == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": unknown style '", style,
          "' (colwise, rowwise, replicate, sequence, or a placement like R, S(0), S(-1), S(2/3))"));
    }
    bool matched = false;
    for (ir::Node* n : graph_.nodes()) {
      if (n->kind() == ir::NodeKind::kConstant && Matches(pattern, n->output(0)->name())) {
        matched = true;
        TPC_RETURN_IF_ERROR(ApplyToWeight(n->output(0), style));
      } else if (n->is_call() && Matches(pattern, n->name())) {
        matched = true;
        TPC_RETURN_IF_ERROR(ApplyToNode(*n, style));
      } else if (n->is_call()) {
        for (const ir::Value* v : n->outputs()) {
          if (!Matches(pattern, v->name())) continue;
          matched = true;
          TPC_RETURN_IF_ERROR(ApplyToValue(v, style));
        }
      }
    }
    if (!matched && pattern.find('/') == std::string::npos) {
      TPC_ASSIGN_OR_RETURN(matched, ApplyToModule(pattern, style));
    }
    if (!matched) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": pattern '", pattern,
                                                     "' matches no initializer, node or value",
                                                     DidYouMean(pattern, Names(true))));
    }
    return absl::OkStatus();
  }

  Constraints Take() { return std::move(constraints_); }

 private:
  // What a pattern may name, for suggestions: value names, and with `all` initializer and
  // node names too.
  std::vector<std::string> Names(bool all) const {
    std::vector<std::string> names;
    for (const ir::Node* n : graph_.nodes()) {
      if (all && n->is_call() && !n->name().empty()) names.push_back(n->name());
      if (all && n->is_call() && !ModulePathOf(n->name()).empty()) {
        names.push_back(ModulePathOf(n->name()));
      }
      for (const ir::Value* v : n->outputs()) names.push_back(v->name());
    }
    return names;
  }

 public:
 private:
  absl::Status Allow(const ir::Value* v, Placement p) {
    auto& slot = constraints_.allowed[v];
    if (!slot.placements.empty() && !(slot.placements[0] == p)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where_, ": ", v->name(), " is already constrained to ",
                       slot.placements[0].ToString(), " by ", slot.origin));
    }
    slot.placements = {p};
    slot.origin = where_;
    return absl::OkStatus();
  }

  // The split a consumer gives colwise (output features) or rowwise (input features)
  // of a weight it reads, asking each consumer's record (through ops that pass the
  // question on, such as Transpose); nullopt when unknown.
  std::optional<int64_t> FeatureDim(const ir::Value* w, bool colwise, int depth = 0) const {
    if (depth > 4) return std::nullopt;
    for (const ir::Use& use : w->uses()) {
      const ir::Node& n = *use.user;
      if (!n.is_call()) continue;
      const OpRecord* record = FindOpRecord(n.domain(), n.op_type());
      if (record == nullptr || record->hooks.feature_dim == nullptr) continue;
      auto of_output = [&](const ir::Value* v) { return FeatureDim(v, colwise, depth + 1); };
      if (auto d = record->hooks.feature_dim(n, use.index, colwise, of_output)) return d;
    }
    return std::nullopt;
  }

  absl::Status ApplyToWeight(const ir::Value* w, const std::string& style) {
    const int64_t rank = w->type().rank();
    if (style == "replicate") return Allow(w, Placement::Replicate());
    if (style == "sequence") {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": 'sequence' applies to activations, not to the weight ", w->name()));
    }
    if (style == "colwise" || style == "rowwise") {
      auto dim = FeatureDim(w, style == "colwise");
      if (!dim) {
        if (style == "rowwise" && rank == 1) return Allow(w, Placement::Replicate());
        return absl::InvalidArgumentError(absl::StrCat(
            where_, ": cannot tell which dim of ", w->name(), " is its ",
            style == "colwise" ? "output" : "input",
            " features (no MatMul, Gemm or Gather reads it); give a placement like S(0)"));
      }
      return Allow(w, Placement::Shard(*dim));
    }
    auto p = ParsePlacementFor(style, rank);
    if (!p) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": ", style, " does not fit ",
                                                     w->name(), " of type ", w->type().ToString()));
    }
    return Allow(w, *p);
  }

  // A module path as DTensor plans write them (`model.layers.*.self_attn.q_proj`): the
  // nodes torch exported for the module (`/model/layers.0/self_attn/q_proj/MatMul`: the
  // node's path without its last part, '/' read as '.') that read a weight; or, where
  // node names say nothing (the dynamo exporter's), the module's `.weight` and `.bias`.
  // colwise, rowwise and replicate only. Returns whether the pattern named a module.
  absl::StatusOr<bool> ApplyToModule(const std::string& pattern, const std::string& style) {
    if (style != "colwise" && style != "rowwise" && style != "replicate") return false;
    auto has_weight = [](const ir::Node& n) {
      return std::any_of(n.inputs().begin(), n.inputs().end(), IsWeightInput);
    };
    // The exported model may wrap the one the plan was written for (`m.model.layers.0`
    // for `model.layers.0`): a module path also matches at the end of a longer one.
    auto module_matches = [&](const std::string& module) {
      return Matches(pattern, module) || Matches(absl::StrCat("*.", pattern), module);
    };
    bool matched = false;
    for (ir::Node* n : graph_.nodes()) {
      const std::string module = n->is_call() ? ModulePathOf(n->name()) : "";
      if (module.empty() || !module_matches(module) || !has_weight(*n)) continue;
      matched = true;
      if (style == "replicate") {
        for (const ir::Value* in : n->inputs()) {
          if (IsWeightInput(in)) TPC_RETURN_IF_ERROR(ApplyToWeight(in, style));
        }
      } else {
        TPC_RETURN_IF_ERROR(ApplyToNode(*n, style));
      }
    }
    if (matched) return true;
    for (ir::Node* n : graph_.nodes()) {
      if (n->kind() != ir::NodeKind::kConstant) continue;
      const std::string& name = n->output(0)->name();
      for (const char* suffix : {".weight", ".bias"}) {
        if (!absl::EndsWith(name, suffix) ||
            !module_matches(name.substr(0, name.size() - std::strlen(suffix)))) {
          continue;
        }
        // Row-parallel: the bias is added after the reduction, whole.
        if (style == "rowwise" && std::string(suffix) == ".bias") continue;
        matched = true;
        TPC_RETURN_IF_ERROR(ApplyToWeight(n->output(0), style));
      }
    }
    return matched;
  }

  absl::Status ApplyToNode(const ir::Node& n, const std::string& style) {
    if (style == "colwise" || style == "rowwise") {
      bool any = false;
      for (const ir::Value* in : n.inputs()) {
        if (!IsWeightInput(in)) continue;
        if (in->type().rank() == 1 && style == "rowwise") continue;  // bias after the reduction
        TPC_RETURN_IF_ERROR(ApplyToWeight(in, style));
        any = true;
      }
      if (!any) {
        return absl::InvalidArgumentError(
            absl::StrCat(where_, ": ", n.Describe(), " has no weight input for '", style, "'"));
      }
      return absl::OkStatus();
    }
    return ApplyToValue(n.output(0), style);
  }

  absl::Status ApplyToValue(const ir::Value* v, const std::string& style) {
    const int64_t rank = v->type().rank();
    if (style == "replicate") return Allow(v, Placement::Replicate());
    if (style == "sequence") {
      if (!v->type().shape)
        return absl::InvalidArgumentError(absl::StrCat(where_, ": ", v->name(), " has no shape"));
      for (size_t d = 0; d < v->type().shape->size(); ++d) {
        const ir::Dim& dim = (*v->type().shape)[d];
        if (dim.is_symbol() && dim.terms()[0].symbols[0] == options_.seq_symbol) {
          return Allow(v, Placement::Shard(static_cast<int64_t>(d)));
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(where_, ": ", v->name(), " of type ",
                                                     v->type().ToString(), " has no '",
                                                     options_.seq_symbol, "' dim"));
    }
    if (style == "colwise") return Allow(v, Placement::Shard(rank - 1));
    if (style == "rowwise") return Allow(v, Placement::Partial(ir::ReduceOp::kSum));
    auto p = ParsePlacementFor(style, rank);
    if (!p) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": ", style, " does not fit ",
                                                     v->name(), " of type ", v->type().ToString()));
    }
    return Allow(v, *p);
  }

  absl::Status Group(const std::string& list) {
    std::vector<const ir::Value*> members;
    for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      const std::string pattern = Trim(std::string(part));
      bool matched = false;
      for (ir::Node* n : graph_.nodes()) {
        for (const ir::Value* v : n->outputs()) {
          if (Matches(pattern, v->name())) {
            members.push_back(v);
            matched = true;
          }
        }
      }
      if (!matched) {
        return absl::InvalidArgumentError(absl::StrCat(where_, ": group member '", pattern,
                                                       "' matches no value",
                                                       DidYouMean(pattern, Names(false))));
      }
    }
    if (members.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where_, ": a group needs at least two values"));
    }
    // Groups that share a member merge.
    for (auto& g : constraints_.groups) {
      for (const ir::Value* m : members) {
        if (std::find(g.begin(), g.end(), m) != g.end()) {
          for (const ir::Value* x : members) {
            if (std::find(g.begin(), g.end(), x) == g.end()) g.push_back(x);
          }
          return absl::OkStatus();
        }
      }
    }
    constraints_.groups.push_back(std::move(members));
    return absl::OkStatus();
  }

  std::string origin_;
  const ir::Graph& graph_;
  const ShardOptions& options_;
  std::string where_;
  Constraints constraints_;
};

}  // namespace

absl::StatusOr<Constraints> ParseStyles(const std::string& text, const std::string& origin,
                                        const ir::Graph& graph, const ShardOptions& options) {
  StyleParser parser(origin, graph, options);
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) TPC_RETURN_IF_ERROR(parser.Line(++number, line));
  return parser.Take();
}

absl::StatusOr<Constraints> LoadStyles(const std::string& path, const ir::Graph& graph,
                                       const ShardOptions& options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--styles ", path, ": cannot read the file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseStyles(ss.str(), path, graph, options);
}

absl::StatusOr<std::vector<std::pair<std::string, Placement>>> ParseNamedPlacement(
    const std::string& arg, const ir::Graph& graph, bool input) {
  const char* flag = input ? "--input-placement" : "--output-placement";
  const auto eq = arg.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", arg, ": expected NAME=PLACEMENT"));
  }
  const std::string pattern = arg.substr(0, eq);
  const std::string text = arg.substr(eq + 1);
  std::vector<std::pair<std::string, Placement>> out;
  for (const ir::Value* v : input ? graph.inputs() : graph.outputs()) {
    if (!Matches(pattern, v->name())) continue;
    auto p = ParsePlacementFor(text, v->type().rank());
    if (!p || p->kind == Placement::Kind::kPartial) {
      // Say which: a form that is not a placement here, or a dim past the rank.
      const auto any = ParsePlacementFor(text, 64);
      const bool dim_out_of_range = !p && any && any->kind == Placement::Kind::kShard;
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", arg, ": '", text, "' ",
          dim_out_of_range
              ? absl::StrCat("splits a dim ", v->name(), " ", v->type().ToString(),
                             " does not have",
                             v->type().rank() == 0
                                 ? " (a scalar has none)"
                                 : absl::StrCat(" (its dims are 0 to ", v->type().rank() - 1,
                                                ", or -1 and below)"))
              : absl::StrCat("is not a placement of a graph ", input ? "input" : "output",
                             " (R, S(d), S(d/b) or S(d@g)) for ", v->name(), " ",
                             v->type().ToString())));
    }
    out.emplace_back(v->name(), *p);
  }
  if (out.empty()) {
    const bool glob = pattern.find_first_of("*?[") != std::string::npos;
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", arg, ": the model has no graph ",
                                                   input ? "input" : "output", " ",
                                                   glob ? "matching " : "", "'", pattern, "'"));
  }
  return out;
}

}  // namespace tpc::shard
