// Quoting of names and strings in the IR text form.
#pragma once

#include <string>
#include <string_view>

namespace tpc::ir {

// `"..."` with C escapes for quotes, backslashes and control characters.
std::string Quote(std::string_view s);
// `name` as is when it is a plain identifier, else Quote(name).
std::string QuoteIfNeeded(std::string_view s);

}  // namespace tpc::ir
