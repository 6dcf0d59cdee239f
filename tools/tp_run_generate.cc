#include "tp_run_generate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tpc/onnx/importer.h"
#include "tpc/runtime/compare.h"
#include "tpc/runtime/plan_runner.h"
#include "tpc/runtime/tensor_io.h"
#include "tpc/util/status_macros.h"

namespace tpc::tp_run {

// The prompt of --generate: --prompt "1 2 3; 4 5" (rows of any length, the shorter ones
// padded on the left with -1) or --input-ids FILE (int64 [batch, length], -1 padding on
// the left where a row is shorter), as int64 [batch, length].
absl::StatusOr<rt::Tensor> Prompt(const tpc::cli::Args& args) {
  if (args.has("input-ids")) {
    TPC_ASSIGN_OR_RETURN(rt::NamedTensor t, rt::ReadTensorFile(args.get("input-ids")));
    if (t.tensor.rank() != 2 ||
        (t.tensor.dtype() != tpc::ir::DType::kI64 && t.tensor.dtype() != tpc::ir::DType::kI32)) {
      return absl::InvalidArgumentError(absl::StrCat("--input-ids ", args.get("input-ids"),
                                                     ": expected int64 or int32 [batch, length], "
                                                     "got ",
                                                     t.tensor.TypeString()));
    }
    rt::Tensor ids = rt::Tensor::Allocate(tpc::ir::DType::kI64, t.tensor.shape());
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      ids.data<int64_t>()[i] = t.tensor.dtype() == tpc::ir::DType::kI64
                                   ? t.tensor.data<int64_t>()[i]
                                   : t.tensor.data<int32_t>()[i];
    }
    return ids;
  }
  std::vector<std::vector<int64_t>> rows;
  for (absl::string_view row : absl::StrSplit(args.get("prompt"), ';')) {
    std::vector<int64_t> ids;
    for (absl::string_view tok : absl::StrSplit(row, ' ', absl::SkipWhitespace())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(tok, &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("--prompt: '", std::string(tok),
                                                       "' is not a token id (a non-negative "
                                                       "integer)"));
      }
      ids.push_back(v);
    }
    rows.push_back(std::move(ids));
  }
  if (rows.empty() || rows[0].empty()) {
    return absl::InvalidArgumentError("--prompt holds no token ids");
  }
  size_t length = 0;
  for (const auto& r : rows) {
    if (r.empty()) return absl::InvalidArgumentError("--prompt: a row (';'-separated) is empty");
    length = std::max(length, r.size());
  }
  // Shorter rows padded on the left with -1 (rt::Generate masks the padding).
  const int64_t batch = static_cast<int64_t>(rows.size());
  rt::Tensor ids =
      rt::Tensor::Allocate(tpc::ir::DType::kI64, {batch, static_cast<int64_t>(length)});
  for (size_t b = 0; b < rows.size(); ++b) {
    const size_t pad = length - rows[b].size();
    for (size_t i = 0; i < length; ++i) {
      ids.data<int64_t>()[b * length + i] = i < pad ? -1 : rows[b][i - pad];
    }
  }
  return ids;
}

// A plan that splits the sequence between blocks cannot take the decode steps' single
// token: refused before anything runs.
absl::Status CheckGeneratable(const tpc::proto::Plan& manifest) {
  auto it = manifest.options().find("sequence-parallel");
  if (it != manifest.options().end() && it->second == "true") {
    return absl::InvalidArgumentError(
        "--generate: the plan was compiled with --sequence-parallel, which splits the sequence "
        "across the ranks; a decode step has one token (compile without it)");
  }
  return absl::OkStatus();
}

