#include "tpc/util/cli.h"

#include <cctype>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tpc::cli {

absl::StatusOr<int64_t> ParseByteSize(const std::string& flag, const std::string& text) {
  size_t split = 0;
  while (split < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[split])) || text[split] == '.')) {
    ++split;
  }
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text.substr(split)));
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"b", 1},
                                                          {"kb", 1e3},
                                                          {"mb", 1e6},
                                                          {"gb", 1e9},
                                                          {"tb", 1e12},
                                                          {"kib", 1024.0},
                                                          {"mib", 1048576.0},
                                                          {"gib", 1073741824.0},
                                                          {"tib", 1099511627776.0}};
  double scale = 0;
  for (const auto& [name, factor] : kUnits)
    if (unit == name) scale = factor;
  double number = 0;
  const double limit = 9.2e18;
  if (split == 0 || scale == 0 || !absl::SimpleAtod(text.substr(0, split), &number) ||
      !(number * scale >= 1) || number * scale > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " '", text,
                     "': expected a positive byte count like 123456, 512MiB, 1GB or 1.5GiB"));
  }
  return static_cast<int64_t>(number * scale);
}

std::optional<int> Prologue(const Parser& parser, const absl::StatusOr<Args>& args,
                            const std::string& version) {
  if (!args.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", parser.program().c_str(),
                 std::string(args.status().message()).c_str());
    return 2;
  }
  if (args->help()) {
    std::cout << parser.Usage();
    return 0;
  }
  if (struct sigaction xfsz{};
      sigaction(SIGXFSZ, nullptr, &xfsz) == 0 && xfsz.sa_handler == SIG_DFL) {
    std::signal(SIGXFSZ, SIG_IGN);
  }
  if (args->has("version")) {
    std::cout << parser.program() << " (tpc) " << version << "\n";
    return 0;
  }
  return std::nullopt;
}

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
      return 1;
    default:
      return 2;
  }
}

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() || it->second.empty() ? def : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& name) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(name);
  return it == values_.end() ? kEmpty : it->second;
}

const OptionSpec* Parser::Find(const std::string& name) const {
  for (const auto& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

absl::StatusOr<Args> Parser::Parse(int argc, char** argv) const {
  Args args;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-' || arg == "-") {
      args.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      args.help_ = true;
      continue;
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string value;
    bool has_inline = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    // Single-letter aliases: -o for --output.
    if (name == "o") name = "output";
    const OptionSpec* spec = Find(name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
    if (spec->value_name.empty()) {
      if (has_inline) {
        return absl::InvalidArgumentError(absl::StrCat("option --", name, " takes no value"));
      }
      value = "1";
    } else if (!has_inline) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("option --", name, " needs a value (", spec->value_name, ")"));
      }
      value = argv[++i];
    }
    auto& slot = args.values_[name];
    if (!slot.empty() && !spec->repeated) {
      // Given twice: the same value is harmless; two values are a mistake to say, not to
      // settle by order.
      if (slot.front() != value) {
        return absl::InvalidArgumentError(absl::StrCat("option --", name, " is given twice ('",
                                                       slot.front(), "' and '", value,
                                                       "'): give it once"));
      }
      continue;
    }
    slot.push_back(value);
  }
  return args;
}

namespace {

// `text` wrapped at 80 columns: the first line continues after `first_indent` columns
// already used, the others start with `indent` spaces. Words longer than a line stay whole.
std::string Wrap(const std::string& text, size_t first_indent, size_t indent) {
  constexpr size_t kWidth = 80;
  std::string out;
  size_t column = first_indent;
  bool first = true;
  for (const absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!first && column + 1 + word.size() > kWidth) {
      absl::StrAppend(&out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (!first) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
    first = false;
  }
  return out;
}

}  // namespace

std::string Parser::Usage() const {
  // The description keeps its paragraphs (blank lines) and its lines that start a new
  // sentence-paragraph ("Exit status: ..."); within one, lines are re-flowed to 80.
  std::string description;
  for (const absl::string_view paragraph : absl::StrSplit(description_, "\n\n")) {
    std::string flowed;
    for (const absl::string_view line : absl::StrSplit(paragraph, '\n')) {
      if (absl::StartsWith(line, "Exit status") && !flowed.empty()) {
        absl::StrAppend(&description, Wrap(flowed, 0, 0), "\n");
        flowed.clear();
      }
      absl::StrAppend(&flowed, flowed.empty() ? "" : " ", line);
    }
    absl::StrAppend(&description, description.empty() || description.back() == '\n' ? "" : "\n",
                    Wrap(flowed, 0, 0), "\n\n");
  }
  std::string out =
      absl::StrCat("usage: ", program_, " ", synopsis_, "\n\n", description, "options:\n");
  constexpr size_t kHelpColumn = 26;
  for (const auto& s : specs_) {
    std::string left = absl::StrCat("  --", s.name, s.value_name.empty() ? "" : " " + s.value_name);
    if (s.name == "output") left = absl::StrCat("  -o, --output ", s.value_name);
    // At least two spaces between a flag and its help, or the help on the next line.
    if (left.size() + 2 <= kHelpColumn)
      left.resize(kHelpColumn, ' ');
    else
      left += "\n" + std::string(kHelpColumn, ' ');
    std::string help = s.help;
    if (!s.default_value.empty()) absl::StrAppend(&help, " (default: ", s.default_value, ")");
    if (s.repeated) absl::StrAppend(&help, " (repeatable)");
    absl::StrAppend(&out, left, Wrap(help, kHelpColumn, kHelpColumn), "\n");
  }
  std::string help_left = "  -h, --help";
  help_left.resize(kHelpColumn, ' ');
  absl::StrAppend(&out, help_left, "show this help\n");
  return out;
}

}  // namespace tpc::cli
