#include "tpc/plan/plan_reader.h"

#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "tpc/util/mapped_file.h"
#include "tpc/util/sha256.h"
#include "tpc/util/status_macros.h"

namespace tpc::plan {
namespace {

// A file name the manifest gives: a plain name inside the plan folder.
bool PlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileStamp{};
  return FileStamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                   static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

absl::Status CheckFile(const std::string& dir, int64_t rank, const std::string& what,
                       const std::string& name, int64_t size, const std::string& sha256,
                       bool hashes, FileStamp* stamp) {
  const std::string path = absl::StrCat(dir, "/", name);
  auto file = MappedFile::Open(path);
  if (stamp != nullptr) *stamp = Stamp(path);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("rank ", rank, ": ", what, " ", file.status().message()));
  }
  if (static_cast<int64_t>((*file)->size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, ": ", path, " holds ", (*file)->size(), " bytes, plan.json says ", size,
        " (a truncated or replaced file; rewrite the plan)"));
  }
  if (!hashes) return absl::OkStatus();
  Sha256 h;
  h.Update((*file)->data(), (*file)->size());
  const std::string got = h.HexDigest();
  if (got != sha256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, ": ", path, " has SHA-256 ", got, ", plan.json says ", sha256,
        " (the file was changed or swapped; rewrite the plan, or --no-verify to run it anyway)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<proto::Plan> ReadManifest(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir, ec)) {
    // The model itself, most likely: say what to do with it.
    return absl::InvalidArgumentError(
        absl::StrCat(dir, " is a file, not a plan folder: compile it first (tp-compile ", dir,
                     " --tp N -o PLAN), then tp-run PLAN"));
  }
  const std::string path = absl::StrCat(dir, "/plan.json");
  auto file = MappedFile::Open(path);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat(dir, ": not a plan folder: ", file.status().message(),
                                     " (write a plan with tp-compile MODEL -o ", dir, ")"));
  }
  const std::string text(reinterpret_cast<const char*>((*file)->data()), (*file)->size());
  proto::Plan plan;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &plan);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a plan manifest: ", std::string(parsed.message())));
  }
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  if (plan.mesh().axes_size() != 1 || plan.mesh().axes(0).name() != "tp") {
    return bad("mesh must have one axis, \"tp\"");
  }
  const int64_t n = plan.mesh().axes(0).size();
  if (n < 1 || n > kMaxRanks) {
    return bad(absl::StrCat("mesh size ", n, " is not in [1, ", kMaxRanks, "]"));
  }
  if (plan.ranks_size() != n) {
    return bad(absl::StrCat("lists ", plan.ranks_size(), " ranks, the mesh has ", n));
  }
  std::set<std::string> names;  // every file at most once
  for (int64_t r = 0; r < n; ++r) {
    const proto::RankPlan& rp = plan.ranks(static_cast<int>(r));
    const std::string at = absl::StrCat("ranks[", r, "]");
    if (rp.rank() != r) return bad(absl::StrCat(at, ".rank is ", rp.rank(), ", not ", r));
    if (!PlainName(rp.model())) {
      return bad(absl::StrCat(at, ".model '", rp.model(), "' is not a file name in the folder"));
    }
    if (!rp.weights().empty() && !PlainName(rp.weights())) {
      return bad(
          absl::StrCat(at, ".weights '", rp.weights(), "' is not a file name in the folder"));
    }
    if (rp.model_size() == 0) {
      return bad(absl::StrCat(at,
                              " records no file sizes: the plan was written by an older "
                              "tp-compile; compile it again"));
    }
    if (rp.model_size() < 0 || rp.weights_size() < 0 || rp.weight_bytes() < 0) {
      return bad(absl::StrCat(at, ": negative file sizes"));
    }
    for (const std::string* name : {&rp.model(), &rp.weights()}) {
      if (name->empty()) continue;
      if (!names.insert(*name).second) {
        return bad(absl::StrCat(at, " names '", *name, "', which another entry names too"));
      }
    }
  }
  return plan;
}

absl::Status VerifyRankFiles(const std::string& dir, const proto::Plan& plan, int64_t rank,
                             bool hashes, RankStamps* stamps) {
  TPC_CHECK(rank >= 0 && rank < plan.ranks_size());
  const proto::RankPlan& rp = plan.ranks(static_cast<int>(rank));
  TPC_RETURN_IF_ERROR(CheckFile(dir, rank, "model", rp.model(), rp.model_size(), rp.sha256(),
                                hashes, stamps ? &stamps->model : nullptr));
  if (rp.weights_size() > 0) {
    TPC_RETURN_IF_ERROR(CheckFile(dir, rank, "weights", rp.weights(), rp.weights_size(),
                                  rp.weights_sha256(), hashes,
                                  stamps ? &stamps->weights : nullptr));
  }
  return absl::OkStatus();
}

absl::Status CheckRankUnchanged(const std::string& dir, const proto::Plan& plan, int64_t rank,
                                const RankStamps& stamps) {
  TPC_CHECK(rank >= 0 && rank < plan.ranks_size());
  const proto::RankPlan& rp = plan.ranks(static_cast<int>(rank));
  const bool model_same = Stamp(absl::StrCat(dir, "/", rp.model())) == stamps.model;
  const bool weights_same =
      rp.weights_size() == 0 || Stamp(absl::StrCat(dir, "/", rp.weights())) == stamps.weights;
  if (model_same && weights_same) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "rank ", rank, ": ", dir, "/", model_same ? rp.weights() : rp.model(),
      " changed while the plan was loading (written again meanwhile?); run tp-run again"));
}

}  // namespace tpc::plan
