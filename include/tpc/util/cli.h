// A small command-line parser for tpc's tools: `--name value`, `--name=value`, flags,
// repeated options and positional arguments, with a generated --help text. Bad usage
// is an error the tools turn into exit code 2.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpc::cli {

struct OptionSpec {
  std::string name;        // without dashes: "tp"
  std::string value_name;  // "N"; empty for a flag without value
  std::string help;
  std::string default_value;  // shown in --help
  bool repeated = false;
};

class Args {
 public:
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // The value given (an option that is not repeated is given once), or `def`.
  std::string get(const std::string& name, const std::string& def = "") const;
  const std::vector<std::string>& all(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  bool help() const { return help_; }

 private:
  friend class Parser;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// A byte count as people write it: `123456`, `512MiB`, `1GB`, `1.5GiB` (B, KB/MB/GB/TB
// in powers of 1000, KiB/MiB/GiB/TiB in powers of 1024; case-insensitive). Errors name
// `flag` and show the accepted forms.
absl::StatusOr<int64_t> ParseByteSize(const std::string& flag, const std::string& text);

// The tools' exit status for an error: 1 for an internal, I/O or run-time failure
// (internal, data loss, unknown, aborted, resources), 2 for bad usage or bad input.
int ExitCodeFor(const absl::Status& status);

class Parser;

// What every tool does before its work: a parse error is printed (exit 2), --help and
// --version print (exit 0); SIGXFSZ is ignored, so that a file-size limit (ulimit -f)
// fails a write with EFBIG, which the tool says, instead of killing it mid-write.
// Returns the exit code when the tool is done, nullopt when it goes on.
std::optional<int> Prologue(const Parser& parser, const absl::StatusOr<Args>& args,
                            const std::string& version);

class Parser {
 public:
  Parser(std::string program, std::string synopsis, std::string description)
      : program_(std::move(program)),
        synopsis_(std::move(synopsis)),
        description_(std::move(description)) {}
  void Add(OptionSpec spec) { specs_.push_back(std::move(spec)); }
  // `-h`/`--help` sets Args::help(); unknown options and missing values are errors.
  absl::StatusOr<Args> Parse(int argc, char** argv) const;
  std::string Usage() const;
  const std::string& program() const { return program_; }

 private:
  const OptionSpec* Find(const std::string& name) const;
  std::string program_, synopsis_, description_;
  std::vector<OptionSpec> specs_;
};

}  // namespace tpc::cli
