// Did-you-mean for names given on the command line (a dim, a value, a pattern): the
// candidates closest to a mistyped name by edit distance, and the message that lists
// them, so that a typo is an error that says what was meant, never silently ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpc {

// Levenshtein distance (insertions, deletions, substitutions; case-sensitive).
size_t EditDistance(std::string_view a, std::string_view b);

// Up to `max` candidates within a distance of max(2, |name| / 3) of `name`, closest first
// (ties in the candidates' order).
std::vector<std::string> ClosestNames(std::string_view name,
                                      const std::vector<std::string>& candidates, size_t max = 3);

// "<flag> 'name': the model has no such <kind> (its <kind>s: a, b, c); did you mean
// 'b'?" (the list cut after 12 names; no suggestion when none is close).
std::string UnknownNameMessage(const std::string& flag, const std::string& kind,
                               const std::string& name, const std::vector<std::string>& candidates);

// "; did you mean 'a' or 'b'?" with the (up to 3) closest candidates, or "" when none is
// close: to append to a message.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace tpc
