#include "tpc/runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {
namespace {

// Element i of f32, f16 or bf16 logits.
float LogitAt(const Tensor& logits, int64_t i) {
  switch (logits.dtype()) {
    case ir::DType::kF16:
      return HalfToFloat(logits.data<uint16_t>()[i]);
    case ir::DType::kBF16:
      return BFloat16ToFloat(logits.data<uint16_t>()[i]);
    default:
      return logits.data<float>()[i];
  }
}

const IoSpec* Find(const std::vector<IoSpec>& specs, const std::string& name) {
  for (const IoSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The cache pair a past input belongs to: `past_key_values.3.key` → `present.3.key`,
// `past_key_3` → `present_key_3` (KV caches), `past.1.conv` → `present.1.conv`
// (onnxruntime-genai's convolution and recurrent states, DecoderIo::Cache::state); nullopt when the
// name is not a past.
std::optional<DecoderIo::Cache> CacheOf(const std::string& past) {
  struct Form {
    const char *past, *present;
    bool state;
  };
  for (const Form& f : {Form{"past_key_values.", "present.", false},
                        Form{"past_", "present_", false}, Form{"past.", "present.", true}}) {
    if (absl::StartsWith(past, f.past)) {
      return DecoderIo::Cache{.past = past,
                              .present = absl::StrCat(f.present, past.substr(std::strlen(f.past))),
                              .state = f.state};
    }
  }
  return std::nullopt;
}

// An integer tensor of `dtype` (i64 or i32) and `shape` with values f(i).
template <typename F>
Tensor Ints(ir::DType dtype, std::vector<int64_t> shape, F f) {
  Tensor t = Tensor::Allocate(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == ir::DType::kI32) {
      t.data<int32_t>()[i] = static_cast<int32_t>(f(i));
    } else {
      t.data<int64_t>()[i] = f(i);
    }
  }
  return t;
}

// The empty cache of the prefill: static dims as they are, the dim of input_ids' batch
// the prompt's batch, a symbolic dim the present has as a number (onnxruntime-genai's
// `kv_cache_dim`, the head size) that number, any other symbolic dim (the past) 0, or
// `fixed_rows` for a cache of a fixed capacity (zeros).
absl::StatusOr<Tensor> EmptyCache(const IoSpec& spec, const IoSpec* present,
                                  const ir::Dim& batch_dim, int64_t batch, int64_t fixed_rows) {
  if (!spec.type.shape) {
    return absl::InvalidArgumentError(absl::StrCat("cache input '", spec.name, "' has no rank"));
  }
  const std::vector<ir::Dim>* out = present != nullptr && present->type.shape &&
                                            present->type.shape->size() == spec.type.shape->size()
                                        ? &*present->type.shape
                                        : nullptr;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < spec.type.shape->size(); ++i) {
    const ir::Dim& d = (*spec.type.shape)[i];
    if (d.is_static()) {
      shape.push_back(d.value());
    } else if (d == batch_dim) {
      shape.push_back(batch);
    } else {
      shape.push_back(out != nullptr && (*out)[i].is_static() ? (*out)[i].value() : fixed_rows);
    }
  }
  return Tensor::Allocate(spec.type.dtype, shape);  // zeros
}

// Generate for each row of `prompt` alone (its tokens after `pad[b]` padding ids), the
// results joined as one batch's: the rows' tokens and last logits, the times summed.
absl::StatusOr<GenerateResult> GenerateEachRow(
    const DecoderIo& io, const std::vector<IoSpec>& inputs, const std::vector<IoSpec>& outputs,
    const Tensor& prompt, const std::vector<int64_t>& pad, int64_t steps, const RankStep& run) {
  const int64_t batch = prompt.dim(0), length = prompt.dim(1);
  GenerateResult result;
  result.rows_one_at_a_time = true;
  result.step_seconds.assign(static_cast<size_t>(steps - 1), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = length - pad[static_cast<size_t>(b)];
    Tensor row = Tensor::Allocate(ir::DType::kI64, {1, n});
    std::memcpy(row.data<int64_t>(), prompt.data<int64_t>() + b * length + (length - n),
                static_cast<size_t>(n) * sizeof(int64_t));
    TPC_ASSIGN_OR_RETURN(GenerateResult one, Generate(io, inputs, outputs, row, steps, run));
    result.tokens.push_back(std::move(one.tokens[0]));
    const Tensor& last = one.last_logits;
    if (b == 0) result.last_logits = Tensor::Allocate(last.dtype(), {batch, last.dim(1)});
    if (last.dtype() != result.last_logits.dtype() || last.dim(1) != result.last_logits.dim(1)) {
      return absl::InternalError("rows generated alone gave logits of different types");
    }
    const int64_t bytes = last.dim(1) * ir::DTypeSize(last.dtype());
    std::memcpy(result.last_logits.raw() + b * bytes, last.raw(), static_cast<size_t>(bytes));
    result.prefill_seconds += one.prefill_seconds;
    for (size_t s = 0; s < one.step_seconds.size(); ++s) {
      result.step_seconds[s] += one.step_seconds[s];
    }
  }
  return result;
}

}  // namespace

