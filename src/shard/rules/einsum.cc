// Einsum: the rule is the equation. Each letter is a factor, carried by every dim it
// labels; a letter of the output passes, a letter summed away reduces (P(sum)), a letter
// repeated within one operand (a diagonal) needs whole. The dims under `...` are
// factors too, aligned from the right across operands (numpy broadcasting: an operand
// whose dim is 1 there does not carry it); they pass when the output has `...`. Einsum
// is linear in each operand.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "rules.h"

namespace tpc::shard::rules {
namespace {

// An equation with every dim labelled: letters as themselves, the broadcast dims under
// `...` as -1, -2, ... (-1 - e for the e-th of all operands' broadcast dims, counted
// from the left of the longest).
struct EinsumEquation {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  int64_t ellipsis_dims = 0;
  bool output_has_ellipsis = false;
};

// Nullopt when the equation does not parse or does not fit the operands' ranks.
std::optional<EinsumEquation> ParseEinsum(const std::string& equation,
                                          const std::vector<int64_t>& ranks) {
  std::string eq;
  for (char c : equation) {
    if (c != ' ') eq += c;
  }
  EinsumEquation out;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != ranks.size()) return std::nullopt;
  // A term's labels, with kEllipsis standing for its `...` dims (expanded below).
  constexpr char kEllipsis = '.';
  auto labels = [&](const std::string& term) -> std::optional<std::string> {
    std::string l;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        if (l.find(kEllipsis) != std::string::npos) return std::nullopt;
        l += kEllipsis;
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
        l += term[i];
      } else {
        return std::nullopt;
      }
    }
    return l;
  };
  std::vector<std::string> in_labels;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto l = labels(terms[i]);
    if (!l) return std::nullopt;
    const bool ell = l->find(kEllipsis) != std::string::npos;
    const int64_t named = static_cast<int64_t>(l->size()) - (ell ? 1 : 0);
    if (ell ? named > ranks[i] : named != ranks[i]) return std::nullopt;
    out.ellipsis_dims = std::max(out.ellipsis_dims, ell ? ranks[i] - named : 0);
    in_labels.push_back(*l);
  }
  std::string out_labels;
  if (arrow != std::string::npos) {
    auto l = labels(eq.substr(arrow + 2));
    if (!l) return std::nullopt;
    out_labels = *l;
  } else {
    // Implicit output: the broadcast dims, then the letters used once, sorted.
    std::map<char, int> uses;
    for (const std::string& l : in_labels) {
      for (char c : l) {
        if (c != kEllipsis) ++uses[c];
      }
    }
    if (out.ellipsis_dims > 0) out_labels += kEllipsis;
    for (const auto& [c, n] : uses) {
      if (n == 1) out_labels += c;
    }
  }
  out.output_has_ellipsis = out_labels.find(kEllipsis) != std::string::npos;
  // Expand `...` into the broadcast dims' labels: "0", "1", ... as negative letters.
  auto expand = [&](const std::string& l, int64_t rank) {
    std::vector<int> dims;
    const int64_t named = static_cast<int64_t>(l.size()) - (l.find(kEllipsis) != l.npos ? 1 : 0);
    for (char c : l) {
      if (c != kEllipsis) {
        dims.push_back(c);
        continue;
      }
      const int64_t k = rank - named;  // this operand's broadcast dims, the last k of all
      for (int64_t e = out.ellipsis_dims - k; e < out.ellipsis_dims; ++e) {
        dims.push_back(-1 - static_cast<int>(e));
      }
    }
    return dims;
  };
  for (size_t i = 0; i < in_labels.size(); ++i)
    out.inputs.push_back(expand(in_labels[i], ranks[i]));
  const int64_t out_named =
      static_cast<int64_t>(out_labels.size()) - (out.output_has_ellipsis ? 1 : 0);
  out.output = expand(out_labels, out_named + (out.output_has_ellipsis ? out.ellipsis_dims : 0));
  for (int label : out.output) {
    if (label >= 0 && std::none_of(out.inputs.begin(), out.inputs.end(), [&](const auto& in) {
          return std::find(in.begin(), in.end(), label) != in.end();
        })) {
      return std::nullopt;  // an output letter no input has
    }
  }
  return out;
}

