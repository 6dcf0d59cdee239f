// Did-you-mean: edit distance, the closest candidates, the message.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tpc/util/cli.h"
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

TEST_CASE("byte sizes parse with decimal and binary units", "[util][suggest]") {
  CHECK(*tpc::cli::ParseByteSize("f", "123456") == 123456);
  CHECK(*tpc::cli::ParseByteSize("f", "512MiB") == 512LL << 20);
  CHECK(*tpc::cli::ParseByteSize("f", "1GB") == 1000000000LL);
  CHECK(*tpc::cli::ParseByteSize("f", "1.5gib") == 3LL << 29);
  CHECK(*tpc::cli::ParseByteSize("f", "2 KB") == 2000);
  CHECK_FALSE(tpc::cli::ParseByteSize("f", "").ok());
  CHECK_FALSE(tpc::cli::ParseByteSize("f", "0.1B").ok());
  CHECK_FALSE(tpc::cli::ParseByteSize("f", "99999999TB").ok());
}
