// TfIdfVectorizer over integer tokens: per row, the counts of the pool's n-grams (tokens
// `skip + 1` apart, skip up to max_skip_count; unigrams counted once), as term frequencies,
// inverse document frequencies or both. String pools are not supported (tpc has no string
// element type).
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {

// X [C] or [B, C] (i32 or i64) -> f32 [max(ngram_indexes) + 1] or [B, that].
absl::Status TfIdfVectorizer(KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kI64 && x.dtype() != ir::DType::kI32) {
    return ctx.Error("only integer tokens (i32, i64) are supported");
  }
  if (x.rank() > 2) return ctx.Error("X must be [C] or [B, C]");
  const int64_t min_gram = node.attr_int("min_gram_length", 1);
  const int64_t max_gram = node.attr_int("max_gram_length", 1);
  const int64_t max_skip = node.attr_int("max_skip_count", 0);
  const std::string mode = node.attr_string("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") {
    return ctx.Error(absl::StrCat("unknown mode '", mode, "'"));
  }
  if (min_gram < 1 || max_gram < min_gram || max_skip < 0) {
    return ctx.Error("expected 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  }
  const Shape counts = node.attr_ints("ngram_counts");
  const Shape indexes = node.attr_ints("ngram_indexes");
  const Shape pool = node.attr_ints("pool_int64s");
  std::vector<float> weights;
  if (auto it = node.attrs().find("weights"); it != node.attrs().end()) {
    if (const auto* w = std::get_if<std::vector<float>>(&it->second)) weights = *w;
  }
  if (pool.empty() && node.has_attr("pool_strings")) {
    return ctx.Error("string pools are not supported");
  }
  // The pool's n-grams by length: counts[n - 1] is where the n-grams start.
  std::map<std::vector<int64_t>, int64_t> ngrams;  // n-gram -> output index
  int64_t output_size = 0;
  for (int64_t idx : indexes) output_size = std::max(output_size, idx + 1);
  int64_t ordinal = 0;
  for (size_t level = 0; level < counts.size(); ++level) {
    const int64_t n = static_cast<int64_t>(level) + 1;
    const int64_t begin = counts[level];
    const int64_t end =
        level + 1 < counts.size() ? counts[level + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end ||
        (end - begin) % n != 0) {
      return ctx.Error("ngram_counts does not divide pool_int64s into n-grams");
    }
    for (int64_t p = begin; p < end; p += n, ++ordinal) {
      if (ordinal >= static_cast<int64_t>(indexes.size())) {
        return ctx.Error("ngram_indexes has fewer entries than the pool has n-grams");
      }
      ngrams.emplace(std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n),
                     indexes[static_cast<size_t>(ordinal)]);
    }
  }
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < output_size) {
    return ctx.Error("weights has fewer entries than the output");
  }
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> tokens, ReadInts(ctx, x));
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  const int64_t len = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  Shape out_shape{output_size};
  if (x.rank() == 2) out_shape = {rows, output_size};
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape, ir::DType::kF32));
  std::vector<int64_t> freq(static_cast<size_t>(rows * output_size), 0);
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = tokens.data() + r * len;
    for (int64_t skip = 0; skip <= max_skip; ++skip) {
      const int64_t step = skip + 1;
      // Unigrams do not depend on the skip: counted at skip 0 only.
      const int64_t first_n = skip == 0 ? min_gram : std::max<int64_t>(min_gram, 2);
      for (int64_t start = 0; start < len; ++start) {
        gram.clear();
        for (int64_t n = 1; n <= max_gram && start + (n - 1) * step < len; ++n) {
          gram.push_back(row[start + (n - 1) * step]);
          if (n < first_n) continue;
          auto hit = ngrams.find(gram);
          if (hit != ngrams.end()) ++freq[static_cast<size_t>(r * output_size + hit->second)];
        }
      }
    }
  }
  float* py = y->data<float>();
  for (int64_t i = 0; i < rows * output_size; ++i) {
    const auto f = static_cast<float>(freq[static_cast<size_t>(i)]);
    const float w = weights.empty() ? 1.0f : weights[static_cast<size_t>(i % output_size)];
    py[i] = mode == "TF" ? f : mode == "IDF" ? (f > 0 ? w : 0.0f) : f * w;
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