// One rank's generation loop: its executor on its inputs (the token ids, mask and
// positions taken by the plan's placements; the cache its own part), the logits and any
// other output assembled whole, the presents kept as this rank holds them.
absl::StatusOr<rt::GenerateResult> GenerateOnRank(rt::Executor& ex, rt::Communicator* comm,
                                                  const rt::IoPlacements& io, int rank, int n,
                                                  const rt::Tensor& prompt, int64_t steps) {
  TPC_ASSIGN_OR_RETURN(rt::DecoderIo parts, rt::FindDecoderIo(ex.inputs(), ex.outputs()));
  parts.pad_right = ex.AnyKernel(&rt::Kernel::rows_from_start);
  for (auto& c : parts.cache) c.fixed_rows = ex.FixedCacheRows(c.past);
  std::set<std::string> cache;
  for (const auto& c : parts.cache) {
    cache.insert(c.past);
    cache.insert(c.present);
  }
  // A present placed as its past stays on its rank; one placed otherwise (a plan compiled
  // with other placements for them) is assembled and cut again as the past.
  std::map<std::string, std::string> past_of;
  for (const auto& c : parts.cache) past_of[c.present] = c.past;
  // Such a present stays in the backend's memory (a GPU's) from one step to the next;
  // not with --cuda-graph, which records runs reading and writing buffers of their own
  // (runs with resident values are never recorded), so that a cache whose shapes stay
  // the same from step to step (onnxruntime-genai's) replays a record.
  const bool keep = !ex.options().capture;
  rt::Executor::Resident resident;
  std::set<std::string> resident_pasts;
  for (const auto& c : parts.cache) {
    if (keep && (comm == nullptr ||
                 rt::PlacementOf(io.outputs, c.present) == rt::PlacementOf(io.inputs, c.past))) {
      resident.keep.insert(c.present);
      resident_pasts.insert(c.past);
    }
  }
  // Of the logits [batch, seq, vocab] only the last position's come to the host where
  // that is all Generate reads (a prefill's whole logits are batch × prompt × vocab
  // floats, hundreds of MB for a large vocabulary).
  bool logits_by_position = false;  // [batch, seq, vocab]
  for (const rt::IoSpec& o : ex.outputs()) {
    if (o.name == parts.logits) logits_by_position = o.type.shape && o.type.shape->size() == 3;
  }
  rt::RankStep step =
      [&](const std::map<std::string, rt::Tensor>& feed,
          const rt::StepKind& kind) -> absl::StatusOr<std::map<std::string, rt::Tensor>> {
    const bool last_only = keep && logits_by_position && !kind.every_position;
    if (last_only) {
      resident.keep.insert(parts.logits);
    } else {
      resident.keep.erase(parts.logits);
    }
    std::map<std::string, rt::Tensor> mine;
    resident.inputs.clear();
    for (const auto& [name, t] : feed) {
      if (cache.count(name) == 0 || kind.prefill) {
        // Whole: the inputs other than the cache, and the prefill's cache (empty, or
        // zeros at a fixed capacity).
        TPC_ASSIGN_OR_RETURN(mine[name],
                             rt::SliceForRank(name, t, rt::PlacementOf(io.inputs, name), rank, n));
      } else if (resident_pasts.count(name) > 0) {
        resident.inputs[name] = t;  // the last step's kept present
      } else {
        mine[name] = t;  // this rank's part of an assembled present, on the host
      }
    }
    TPC_ASSIGN_OR_RETURN(auto out, ex.Run(mine, resident));
    std::map<std::string, rt::Tensor> named;
    for (size_t k = 0; k < out.size(); ++k) {
      const std::string& name = ex.outputs()[k].name;
      if (last_only && name == parts.logits) {
        TPC_ASSIGN_OR_RETURN(out[k], ex.LastAlong(out[k], 1));
      }
      const tpc::ir::Placement placed = rt::PlacementOf(io.outputs, name);
      auto past = past_of.find(name);
      if (comm == nullptr ||
          (past != past_of.end() && placed == rt::PlacementOf(io.inputs, past->second))) {
        named[name] = std::move(out[k]);
        continue;
      }
      TPC_ASSIGN_OR_RETURN(rt::Tensor whole, rt::AssembleOutput(name, out[k], placed, *comm));
      if (past != past_of.end()) {
        TPC_ASSIGN_OR_RETURN(
            whole, rt::SliceForRank(past->second, whole, rt::PlacementOf(io.inputs, past->second),
                                    rank, n));
      }
      named[name] = std::move(whole);
    }
    return named;
  };
  return rt::Generate(parts, rt::FullSpecs(ex.inputs(), io.inputs, n),
                      rt::FullSpecs(ex.outputs(), io.outputs, n), prompt, steps, step);
}