std::optional<EinsumEquation> EquationOf(const RuleContext& ctx) {
  if (!ctx.node().has_attr("equation") || !ctx.node().output(0)->type().has_rank()) {
    return std::nullopt;
  }
  std::vector<int64_t> ranks;
  for (int i = 0; i < ctx.num_inputs(); ++i) ranks.push_back(ctx.input_rank(i));
  auto eq = ParseEinsum(ctx.node().attr_string("equation", ""), ranks);
  if (!eq || eq->output.size() != ctx.output_dims(0).size()) return std::nullopt;
  return eq;
}

// Every label with its size: the output's dim, else the first input dim that is not a
// broadcast 1.
std::map<int, ir::Dim> LabelSizes(const RuleContext& ctx, const EinsumEquation& eq) {
  std::map<int, ir::Dim> sizes;
  const std::vector<ir::Dim>& y = ctx.output_dims(0);
  for (size_t d = 0; d < eq.output.size(); ++d) sizes.emplace(eq.output[d], y[d]);
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    const std::vector<ir::Dim>& dims = ctx.input_dims(static_cast<int>(i));
    for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
      auto it = sizes.find(eq.inputs[i][d]);
      if (it == sizes.end()) {
        sizes.emplace(eq.inputs[i][d], dims[d]);
      } else if (it->second == ir::Dim(1)) {
        it->second = dims[d];
      }
    }
  }
  return sizes;
}

}  // namespace

void Einsum(const RuleContext& ctx, std::vector<Strategy>* out) {
  auto eq = EquationOf(ctx);
  if (!eq) return;
  using Kind = FactorSpec::Kind;
  const std::map<int, ir::Dim> sizes = LabelSizes(ctx, *eq);
  FactorSpecBuilder b(ctx);
  for (const auto& [label, size] : sizes) {
    const int l = label;  // not captured as a structured binding
    auto count = [l](const std::vector<int>& dims) {
      return std::count(dims.begin(), dims.end(), l);
    };
    Kind kind = count(eq->output) > 0 ? Kind::kPass : Kind::kReduceSum;
    // A broadcast dim the output drops: numpy sums it, but keep it whole to be safe.
    if (l < 0 && !eq->output_has_ellipsis) kind = Kind::kNeedWhole;
    std::vector<int64_t> in_dims(eq->inputs.size(), FactorSpecBuilder::kNone);
    for (size_t i = 0; i < eq->inputs.size(); ++i) {
      const std::vector<int>& labels = eq->inputs[i];
      if (count(labels) > 1) kind = Kind::kNeedWhole;  // a diagonal
      const auto it = std::find(labels.begin(), labels.end(), l);
      if (it == labels.end()) continue;
      const size_t d = static_cast<size_t>(it - labels.begin());
      // A broadcast 1 does not carry the factor (that operand stays whole there); a dim
      // that may be 1 or not (FitOf) keeps the factor whole, a letter's as well as one
      // under `...` (the kernels broadcast a letter's 1s too).
      const BroadcastFit fit = FitOf(ctx.input_dims(static_cast<int>(i))[d], size);
      if (fit != BroadcastFit::kBroadcast) in_dims[i] = static_cast<int64_t>(d);
      if (fit == BroadcastFit::kUnsure) kind = Kind::kNeedWhole;
    }
    if (count(eq->output) > 1) kind = Kind::kNeedWhole;
    std::vector<int64_t> out_dims = {FactorSpecBuilder::kNone};
    const auto it = std::find(eq->output.begin(), eq->output.end(), l);
    if (it != eq->output.end()) out_dims[0] = it - eq->output.begin();
    const std::string name =
        l >= 0 ? std::string(1, static_cast<char>(l)) : "... " + std::to_string(-1 - l);
    b.Add(kind, in_dims, out_dims, name);
  }
  FactorSpec spec = b.Build();
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    spec.inputs[i].resize(ctx.input_dims(static_cast<int>(i)).size(), -1);
  }
  spec.outputs[0].resize(ctx.output_dims(0).size(), -1);
  AddFactorStrategies(ctx, spec, out);
  for (int i = 0; i < ctx.num_inputs(); ++i) AddPartialStrategy(ctx, {i}, out);
}

// 2 FLOPs per point of the iteration space (every label's size multiplied) and operand
// beyond the first.
double EinsumFlops(const RuleContext& ctx) {
  auto eq = EquationOf(ctx);
  if (!eq) return OutputElements(ctx);
  double points = 1;
  for (const auto& entry : LabelSizes(ctx, *eq)) points *= ctx.Size(entry.second);
  return points * 2 * static_cast<double>(std::max(1, ctx.num_inputs() - 1));
}

}  // namespace tpc::shard::rules
