#pragma once
// Who am I: rank, world size and node-local rank of this process, read from the environment
// that the launcher left (no MPI call, so it works before MPI starts and in plain tests).
//
//   mpiexec (MPICH hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   srun (Slurm task):     SLURM_PROCID, SLURM_NTASKS (SLURM_STEP_NUM_TASKS when set), SLURM_LOCALID,
//                          tasks on this node from SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE
//                          (both "2(x3),1" lists indexed by SLURM_NODEID) or SLURM_NTASKS_PER_NODE
//   by URL (torchrun's):   MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (launch/url_launch.hpp;
//                          LOCAL_RANK and LOCAL_WORLD_SIZE when set)
//   none of these:         a single process
//
// PMI wins over Slurm: mpiexec inside an allocation starts its proxy as a one-task Slurm step
// whose SLURM_PROCID=0 every rank inherits, and only PMI tells the ranks apart. `srun --mpi=pmi2`
// sets both and they agree; then the launcher is "slurm". A process that Slurm did not start as
// a task of a step (the batch script itself: SLURM_PROCID=0 and the job's SLURM_NTASKS, but no
// SLURM_STEP_ID) is single. (Seen with Slurm 22.05 and MPICH 4.0; test/launch embeds it.)
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/launch/url_launch.hpp"

namespace ptrain {

struct ProcessInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes of this node
  int local_size = 1;  // processes on this node
  std::string launcher = "single";  // "mpiexec", "slurm", "url" or "single"
};