// Prints the generated ids and the speed, and with --check-against runs the same loop on
// the unsharded model: the ids must be equal and the last logits within tolerance.
absl::StatusOr<int> ReportGeneration(const tpc::cli::Args& args, const GenerationCheck& s,
                                     int ranks, const rt::Tensor& prompt,
                                     const rt::GenerateResult& r) {
  double decode = 0;
  for (double t : r.step_seconds) decode += t;
  const int64_t batch = prompt.dim(0);
  for (int64_t b = 0; b < batch; ++b) {
    std::printf("tokens (row %lld): %s\n", static_cast<long long>(b),
                absl::StrJoin(r.tokens[static_cast<size_t>(b)], " ").c_str());
  }
  std::printf("tp-run: generated %lld token(s) per row on %d rank(s): prefill of %lld in %.3f s",
              static_cast<long long>(s.generate), ranks, static_cast<long long>(prompt.dim(1)),
              r.prefill_seconds);
  if (!r.step_seconds.empty() && r.rows_one_at_a_time) {
    // The rows ran one after another (a state): the times are their sums.
    std::printf(
        "; %zu decode step(s) a row, the %lld rows one at a time (the model carries a "
        "state) in %.3f s, %.1f tokens/s",
        r.step_seconds.size(), static_cast<long long>(batch), decode,
        static_cast<double>(r.step_seconds.size() * batch) / decode);
  } else if (!r.step_seconds.empty()) {
    std::printf("; %zu decode step(s) in %.3f s, %.1f tokens/s (%.1f per row)",
                r.step_seconds.size(), decode,
                static_cast<double>(r.step_seconds.size() * batch) / decode,
                static_cast<double>(r.step_seconds.size()) / decode);
  }
  std::printf("\n");
  if (!args.has("check-against")) return 0;
  const std::string model = args.get("check-against");
  TPC_ASSIGN_OR_RETURN(auto original, tpc::onnx::ImportModel(model));
  rt::PlanRunnerOptions options;
  options.threads = static_cast<int>(s.threads);
  TPC_ASSIGN_OR_RETURN(auto runner, rt::PlanRunner::Create({original.get()}, options));
  TPC_ASSIGN_OR_RETURN(rt::GenerateResult want,
                       GenerateOnRank(runner->executor(0), nullptr, {}, 0, 1, prompt, s.generate));
  const bool same_ids = want.tokens == r.tokens;
  const Tolerance t = ForOutput(s.tolerance, r.last_logits.dtype());
  const rt::Comparison c = rt::CompareTensors(r.last_logits, want.last_logits, t.rtol, t.atol);
  std::printf(
      "check against %s, %d rank(s) vs unsharded: token ids %s; last logits max abs err "
      "%.3e, max rel err %.3e (rtol %g, atol %g%s): %s\n",
      model.c_str(), ranks, same_ids ? "equal" : "DIFFER", c.max_abs, c.max_rel, t.rtol, t.atol,
      ToleranceNote(t).c_str(), c.pass ? "PASS" : "FAIL");
  if (!same_ids) {
    for (int64_t b = 0; b < batch; ++b) {
      std::printf("  unsharded (row %lld): %s\n", static_cast<long long>(b),
                  absl::StrJoin(want.tokens[static_cast<size_t>(b)], " ").c_str());
    }
  }
  const bool pass = same_ids && c.pass;
  std::printf("%s\n", pass ? "PASS: the same token ids, last logits within tolerance"
                           : "FAIL: the generation differs from the unsharded model's");
  return pass ? 0 : 1;
}

}  // namespace tpc::tp_run
