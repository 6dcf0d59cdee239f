// Greedy generation with a KV-cache decoder: the prefill and K decode steps, each step's
// `present` outputs fed back as the next step's `past` inputs. Under tensor parallelism
// every rank runs this loop on its own part of the cache, which never leaves the rank;
// the logits (whole on every rank) give every rank the same next token.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime {

// Which inputs and outputs of a decoder play which part, found by name.
struct DecoderIo {
  std::string input_ids;
  std::string attention_mask;  // empty: the model has none
  std::string position_ids;    // empty: none
  // position_ids [streams, batch, seq] (M-RoPE's three: Qwen 3.5), each stream the
  // tokens' positions; 0: [batch, seq].
  int64_t position_streams = 0;
  struct Cache {
    std::string past, present;
    // A cache kept at a fixed capacity (Executor::FixedCacheRows; the caller sets it)
    // starts at it, zeros; 0: it starts empty and grows.
    int64_t fixed_rows = 0;
    // A state that does not grow with the tokens (onnxruntime-genai's convolution and recurrent
    // states, `past.{i}.conv`, `past.{i}.recurrent`): it holds the last positions of every row,
    // padding included, so prompts of different lengths cannot share a batch (Generate runs them
    // one by one).
    bool state = false;
  };
  std::vector<Cache> cache;
  std::string logits;
  // Pad shorter prompts at their ends, not their starts: the model takes each row's
  // tokens from its start (Kernel::rows_from_start, onnxruntime-genai's exports); the
  // caller sets it (Executor::AnyKernel).
  bool pad_right = false;
};

// Finds the decoder's parts: `input_ids`, `attention_mask`, `position_ids`; the cache
// pairs of Optimum and onnxruntime-genai (`past_key_values.{i}.key|value` →
// `present.{i}.key|value`) or tpc's own models' (`past_key_{i}` → `present_key_{i}`);
// the logits (`logits`, else the first output that is not a present). An input it cannot
// feed, or a past without its present, is an error naming it.
absl::StatusOr<DecoderIo> FindDecoderIo(const std::vector<IoSpec>& inputs,
                                        const std::vector<IoSpec>& outputs);

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  // [batch][steps]: the generated ids
  Tensor last_logits;                        // [batch, vocab] of the last step
  double prefill_seconds = 0;
  std::vector<double> step_seconds;  // each decode step
  // The rows ran one at a time (a state and prompts of different lengths): the times are
  // the rows' sums.
  bool rows_one_at_a_time = false;
};

// What a call of RankStep is.
struct StepKind {
  // A prefill: the cache comes whole (empty, or zeros at a fixed capacity), as the other
  // inputs do; otherwise the cache is the presents the last call returned. Rows that
  // generate one at a time (a state) each start with a prefill.
  bool prefill = false;
  // The logits of every position are read (a prefill padded at the row ends reads each
  // row's last prompt token); otherwise only the last position's, and the step may
  // return logits [batch, 1, vocab] of that position alone.
  bool every_position = false;
};

// Runs one rank's graph on this rank's inputs and returns its outputs by name (the logits
// whole; the presents this rank's part, as the graph computes them).
using RankStep = std::function<absl::StatusOr<std::map<std::string, Tensor>>(
    const std::map<std::string, Tensor>& inputs, const StepKind& kind)>;

// `prompt`: int64 [batch, length] token ids; a row shorter than `length` starts with -1s
// (left padding: masked out through the model's attention_mask, which it must have; its
// positions count from its first token; with a state, DecoderIo::Cache::state, each row
// generates alone, batch 1, one after another, and the results are joined). `inputs` and `outputs`
// are the model's full input and output specs: the prefill's empty cache takes the inputs' dims
// (the prompt's batch for the dim of input_ids' batch; a symbolic dim its present has as a number,
// that number; 0 for any other symbolic dim, the past) and comes to `run` whole, as its other
// inputs do; from then on `run` gets back the presents it returned. Runs the prefill and
// `steps` - 1 decode steps: `steps` new tokens per row, each the argmax of the last
// position's logits.
absl::StatusOr<GenerateResult> Generate(const DecoderIo& io, const std::vector<IoSpec>& inputs,
                                        const std::vector<IoSpec>& outputs, const Tensor& prompt,
                                        int64_t steps, const RankStep& run);

}  // namespace tpc::runtime