absl::StatusOr<DecoderIo> FindDecoderIo(const std::vector<IoSpec>& inputs,
                                        const std::vector<IoSpec>& outputs) {
  DecoderIo io;
  std::set<std::string> presents;
  for (const IoSpec& in : inputs) {
    if (in.name == "input_ids") {
      io.input_ids = in.name;
    } else if (in.name == "attention_mask") {
      io.attention_mask = in.name;
    } else if (in.name == "position_ids") {
      io.position_ids = in.name;
      if (in.type.shape && in.type.shape->size() == 3) {  // M-RoPE's [3, batch, seq]
        const ir::Dim& streams = in.type.shape->front();
        if (!streams.is_static() || streams.value() < 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "position_ids ", in.type.ToString(), ": a 3-D one must be [streams, batch, seq]"));
        }
        io.position_streams = streams.value();
      }
    } else if (std::optional<DecoderIo::Cache> c = CacheOf(in.name)) {
      if (Find(outputs, c->present) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cache input '", in.name, "' has no output '", c->present, "' to feed it back"));
      }
      presents.insert(c->present);
      io.cache.push_back(*std::move(c));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", in.name,
                       "' is none of a decoder's: input_ids, attention_mask, position_ids, "
                       "past_key_values.{i}.key|value, past_key_{i}/past_value_{i} or "
                       "past.{i}.conv|recurrent"));
    }
  }
  if (io.input_ids.empty()) return absl::InvalidArgumentError("the model has no input_ids input");
  if (io.cache.empty()) {
    return absl::InvalidArgumentError(
        "the model has no KV cache (past_key_values.* inputs): it is not a decoder that "
        "generates step by step");
  }
  for (const IoSpec& out : outputs) {
    if (out.name == "logits") io.logits = out.name;
  }
  for (const IoSpec& out : outputs) {
    if (io.logits.empty() && presents.count(out.name) == 0) io.logits = out.name;
  }
  if (io.logits.empty()) return absl::InvalidArgumentError("the model has no logits output");
  return io;
}

