// The rank, world and store address of a process, from each launcher's variables.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "tpc/runtime/world.h"

namespace {

namespace rt = tpc::runtime;

absl::StatusOr<std::optional<rt::World>> From(const std::map<std::string, std::string>& vars,
                                              const std::string& master = "") {
  return rt::WorldFromEnvironment(
      [&vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      master);
}

}  // namespace

TEST_CASE("no launcher's variables: no world", "[runtime][world]") {
  auto w = From({{"HOME", "/root"}});
  REQUIRE(w.ok());
  CHECK_FALSE(w->has_value());
}

TEST_CASE("torchrun's variables", "[runtime][world]") {
  auto w = From({{"RANK", "3"},
                 {"WORLD_SIZE", "4"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "10.0.0.1"},
                 {"MASTER_PORT", "29511"}});
  REQUIRE(w.ok());
  REQUIRE(w->has_value());
  const rt::World& x = **w;
  CHECK(x.rank == 3);
  CHECK(x.size == 4);
  CHECK(x.local_rank == 1);
  CHECK(x.local_size == 2);
  CHECK(x.master_host == "10.0.0.1");
  CHECK(x.master_port == 29511);
  CHECK(x.launcher == "torchrun");
  CHECK_FALSE(x.store_hosted);
  // Under torchrun's agent, which serves its own store on MASTER_PORT, the next port.
  auto agent = From({{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "a"},
                     {"MASTER_PORT", "29500"},
                     {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  REQUIRE(agent.ok());
  CHECK((*agent)->master_port == 29501);
  // --master wins over MASTER_ADDR/PORT.
  auto m = From({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
                "[::1]:4000");
  REQUIRE(m.ok());
  CHECK((*m)->master_host == "::1");
  CHECK((*m)->master_port == 4000);
}

TEST_CASE("OpenMPI on one machine needs no master, on several it does", "[runtime][world]") {
  std::map<std::string, std::string> vars = {{"OMPI_COMM_WORLD_RANK", "1"},
                                             {"OMPI_COMM_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                             {"OMPI_MCA_ess_base_jobid", "123"}};
  auto w = From(vars);
  REQUIRE(w.ok());
  CHECK((*w)->launcher == "OpenMPI");
  CHECK((*w)->master_host == "127.0.0.1");
  const int port = (*w)->master_port;
  CHECK(port >= 20000);
  CHECK(port < 32000);  // below the ephemeral ports
  // Every rank of the job derives the same port.
  vars["OMPI_COMM_WORLD_RANK"] = "3";
  CHECK((*From(vars))->master_port == port);
  vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  auto several = From(vars);
  REQUIRE_FALSE(several.ok());
  CHECK_THAT(std::string(several.status().message()), Catch::Contains("MASTER_ADDR"));
  vars["MASTER_ADDR"] = "node0";
  vars["MASTER_PORT"] = "5000";
  CHECK((*From(vars))->master_port == 5000);
}

TEST_CASE("Slurm's variables", "[runtime][world]") {
  auto w = From({{"SLURM_PROCID", "2"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NNODES", "2"},
                 {"MASTER_ADDR", "n1"},
                 {"MASTER_PORT", "6000"}});
  REQUIRE(w.ok());
  CHECK((*w)->launcher == "Slurm");
  CHECK((*w)->rank == 2);
  CHECK((*w)->local_size == 2);
  CHECK((*w)->size_source == "SLURM_NTASKS=4");
}

TEST_CASE("bad launcher variables are named", "[runtime][world]") {
  auto rank = From({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}});
  REQUIRE_FALSE(rank.ok());
  CHECK_THAT(std::string(rank.status().message()), Catch::Contains("RANK=4"));
  auto num = From({{"RANK", "x"}, {"WORLD_SIZE", "4"}});
  REQUIRE_FALSE(num.ok());
  CHECK_THAT(std::string(num.status().message()), Catch::Contains("RANK=x"));
  auto port =
      From({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "0"}});
  REQUIRE_FALSE(port.ok());
  CHECK_THAT(std::string(port.status().message()), Catch::Contains("MASTER_PORT"));
  // tp-run's own variables win over an outer launcher's.
  auto own = From({{"TPC_RANK", "1"},
                   {"TPC_WORLD_SIZE", "2"},
                   {"TPC_MASTER", "127.0.0.1:7000"},
                   {"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "1"}});
  REQUIRE(own.ok());
  CHECK((*own)->launcher == "tp-run");
  CHECK((*own)->store_hosted);
  CHECK((*own)->rank == 1);
}
