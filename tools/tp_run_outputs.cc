#include "tp_run_outputs.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tpc/plan/plan_reader.h"
#include "tpc/runtime/tensor_io.h"
#include "tpc/util/sha256.h"
#include "tpc/util/status_macros.h"

namespace tpc::tp_run {

namespace fs = std::filesystem;
namespace rt = tpc::runtime;

absl::Status CheckBeforeRun(const tpc::cli::Args& args, const std::string& plan_dir) {
  if (args.has("output-dir")) {
    // The folder, or the nearest folder above it that exists (the run makes the rest).
    fs::path dir = fs::absolute(args.get("output-dir"));
    std::error_code ec;
    while (!fs::exists(dir, ec) && dir.has_parent_path() && dir.parent_path() != dir) {
      dir = dir.parent_path();
    }
    if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK | X_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--output-dir ", args.get("output-dir"), ": ", dir.string(),
                       fs::is_directory(dir, ec) ? " is not writable" : " is not a folder"));
    }
  }
  if (!args.has("check-against")) return absl::OkStatus();
  if (std::error_code ec; !fs::is_regular_file(args.get("check-against"), ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--check-against ", args.get("check-against"),
        fs::exists(args.get("check-against"), ec) ? ": not a regular file" : ": no such file"));
  }
  auto hash = tpc::Sha256File(args.get("check-against"));
  if (!hash.ok()) {
    return absl::Status(hash.status().code(),
                        absl::StrCat("--check-against: ", std::string(hash.status().message())));
  }
  auto manifest = tpc::plan::ReadManifest(plan_dir);
  if (!manifest.ok() || manifest->source_sha256().empty() || *hash == manifest->source_sha256()) {
    return absl::OkStatus();
  }
  std::fprintf(stderr,
               "tp-run: warning: %s is not the model the plan was compiled from (plan.json: %s, "
               "SHA-256 %.12s..., this file %.12s...)\n",
               args.get("check-against").c_str(), manifest->source_model().c_str(),
               manifest->source_sha256().c_str(), hash->c_str());
  return absl::OkStatus();
}

absl::StatusOr<int> WriteOutputs(const std::string& dir, const std::vector<rt::IoSpec>& specs,
                                 const std::vector<rt::Tensor>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create (", ec.message(), ")"));
  for (size_t k = 0; k < outputs.size(); ++k) {
    TPC_RETURN_IF_ERROR(rt::WriteTensorProtoFile(absl::StrCat(dir, "/output_", k, ".pb"),
                                                 outputs[k], specs[k].name));
    TPC_RETURN_IF_ERROR(rt::WriteNpyFile(absl::StrCat(dir, "/output_", k, ".npy"), outputs[k]));
  }
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    size_t k = 0;
    const size_t dot = name.rfind('.');
    if (name.rfind("output_", 0) != 0 || dot == std::string::npos ||
        (name.substr(dot) != ".pb" && name.substr(dot) != ".npy") ||
        !absl::SimpleAtoi(name.substr(7, dot - 7), &k) || k < outputs.size()) {
      continue;
    }
    std::error_code gone;
    if (fs::remove(entry.path(), gone)) ++removed;
  }
  return removed;
}

}  // namespace tpc::tp_run