absl::StatusOr<GenerateResult> Generate(const DecoderIo& io, const std::vector<IoSpec>& inputs,
                                        const std::vector<IoSpec>& outputs, const Tensor& prompt,
                                        int64_t steps, const RankStep& run) {
  using Clock = std::chrono::steady_clock;
  if (prompt.dtype() != ir::DType::kI64 || prompt.rank() != 2 || prompt.dim(1) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt must be int64 [batch, length] token ids, length >= 1; got ",
                     prompt.TypeString()));
  }
  if (steps < 1) return absl::InvalidArgumentError("generate at least 1 token");
  const int64_t batch = prompt.dim(0), length = prompt.dim(1);
  // Rows shorter than the longest are padded on the left with -1: the padding is masked
  // out (attention_mask 0) and the positions count from each row's first token, so a
  // row generates what it would alone.
  std::vector<int64_t> pad(static_cast<size_t>(batch), 0);
  bool padded = false;
  const auto state = std::find_if(io.cache.begin(), io.cache.end(),
                                  [](const DecoderIo::Cache& c) { return c.state; });
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = prompt.data<int64_t>() + b * length;
    int64_t& n = pad[static_cast<size_t>(b)];
    while (n < length && row[n] == -1) ++n;
    if (n == length) {
      return absl::InvalidArgumentError(absl::StrCat("prompt row ", b, " holds no token"));
    }
    for (int64_t i = n; i < length; ++i) {
      if (row[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt row ", b, ": token ", i, " is ", row[i],
                         " (ids are non-negative; -1 pads a shorter row, on its left only)"));
      }
    }
    padded = padded || n > 0;
    if (n > 0 && io.attention_mask.empty() && state == io.cache.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt rows of different lengths need the model's attention_mask input "
                       "to mask the padding, and this model has none (row ",
                       b, " is ", length - n, " tokens of ", length, "): give rows of one length"));
    }
  }
  // A state holds each row's last positions, padding included (no mask reaches it): rows
  // of different lengths generate one at a time, each as it would alone.
  if (padded && state != io.cache.end()) {
    return GenerateEachRow(io, inputs, outputs, prompt, pad, steps, run);
  }
  auto dtype_of = [&](const std::string& name) {
    const IoSpec* s = Find(inputs, name);
    return s != nullptr ? s->type.dtype : ir::DType::kI64;
  };
  GenerateResult result;
  result.tokens.assign(static_cast<size_t>(batch), {});
  const IoSpec* ids_spec = Find(inputs, io.input_ids);
  if (ids_spec == nullptr || !ids_spec->type.shape || ids_spec->type.shape->size() != 2) {
    return absl::InvalidArgumentError("input_ids must be [batch, seq]");
  }
  std::map<std::string, Tensor> feed;
  for (const DecoderIo::Cache& c : io.cache) {
    const IoSpec* spec = Find(inputs, c.past);
    if (spec == nullptr) return absl::InternalError(absl::StrCat("no spec for ", c.past));
    TPC_ASSIGN_OR_RETURN(feed[c.past], EmptyCache(*spec, Find(outputs, c.present),
                                                  (*ids_spec->type.shape)[0], batch, c.fixed_rows));
  }
  // A padded row's tokens, at its start (io.pad_right) or its end; the padding's ids are
  // 0 (any id would do: the mask hides them).
  Tensor ids = Ints(dtype_of(io.input_ids), prompt.shape(), [&](int64_t i) {
    const int64_t b = i / length, shift = io.pad_right ? pad[static_cast<size_t>(b)] : 0;
    const int64_t from = i + shift;
    return from < (b + 1) * length ? std::max<int64_t>(prompt.data<int64_t>()[from], 0) : 0;
  });
  int64_t past = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t seq = ids.dim(1);
    feed[io.input_ids] = ids;
    // Row b's tokens so far, this step's included: its prompt, then one a step.
    auto tokens = [&](int64_t b) { return length - pad[static_cast<size_t>(b)] + step; };
    if (!io.attention_mask.empty()) {  // 0 over a row's padding
      const int64_t total = past + seq;
      feed[io.attention_mask] = Ints(dtype_of(io.attention_mask), {batch, total}, [&](int64_t i) {
        const int64_t b = i / total, col = i % total;
        return io.pad_right ? (col < tokens(b) ? 1 : 0)
                            : (col < pad[static_cast<size_t>(b)] ? 0 : 1);
      });
    }
    if (!io.position_ids.empty()) {  // from each row's first token (the padding's: 0)
      std::vector<int64_t> shape = {batch, seq};
      if (io.position_streams > 0) shape.insert(shape.begin(), io.position_streams);
      feed[io.position_ids] = Ints(dtype_of(io.position_ids), shape, [&](int64_t i) {
        const int64_t b = i % (batch * seq) / seq, col = i % seq;  // each stream the same
        if (io.pad_right) return step == 0 ? col : tokens(b) - 1;
        return std::max<int64_t>(past + col - pad[static_cast<size_t>(b)], 0);
      });
    }
    const auto t = Clock::now();
    TPC_ASSIGN_OR_RETURN(
        auto out, run(feed, StepKind{.prefill = step == 0,
                                     .every_position = io.pad_right && step == 0 && padded}));
    const double seconds = std::chrono::duration<double>(Clock::now() - t).count();
    (step == 0 ? result.prefill_seconds : result.step_seconds.emplace_back()) = seconds;
    auto logits_it = out.find(io.logits);
    if (logits_it == out.end()) return absl::InternalError("the run gave no logits");
    const Tensor& logits = logits_it->second;
    const ir::DType type = logits.dtype();
    if ((type != ir::DType::kF32 && type != ir::DType::kF16 && type != ir::DType::kBF16) ||
        (logits.rank() != 3 && logits.rank() != 2) || logits.dim(0) != batch ||
        logits.dim(logits.rank() - 1) < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("logits '", io.logits, "' are ", logits.TypeString(),
                       ": expected float32, float16 or bfloat16 [batch, seq, vocab] or [batch, "
                       "vocab] with batch ",
                       batch, " and a vocabulary"));
    }
    const int64_t vocab = logits.dim(logits.rank() - 1);
    const int64_t rows = logits.rank() == 3 ? logits.dim(1) : 1;
    // The last logits in the model's type (compared as such), the choice on their values.
    Tensor last = Tensor::Allocate(type, {batch, vocab});
    const int64_t size = ir::DTypeSize(type);
    std::vector<int64_t> next(static_cast<size_t>(batch));
    if (io.pad_right && step == 0 && rows != seq && padded) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logits '", io.logits, "' are ", logits.TypeString(),
          ": prompts of different lengths padded at their ends need every position's logits"));
    }
    for (int64_t b = 0; b < batch; ++b) {
      // The row's last token: its prompt's last in a prefill padded at the end.
      const int64_t at = io.pad_right && step == 0 && rows == seq ? tokens(b) - 1 : rows - 1;
      const int64_t from = (b * rows + at) * vocab;
      std::memcpy(last.raw() + b * vocab * size, logits.raw() + from * size,
                  static_cast<size_t>(vocab * size));
      int64_t best = 0;
      float best_value = LogitAt(logits, from);
      for (int64_t v = 1; v < vocab; ++v) {
        const float value = LogitAt(logits, from + v);
        if (value > best_value) best = v, best_value = value;
      }
      next[static_cast<size_t>(b)] = best;
      result.tokens[static_cast<size_t>(b)].push_back(best);
    }
    result.last_logits = std::move(last);
    // This step's presents are the next step's pasts, as this rank holds them.
    for (const DecoderIo::Cache& c : io.cache) {
      auto it = out.find(c.present);
      if (it == out.end()) return absl::InternalError(absl::StrCat("no output ", c.present));
      feed[c.past] = std::move(it->second);
    }
    past += seq;
    ids = Ints(dtype_of(io.input_ids), {batch, 1},
               [&](int64_t i) { return next[static_cast<size_t>(i)]; });
  }
  return result;
}

}  // namespace tpc::runtime
