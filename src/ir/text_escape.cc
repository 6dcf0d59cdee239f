#include "tpc/ir/text_escape.h"

#include "absl/strings/escaping.h"
#include "tpc/ir/dim.h"

namespace tpc::ir {

std::string Quote(std::string_view s) {
  return "\"" + absl::CEscape(absl::string_view(s.data(), s.size())) + "\"";
}

std::string QuoteIfNeeded(std::string_view s) {
  return IsPlainIdentifier(s) ? std::string(s) : Quote(s);
}

}  // namespace tpc::ir
