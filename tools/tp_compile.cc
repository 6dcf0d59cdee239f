// tp-compile: ONNX model → per-rank plans.
//
// This first form imports, verifies and exports the model (`DIR/rank0.onnx` with its
// weights in `DIR/rank0.weights`); sharding for --tp > 1 is the next stage.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/ir/printer.h"
#include "tpc/onnx/exporter.h"
#include "tpc/onnx/importer.h"
#include "tpc/util/cli.h"
#include "tpc/util/staging_dir.h"
#include "tpc/util/status_macros.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

tpc::cli::Parser MakeParser() {
  tpc::cli::Parser p("tp-compile", "MODEL.onnx -o DIR [options]",
                     "Compiles an ONNX model into per-rank tensor-parallel plans: DIR/rank{i}.onnx\n"
                     "with each rank's weights in DIR/rank{i}.weights. DIR is written all or\n"
                     "nothing (a temporary folder renamed into place).");
  p.Add({"output", "DIR", "output folder for the plans (required)", "", false});
  p.Add({"tp", "N", "number of tensor-parallel ranks", "1", false});
  p.Add({"dump-ir", "FILE", "write the imported IR text to FILE ('-' for stdout)", "", false});
  p.Add({"force", "", "replace DIR if it exists and is not empty", "", false});
  p.Add({"quiet", "", "print nothing but errors", "", false});
  return p;
}

// Exit codes: 0 success, 2 bad usage or bad input, 1 internal or I/O failure.
int ExitCodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
      return 1;
    default:
      return 2;
  }
}

absl::Status WriteText(const std::string& target, const std::string& text) {
  if (target == "-") {
    std::cout << text;
    std::cout.flush();
    return absl::OkStatus();
  }
  std::ofstream out(target, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) {
    return absl::PermissionDeniedError(absl::StrCat(target, ": cannot write the IR dump"));
  }
  return absl::OkStatus();
}

absl::Status Run(const tpc::cli::Args& args) {
  if (args.positional().size() != 1) {
    return absl::InvalidArgumentError("expected exactly one MODEL.onnx (see --help)");
  }
  const std::string model_path = args.positional()[0];
  const std::string out_dir = args.get("output");
  if (out_dir.empty()) return absl::InvalidArgumentError("missing -o DIR (see --help)");
  int64_t tp = 0;
  if (!absl::SimpleAtoi(args.get("tp", "1"), &tp) || tp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tp must be a positive integer, got '",
                                                   args.get("tp"), "'"));
  }
  if (tp != 1) {
    return absl::UnimplementedError(
        absl::StrCat("--tp ", tp, ": sharding across ranks is not built yet; only --tp 1 works"));
  }
  const bool quiet = args.has("quiet");

  // Refuse a bad output folder before any work.
  TPC_ASSIGN_OR_RETURN(tpc::StagingDir staging, tpc::StagingDir::Create(out_dir, args.has("force")));

  auto t0 = Clock::now();
  TPC_ASSIGN_OR_RETURN(auto graph, tpc::onnx::ImportModel(model_path));
  double import_s = Seconds(t0);

  if (args.has("dump-ir")) {
    TPC_RETURN_IF_ERROR(WriteText(args.get("dump-ir"), tpc::ir::PrintGraph(*graph)));
  }

  auto t1 = Clock::now();
  tpc::onnx::ExportOptions options;
  options.weights_file = "rank0.weights";
  TPC_RETURN_IF_ERROR(tpc::onnx::ExportModel(*graph, staging.File("rank0.onnx"), options));
  TPC_RETURN_IF_ERROR(staging.Commit());
  double export_s = Seconds(t1);

  if (!quiet) {
    int64_t calls = 0;
    int64_t constants = 0;
    int64_t weight_bytes = 0;
    for (tpc::ir::Node* n : graph->nodes()) {
      if (n->is_call()) ++calls;
      if (n->kind() == tpc::ir::NodeKind::kConstant) {
        ++constants;
        weight_bytes += static_cast<int64_t>(n->tensor().nbytes());
      }
    }
    std::fprintf(stderr,
                 "tp-compile: %s: %lld ops, %lld constants (%.2f MiB), opset %lld\n"
                 "tp-compile: wrote %s/rank0.onnx (tp=1); import %.3f s, export %.3f s\n",
                 model_path.c_str(), static_cast<long long>(calls),
                 static_cast<long long>(constants), weight_bytes / 1048576.0,
                 static_cast<long long>(graph->onnx_opset()), out_dir.c_str(), import_s, export_s);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  tpc::cli::Parser parser = MakeParser();
  auto args = parser.Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "tp-compile: error: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (args->help()) {
    std::cout << parser.Usage();
    return 0;
  }
  absl::Status status = Run(*args);
  if (!status.ok()) {
    std::fprintf(stderr, "tp-compile: error: %s\n", std::string(status.message()).c_str());
    return ExitCodeFor(status);
  }
  return 0;
}
