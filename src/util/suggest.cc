#include "tpc/util/suggest.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> ClosestNames(std::string_view name,
                                      const std::vector<std::string>& candidates, size_t max) {
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    size_t d = EditDistance(name, candidates[i]);
    // `sequence` for `seq`, `seq` for `seq_len`: one a prefix of the other is close too.
    const std::string_view c = candidates[i];
    if (!name.empty() && !c.empty() &&
        (c.substr(0, name.size()) == name || name.substr(0, c.size()) == c)) {
      d = std::min(d, limit);
    }
    if (d <= limit && candidates[i] != name) scored.emplace_back(d, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t k = 0; k < scored.size() && out.size() < max; ++k)
    out.push_back(candidates[scored[k].second]);
  return out;
}

std::string UnknownNameMessage(const std::string& flag, const std::string& kind,
                               const std::string& name,
                               const std::vector<std::string>& candidates) {
  constexpr size_t kListed = 12;
  std::string out = absl::StrCat(flag, " '", name, "': the model has no such ", kind);
  if (candidates.empty()) {
    absl::StrAppend(&out, " (it has none)");
  } else {
    std::vector<std::string> shown(candidates.begin(),
                                   candidates.begin() + std::min(candidates.size(), kListed));
    absl::StrAppend(&out, " (its ", kind, "s: ", absl::StrJoin(shown, ", "));
    if (candidates.size() > kListed) absl::StrAppend(&out, ", ... ", candidates.size(), " in all");
    absl::StrAppend(&out, ")");
  }
  const std::vector<std::string> close = ClosestNames(name, candidates, 1);
  if (!close.empty()) absl::StrAppend(&out, "; did you mean '", close[0], "'?");
  return out;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::vector<std::string> close = ClosestNames(name, candidates, 3);
  if (close.empty()) return "";
  std::vector<std::string> quoted;
  for (const std::string& c : close) quoted.push_back(absl::StrCat("'", c, "'"));
  return absl::StrCat("; did you mean ", absl::StrJoin(quoted, " or "), "?");
}

}  // namespace tpc
