#pragma once
// MpiSession: MPI's lifetime as an object. The constructor initialises MPI (MPI_Init_thread),
// reads who this process is and checks it against MPI, and registers the 16-bit wire types;
// the destructor frees them and finalises MPI. Make one in main (or use run_main) and hand it,
// or communicators made from it (MpiComm in ptrain/comm/mpi_comm.hpp), down.
//
// MPI allows one initialisation per process, so a second session, alive or after the first
// ended, is refused with an error; no global object keeps track: MPI itself is asked.
//
// Started without mpiexec (a launch by URL: a UrlLaunch given here, or torchrun's MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE), the session first meets the other processes at the URL
// (UrlRendezvous) and then initialises MPI as one world with the given ranks.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>
#include <memory>
#include <optional>
#include <string>

#include <mpi.h>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/launch/mpi_abort.hpp"
#include "ptrain/launch/mpi_types.hpp"
#include "ptrain/launch/process_info.hpp"
#include "ptrain/launch/url_launch.hpp"
#include "ptrain/launch/url_rendezvous.hpp"

namespace ptrain {

// Which threads may call MPI. funneled (the default) lets other threads run (a data prefetch
// thread, OpenMP) as long as only the main thread calls MPI; serialized lets any thread call
// it, one at a time; multiple is what MPICH's asynchronous progress thread needs
// (MPICH_ASYNC_PROGRESS=1).
enum class MpiThreading : int {
  single = MPI_THREAD_SINGLE,
  funneled = MPI_THREAD_FUNNELED,
  serialized = MPI_THREAD_SERIALIZED,
  multiple = MPI_THREAD_MULTIPLE,
};

inline const char* to_string(MpiThreading t) {
  switch (t) {
    case MpiThreading::single: return "MPI_THREAD_SINGLE";
    case MpiThreading::funneled: return "MPI_THREAD_FUNNELED";
    case MpiThreading::serialized: return "MPI_THREAD_SERIALIZED";
    case MpiThreading::multiple: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown MPI thread level";
}

class MpiSession {
 public:
  explicit MpiSession(MpiThreading required = MpiThreading::funneled, std::optional<UrlLaunch> url = std::nullopt)
      : MpiSession(nullptr, nullptr, required, std::move(url)) {}
  // url: launch by URL and rank (e.g. from --init-url, --rank, --world-size); without it the
  // environment says how the process was started.
  MpiSession(int& argc, char**& argv, MpiThreading required = MpiThreading::funneled,
             std::optional<UrlLaunch> url = std::nullopt)
      : MpiSession(&argc, &argv, required, std::move(url)) {}

  // Leaving the session's scope by an exception means this rank stops taking part while the
  // others may wait for it in a collective (MPI_Finalize is one): end them all instead.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // rank and world size agree with MPI_COMM_WORLD; the launcher and node-local rank come
  // from the environment, or from MPI's shared-memory split when the environment has none.
  const ProcessInfo& info() const { return info_; }
  int rank() const { return info_.rank; }
  int world_size() const { return info_.world_size; }
  // The thread level MPI provided (at least the one asked for).
  MpiThreading threading() const { return threading_; }
  // MPI_COMM_WORLD, for raw MPI calls; communicators made by ptrain use their own duplicate.
  MPI_Comm world_handle() const { return MPI_COMM_WORLD; }
  const MpiWireTypes& wire_types() const { return *types_; }

 private:
  MpiSession(int* argc, char*** argv, MpiThreading required, std::optional<UrlLaunch> url);
  // The ranks of a node split its cores, unless PTRAIN_NUM_THREADS says otherwise: two ranks
  // each running two threads on two cores would oversubscribe them.
  void share_cores_among_local_ranks() const;
  static std::string mismatch_hint(const ProcessInfo& env, int mpi_size);

  std::unique_ptr<UrlRendezvous> rendezvous_;  // a launch by URL
  std::unique_ptr<MpiWireTypes> types_;
  ProcessInfo info_;
  MpiThreading threading_ = MpiThreading::single;
};

#if PTRAIN_PREBUILT_MPI_FUNCTION_BODIES
PTRAIN_PREBUILT_MPI_INLINE MpiSession::MpiSession(int* argc, char*** argv, MpiThreading required,
                                                  std::optional<UrlLaunch> url) {
  int finalized = 0, initialized = 0;
  MPI_Finalized(&finalized);
  check(!finalized,
        "MpiSession: MPI was finalised by an earlier MpiSession and cannot start again in this process "
        "(MPI allows one initialisation per process): keep one MpiSession for the whole program");
  MPI_Initialized(&initialized);
  check(!initialized,
        "MpiSession: MPI is already initialised (another MpiSession is alive, or MPI_Init was called "
        "elsewhere): make one MpiSession in main and pass it, or communicators made from it, down");
  detail::LaunchEnvironment launch =
      detail::parse_launch_environment([](const char* name) -> const char* { return std::getenv(name); });
  if (url) {
    check(launch.info.launcher == "single" || launch.info.launcher == "url", "MpiSession: a launch by URL (",
          url->url(), ", rank ", url->rank, ") inside a process that ", launch.info.launcher,
          " started: use one or the other");
    launch.info = ProcessInfo{url->rank, url->world_size, 0, 1, "url"};
    launch.local_known = false;
    launch.url = std::move(url);
  }
  if (launch.url) {
    if (const char* seconds = std::getenv("PTRAIN_RENDEZVOUS_TIMEOUT"))
      launch.url->timeout = std::chrono::seconds(detail::env_int("PTRAIN_RENDEZVOUS_TIMEOUT", seconds));
    rendezvous_ = std::make_unique<UrlRendezvous>(*launch.url);
  }

  // From here on a failure throws with MPI left running, so that abort_all (run_main) can
  // end every rank rather than leave the others waiting for this one.
  int provided = 0;
  detail::mpi_check(MPI_Init_thread(argc, argv, static_cast<int>(required), &provided), "MPI_Init_thread");
  threading_ = static_cast<MpiThreading>(provided);
  check(provided >= static_cast<int>(required), "MpiSession: asked MPI for ", to_string(required),
        " but it provides only ", to_string(threading_));
  types_ = std::make_unique<MpiWireTypes>();

  int rank = 0, size = 1;
  detail::mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  detail::mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  info_ = launch.info;
  bool local_known = launch.local_known;
  if (info_.launcher == "single" && size > 1) {
    // Started by a launcher whose environment we do not read (another MPI's mpirun).
    info_ = ProcessInfo{rank, size, 0, 1, "mpiexec"};
    local_known = false;
  }
  check(info_.rank == rank && info_.world_size == size, "MpiSession: the environment (launcher ",
        info_.launcher, ") says this is rank ", info_.rank, " of ", info_.world_size, " but MPI says rank ", rank,
        " of ", size, mismatch_hint(info_, size));
  if (!local_known) {
    MPI_Comm node = MPI_COMM_NULL;
    detail::mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                      "MPI_Comm_split_type");
    MPI_Comm_rank(node, &info_.local_rank);
    MPI_Comm_size(node, &info_.local_size);
    MPI_Comm_free(&node);
  }
  share_cores_among_local_ranks();
}

PTRAIN_PREBUILT_MPI_INLINE void MpiSession::share_cores_among_local_ranks() const {
  const char* env = std::getenv("PTRAIN_NUM_THREADS");
  if (env && *env) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(std::max(1, cores / std::max(1, info_.local_size)));
}

PTRAIN_PREBUILT_MPI_INLINE std::string MpiSession::mismatch_hint(const ProcessInfo& env, int mpi_size) {
  if (env.launcher == "slurm" && mpi_size == 1 && env.world_size > 1)
    return ": srun started the tasks without a PMI that this MPI reads, so each is alone; run "
           "`srun --mpi=pmi2 ...` (MPICH)";
  return ": was the program started by a different MPI's launcher than the one it is linked with?";
}

PTRAIN_PREBUILT_MPI_INLINE MpiSession::~MpiSession() {
  if (std::uncaught_exceptions() > 0)
    abort_all("an exception is leaving the scope of the MpiSession: ending all ranks (run the program "
              "through ptrain::run_main to have its message printed)");
  types_.reset();
  MPI_Finalize();
  if (rendezvous_) rendezvous_->finish();
}
#endif

}  // namespace ptrain
