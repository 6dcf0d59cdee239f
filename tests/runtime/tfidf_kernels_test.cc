// CPU kernel of TfIdfVectorizer on what the ONNX node tests leave out (they use mode TF
// only): IDF and TFIDF weights, n-grams found only with a skip, rows counted apart. Counts
// worked out by hand.
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::Floats;
using testing::I64;
using testing::OneOp;

// Rows (1, 2, 1, 2, 3) and (3, 3, 3, 3, 3); pool: unigrams 1, 3; bigrams (1, 2), (1, 3).
std::vector<float> Vectorize(const std::string& mode, int64_t min_gram) {
  OneOp t(9);
  t.Input("x", I64({2, 5}, {1, 2, 1, 2, 3, 3, 3, 3, 3, 3}));
  auto y = t.Run("TfIdfVectorizer", {{"mode", mode},
                                     {"min_gram_length", min_gram},
                                     {"max_gram_length", int64_t{2}},
                                     {"max_skip_count", int64_t{1}},
                                     {"ngram_counts", std::vector<int64_t>{0, 2}},
                                     {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3}},
                                     {"pool_int64s", std::vector<int64_t>{1, 3, 1, 2, 1, 3}},
                                     {"weights", std::vector<float>{0.5f, 1, 2, 4}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 4});
  return Floats(y[0]);
}

TEST_CASE("TfIdfVectorizer: TF, IDF and TFIDF with skips", "[runtime][kernels]") {
  // Row 0: 1 twice, 3 once; (1, 2) twice adjacent (none two apart); (1, 3) once, two apart
  // (positions 2 and 4). Row 1: 3 five times (unigrams are counted once, not per skip).
  CHECK(Vectorize("TF", 1) == std::vector<float>{2, 1, 2, 1, 0, 5, 0, 0});
  CHECK(Vectorize("IDF", 1) == std::vector<float>{0.5f, 1, 2, 4, 0, 1, 0, 0});
  CHECK(Vectorize("TFIDF", 1) == std::vector<float>{1, 1, 4, 4, 0, 5, 0, 0});
  // Bigrams only.
  CHECK(Vectorize("TF", 2) == std::vector<float>{0, 0, 2, 1, 0, 0, 0, 0});
}

}  // namespace
}  // namespace tpc::runtime
