// Which rank of how many this process is, and where the rendezvous store is, from the
// environment of the launcher that started it: tp-run itself (TPC_*), torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), OpenMPI (OMPI_COMM_WORLD_*) or Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). The store's address comes from --master
// ADDR:PORT, else MASTER_ADDR/MASTER_PORT (MASTER_PORT + 1 under torchrun's agent, which
// serves its own store on MASTER_PORT: TORCHELASTIC_USE_AGENT_STORE=True), else (every
// rank on this machine) 127.0.0.1 and a port derived from the job id.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tpc::runtime {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  // Ranks on this machine (they share its cores).
  int local_size = 1;
  std::string master_host;
  int master_port = 0;
  // "tp-run", "torchrun", "OpenMPI" or "Slurm": named in messages.
  std::string launcher;
  // Where the world size came from, for messages: "WORLD_SIZE=2".
  std::string size_source;
  // The launcher's id of this job ("" when it has none): part of the run's identity.
  std::string job_id;
  // The store is hosted by the tp-run launcher, not by rank 0.
  bool store_hosted = false;
};

// The variables tp-run's launcher sets for the workers it starts.
inline constexpr const char* kEnvRank = "TPC_RANK";
inline constexpr const char* kEnvWorldSize = "TPC_WORLD_SIZE";
inline constexpr const char* kEnvMaster = "TPC_MASTER";  // HOST:PORT of the launcher's store

// The port a launcher-less default uses when no job id gives one (torch's default).
inline constexpr int kDefaultMasterPort = 29500;

using EnvLookup = std::function<const char*(const char*)>;

// The world of a process started by a launcher, or nullopt when no launcher's variables
// are set. `master` is --master (empty when not given). Errors (bad numbers, a rank out
// of range, no master address for ranks on several machines) name the variable.
absl::StatusOr<std::optional<World>> WorldFromEnvironment(const EnvLookup& env,
                                                          const std::string& master);

// HOST:PORT (HOST a name, an IPv4 literal or [IPv6]) into its parts.
absl::Status ParseHostPort(const std::string& text, std::string* host, int* port);

}  // namespace tpc::runtime
