#include <algorithm>
#include <string>
#include <utility>

#include "rules.h"

namespace tpc::shard::rules {

int64_t NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

bool Constrains(const Constraints& constraints, const std::vector<const ir::Node*>& nodes) {
  auto named = [&](const ir::Value* v) {
    if (v == nullptr) return false;
    if (constraints.allowed.count(v) > 0) return true;
    for (const auto& group : constraints.groups) {
      if (std::find(group.begin(), group.end(), v) != group.end()) return true;
    }
    return false;
  };
  for (const ir::Node* n : nodes) {
    if (constraints.node_strategies.count(n) > 0) return true;
    for (const ir::Value* v : n->inputs()) {
      if (named(v)) return true;
    }
    for (const ir::Value* v : n->outputs()) {
      if (named(v)) return true;
    }
  }
  return false;
}

bool OutputsTyped(const RuleContext& ctx) {
  for (const ir::Value* o : ctx.node().outputs()) {
    if (!o->type().has_rank()) return false;
  }
  return true;
}

Strategy ReplicatedInputs(const RuleContext& ctx, std::string name) {
  Strategy s;
  s.name = std::move(name);
  s.inputs.assign(static_cast<size_t>(ctx.num_inputs()), ir::Placement::Replicate());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) s.inputs[static_cast<size_t>(i)] = std::nullopt;
  }
  return s;
}

double OutputElements(const RuleContext& ctx) {
  double out = 0;
  for (const ir::Value* o : ctx.node().outputs()) {
    if (!o->type().shape) continue;
    double e = 1;
    for (const ir::Dim& d : *o->type().shape) e *= ctx.Size(d);
    out += e;
  }
  return out;
}

std::optional<std::vector<ReshapeGroup>> ReshapeGroups(const std::vector<ir::Dim>& in,
                                                       const std::vector<ir::Dim>& out) {
  std::vector<ReshapeGroup> groups;
  const ir::Dim one(1);
  size_t i = 0;
  size_t j = 0;
  while (i < in.size() || j < out.size()) {
    if (i < in.size() && in[i] == one) {
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == one) {
      ++j;
      continue;
    }
    if (i == in.size() || j == out.size()) return std::nullopt;
    ReshapeGroup g{i, 0, j, 0};
    ir::Dim pa = in[i++];
    ir::Dim pb = out[j++];
    // Grow the side whose product divides the other's until the products match.
    while (!(pa == pb)) {
      if (pa.is_unknown() || pb.is_unknown()) return std::nullopt;
      if (auto q = pb.DivExact(pa); q && i < in.size()) {
        pa = pa * in[i++];
      } else if (auto r = pa.DivExact(pb); r && j < out.size()) {
        pb = pb * out[j++];
      } else {
        return std::nullopt;
      }
    }
    g.in_end = i;
    g.out_end = j;
    groups.push_back(g);
  }
  return groups;
}

bool ReshapeFactors(const RuleContext& ctx, const std::vector<ir::Dim>& in,
                    const std::vector<ir::Dim>& out, FactorSpec* spec, std::vector<int>* in_f,
                    std::vector<int>* out_f) {
  in_f->assign(in.size(), -1);
  out_f->assign(out.size(), -1);
  const auto groups = ReshapeGroups(in, out);
  if (!groups) return false;
  for (const ReshapeGroup& g : *groups) {
    // Splitting the major dim of a group N ways (or in g groups) cuts the flattened
    // group into the same contiguous chunks on both sides.
    if (ctx.Splittable(in[g.in_begin]) && ctx.Splittable(out[g.out_begin])) {
      int f = spec->AddFactor(FactorSpec::Kind::kPass, in[g.in_begin],
                              "d" + std::to_string(g.out_begin));
      (*in_f)[g.in_begin] = f;
      (*out_f)[g.out_begin] = f;
    }
  }
  return true;
}

}  // namespace tpc::shard::rules
