#include "tpc/runtime/world.h"

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

// An integer variable; nullopt when unset.
absl::StatusOr<std::optional<int>> IntVar(const EnvLookup& env, const char* name, int lo, int hi) {
  const char* v = env(name);
  if (v == nullptr) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(v, &value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", v, ": expected an integer from ", lo, " to ", hi));
  }
  return std::optional<int>(value);
}

struct Convention {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // ranks on this machine; null when the launcher has none
  const char* job_id;      // the job's id (gives a default port); null when none
  const char* step_id;     // a step of the job; null when none
};

// Checked in this order: tp-run's own variables win (a worker of `tp-run` started under
// mpirun still is the launcher's worker), torchrun's are what users set by hand.
constexpr Convention kConventions[] = {
    {"tp-run", kEnvRank, kEnvWorldSize, nullptr, nullptr, kEnvMaster, nullptr},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
     nullptr},
    {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", nullptr},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_JOB_ID",
     "SLURM_STEP_ID"},
};

}  // namespace

absl::Status ParseHostPort(const std::string& text, std::string* host, int* port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected [IPv6]:PORT"));
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected HOST:PORT"));
    }
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  int value = 0;
  if (!absl::SimpleAtoi(p, &value) || value < 1 || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': the port must be an integer from 1 to 65535"));
  }
  *host = h;
  *port = value;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<World>> WorldFromEnvironment(const EnvLookup& env,
                                                          const std::string& master) {
  const Convention* found = nullptr;
  for (const Convention& c : kConventions) {
    if (env(c.rank) != nullptr && env(c.size) != nullptr) {
      found = &c;
      break;
    }
  }
  if (found == nullptr) return std::optional<World>();
  const Convention& c = *found;
  World w;
  w.launcher = c.launcher;
  constexpr int kMax = 1 << 20;
  TPC_ASSIGN_OR_RETURN(auto size, IntVar(env, c.size, 1, kMax));
  TPC_ASSIGN_OR_RETURN(auto rank, IntVar(env, c.rank, 0, kMax));
  w.size = *size;
  w.rank = *rank;
  w.size_source = absl::StrCat(c.size, "=", w.size);
  if (c.job_id != nullptr && env(c.job_id) != nullptr) w.job_id = env(c.job_id);
  if (c.step_id != nullptr && env(c.step_id) != nullptr)
    absl::StrAppend(&w.job_id, ".", env(c.step_id));
  if (w.rank >= w.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.rank, "=", w.rank, " is not below ", c.size, "=", w.size));
  }
  w.local_rank = w.rank;
  if (c.local_rank != nullptr) {
    TPC_ASSIGN_OR_RETURN(auto local, IntVar(env, c.local_rank, 0, kMax));
    if (local) w.local_rank = *local;
  }
  w.local_size = w.size;
  if (c.local_size != nullptr) {
    TPC_ASSIGN_OR_RETURN(auto local_size, IntVar(env, c.local_size, 1, kMax));
    if (local_size) w.local_size = *local_size;
  } else if (w.launcher == "Slurm") {
    TPC_ASSIGN_OR_RETURN(auto nodes, IntVar(env, "SLURM_NNODES", 1, kMax));
    if (nodes) w.local_size = (w.size + *nodes - 1) / *nodes;
  }

  // The store: --master, then MASTER_ADDR/MASTER_PORT (TPC_MASTER for tp-run's workers).
  if (w.launcher == "tp-run") {
    const char* m = env(kEnvMaster);
    if (m == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kEnvRank, " is set but ", kEnvMaster, " is not (set by tp-run's launcher)"));
    }
    TPC_RETURN_IF_ERROR(ParseHostPort(m, &w.master_host, &w.master_port));
    w.store_hosted = true;
    return std::optional<World>(w);
  }
  if (!master.empty()) {
    absl::Status s = ParseHostPort(master, &w.master_host, &w.master_port);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--master ", s.message()));
    return std::optional<World>(w);
  }
  const char* addr = env("MASTER_ADDR");
  TPC_ASSIGN_OR_RETURN(auto port, IntVar(env, "MASTER_PORT", 1, 65535));
  if (addr != nullptr && *addr != '\0') {
    w.master_host = addr;
  } else {
    // Without an address, rank 0 must be on this machine: every rank is.
    bool all_local = false;
    if (c.local_size != nullptr) {
      TPC_ASSIGN_OR_RETURN(auto local_size, IntVar(env, c.local_size, 1, kMax));
      all_local = local_size && *local_size == w.size;
    }
    if (!all_local && w.launcher == "Slurm") {
      TPC_ASSIGN_OR_RETURN(auto nodes, IntVar(env, "SLURM_NNODES", 1, kMax));
      all_local = nodes && *nodes == 1;
    }
    if (!all_local) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", w.rank, " of ", w.size, " (", w.launcher,
          "): where is rank 0? The ranks may be on several machines: give --master ADDR:PORT "
          "or MASTER_ADDR and MASTER_PORT"));
    }
    w.master_host = "127.0.0.1";
  }
  if (port) {
    w.master_port = *port;
    // torchrun's agent serves its own store (not ours) on MASTER_PORT and says so to its
    // workers: ours takes the next port.
    const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
    if (agent != nullptr && (std::string(agent) == "True" || std::string(agent) == "1")) {
      if (*port == 65535) {
        return absl::InvalidArgumentError(
            "MASTER_PORT=65535 is torchrun's store and there is no next port: give --master");
      }
      ++w.master_port;
    }
  } else {
    // Every rank of one job derives the same port; different jobs (mostly) differ.
    w.master_port = kDefaultMasterPort;
    if (!w.job_id.empty()) {
      // Of the job and its step: srun steps of one job get their own ports.
      uint32_t h = 2166136261u;  // FNV-1a: the same on every machine and build
      for (char ch : w.job_id) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
      // Below Linux's ephemeral range (32768 and up by default), where the ports of
      // outgoing connections (other jobs' collectives) could already hold it.
      w.master_port = 20000 + static_cast<int>(h % 12000);
    }
  }
  return std::optional<World>(w);
}

}  // namespace tpc::runtime