namespace detail {

// What the environment said; local_known is false when it named no node-local rank (then
// local_rank/local_size assume one process per node, and MpiSession asks MPI instead).
struct LaunchEnvironment {
  ProcessInfo info;
  bool local_known = true;
  std::optional<UrlLaunch> url;  // set when the launcher is "url": where the processes meet
};

int env_int(const char* name, const char* value);

// Slurm's compressed per-node task counts, e.g. "2(x3),1" = nodes 0-2 run 2 tasks, node 3 runs 1.
int slurm_tasks_on_node(const char* name, const char* list, int node);

void validate(const ProcessInfo& p, const char* source);

// env(name) returns the variable's value or nullptr when it is not set.
template <class Env>
LaunchEnvironment parse_launch_environment(Env&& env) {
  LaunchEnvironment out;
  ProcessInfo& p = out.info;
  const char* pmi_rank = env("PMI_RANK");
  const char* pmi_size = env("PMI_SIZE");
  const char* slurm_rank = env("SLURM_PROCID");
  const char* slurm_size = env("SLURM_STEP_NUM_TASKS") ? env("SLURM_STEP_NUM_TASKS") : env("SLURM_NTASKS");
  const bool slurm_step = slurm_rank && slurm_size && (env("SLURM_STEP_ID") || env("SLURM_STEPID"));

  if (pmi_rank || pmi_size) {
    check(pmi_rank && pmi_size, "launch: PMI_RANK and PMI_SIZE must be set together (PMI_RANK ",
          pmi_rank ? pmi_rank : "unset", ", PMI_SIZE ", pmi_size ? pmi_size : "unset", ")");
    p.rank = env_int("PMI_RANK", pmi_rank);
    p.world_size = env_int("PMI_SIZE", pmi_size);
    p.launcher = "mpiexec";
    if (slurm_step && env_int("SLURM_PROCID", slurm_rank) == p.rank &&
        env_int("SLURM_NTASKS", slurm_size) == p.world_size)
      p.launcher = "slurm";
  } else if (slurm_step) {
    p.rank = env_int("SLURM_PROCID", slurm_rank);
    p.world_size = env_int("SLURM_NTASKS", slurm_size);
    p.launcher = "slurm";
  } else if (const char* master = env("MASTER_ADDR")) {
    const char* port = env("MASTER_PORT");
    const char* rank = env("RANK");
    const char* size = env("WORLD_SIZE");
    check(port && rank && size, "launch: MASTER_ADDR is set, so MASTER_PORT, RANK and WORLD_SIZE must be too (",
          port ? "" : "MASTER_PORT ", rank ? "" : "RANK ", size ? "" : "WORLD_SIZE ", "unset)");
    out.url = url_launch(std::string("tcp://") + master + ":" + port, env_int("RANK", rank),
                         env_int("WORLD_SIZE", size), "MASTER_ADDR:MASTER_PORT");
    p.rank = out.url->rank;
    p.world_size = out.url->world_size;
    p.launcher = "url";
    if (const char* local = env("LOCAL_RANK"), *n = env("LOCAL_WORLD_SIZE"); local && n) {
      p.local_rank = env_int("LOCAL_RANK", local);
      p.local_size = env_int("LOCAL_WORLD_SIZE", n);
    } else {
      out.local_known = false;
    }
    validate(p, "url");
    return out;
  } else {
    return out;
  }

  if (const char* id = env("MPI_LOCALRANKID"), *n = env("MPI_LOCALNRANKS"); id && n) {
    p.local_rank = env_int("MPI_LOCALRANKID", id);
    p.local_size = env_int("MPI_LOCALNRANKS", n);
  } else if (const char* local = env("SLURM_LOCALID"); p.launcher == "slurm" && local) {
    p.local_rank = env_int("SLURM_LOCALID", local);
    const char* node = env("SLURM_NODEID");
    const int node_id = node ? env_int("SLURM_NODEID", node) : 0;
    if (const char* list = env("SLURM_STEP_TASKS_PER_NODE"))
      p.local_size = slurm_tasks_on_node("SLURM_STEP_TASKS_PER_NODE", list, node_id);
    else if (const char* list2 = env("SLURM_TASKS_PER_NODE"))
      p.local_size = slurm_tasks_on_node("SLURM_TASKS_PER_NODE", list2, node_id);
    else if (const char* per_node = env("SLURM_NTASKS_PER_NODE"))
      p.local_size = env_int("SLURM_NTASKS_PER_NODE", per_node);
    else
      fail("launch: Slurm set SLURM_LOCALID but none of SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE, "
           "SLURM_NTASKS_PER_NODE: cannot tell how many tasks share this node");
  } else {
    p.local_rank = 0;
    p.local_size = 1;
    out.local_known = false;
  }
  validate(p, p.launcher.c_str());
  return out;
}

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE int env_int(const char* name, const char* value) {
  return launch_number(std::string("environment variable ") + name, value);
}

PTRAIN_PREBUILT_INLINE int slurm_tasks_on_node(const char* name, const char* list, int node) {
  const std::string_view text(list);
  int index = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, end - at);
    const std::size_t paren = item.find("(x");
    const std::string count(item.substr(0, paren));
    int repeat = 1;
    if (paren != std::string_view::npos) {
      check(item.size() > paren + 3 && item.back() == ')', "launch: ", name, "='", text, "': malformed item '", item,
            "', expected N or N(xR)");
      repeat = env_int(name, std::string(item.substr(paren + 2, item.size() - paren - 3)).c_str());
    }
    const int tasks = env_int(name, count.c_str());
    if (node < index + repeat) return tasks;
    index += repeat;
    at = end + 1;
  }
  fail("launch: ", name, "='", text, "' lists ", index, " nodes but SLURM_NODEID is ", node);
}

PTRAIN_PREBUILT_INLINE void validate(const ProcessInfo& p, const char* source) {
  check(p.world_size >= 1 && p.rank >= 0 && p.rank < p.world_size, "launch (", source, "): rank ", p.rank,
        " is not in [0, world size ", p.world_size, ")");
  check(p.local_size >= 1 && p.local_size <= p.world_size && p.local_rank >= 0 && p.local_rank < p.local_size,
        "launch (", source, "): local rank ", p.local_rank, " of ", p.local_size,
        " local processes does not fit a world of ", p.world_size);
}
#endif

}  // namespace detail

// The process's place in the job, from a lookup env(name) -> const char* (nullptr when unset).
// Throws ptrain::Error naming the variable when a value is malformed or inconsistent.
template <class Env>
ProcessInfo process_info_from(Env&& env) {
  return detail::parse_launch_environment(std::forward<Env>(env)).info;
}

// The process's place in the job, from this process's environment.
ProcessInfo detect_process_info();

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE ProcessInfo detect_process_info() {
  return process_info_from([](const char* name) -> const char* { return std::getenv(name); });
}
#endif

}  // namespace ptrain
