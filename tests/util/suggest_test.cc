// Did-you-mean: edit distance, the closest candidates, the message.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tpc/util/suggest.h"

TEST_CASE("edit distance counts insertions, deletions and substitutions", "[util][suggest]") {
  CHECK(tpc::EditDistance("seq", "seq") == 0);
  CHECK(tpc::EditDistance("sq", "seq") == 1);
  CHECK(tpc::EditDistance("batch", "bacth") == 2);
  CHECK(tpc::EditDistance("", "abc") == 3);
  CHECK(tpc::EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("the closest names are suggested, far ones are not", "[util][suggest]") {
  const std::vector<std::string> dims = {"batch", "seq", "past"};
  CHECK(tpc::ClosestNames("sq", dims) == std::vector<std::string>{"seq"});
  CHECK(tpc::ClosestNames("bath", dims) == std::vector<std::string>{"batch"});
  CHECK(tpc::ClosestNames("sequence", dims) == std::vector<std::string>{"seq"});  // a prefix
  CHECK(tpc::ClosestNames("hidden", dims).empty());
  const std::string m = tpc::UnknownNameMessage("--dim", "symbolic input dim", "sq", dims);
  CHECK(m ==
        "--dim 'sq': the model has no such symbolic input dim (its symbolic input dims: "
        "batch, seq, past); did you mean 'seq'?");
  CHECK_THAT(tpc::UnknownNameMessage("--dim", "symbolic input dim", "x", {}),
             Catch::Contains("(it has none)") && !Catch::Contains("did you mean"));
}
