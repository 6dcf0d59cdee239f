// Quoting of names and strings in the IR text form.
#pragma once

#include <string>
#include <string_view>

namespace tpc::ir {

// The characters of a value name, and of a domain, written without quotes: the printer
// quotes a name with any other, and the parser reads a bare one up to the first other.
constexpr bool IsBareDomainChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}
constexpr bool IsBareValueChar(char c) { return IsBareDomainChar(c) || c == '/' || c == '-'; }

// `"..."` with C escapes for quotes, backslashes and control characters.
std::string Quote(std::string_view s);
// `name` as is when it is a plain identifier, else Quote(name).
std::string QuoteIfNeeded(std::string_view s);

}  // namespace tpc::ir
