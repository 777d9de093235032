#pragma once
// run_rank_guard: the body of ptrain_rank_guard (tools/rank_guard.cpp), which the launcher starts
// in place of each rank:
//
//   mpiexec -n 4 ptrain_rank_guard ./train --epochs 3
//   srun -n 4 ptrain_rank_guard ./train --epochs 3
//
// A rank killed by a signal (kill -9, the out-of-memory killer, a segfault) cannot say so itself,
// and the launcher's banner names only a process id ("PID 12193 ... EXIT CODE: 9"), on a 2 x 2
// grid another rank's. The guard knows which rank it runs (PMI_RANK or SLURM_PROCID, read as
// ptrain/launch/process_info.hpp does, before MPI starts) and waits for it: when the rank dies of
// a signal, the guard writes "rank R (pid P on host H) was killed by signal 9 (SIGKILL)" in one
// line to stderr, then dies of the same signal, so the launcher ends the other ranks as before.
// Signals the launcher sends the guard are passed on to the rank; the rank is killed if the guard
// is (PR_SET_PDEATHSIG), so no rank outlives its guard.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "ptrain/core/log.hpp"
#include "ptrain/launch/process_info.hpp"

namespace ptrain {

namespace detail {

inline volatile std::sig_atomic_t guarded_pid = 0;
inline volatile std::sig_atomic_t forwarded_signal = 0;

inline void forward_to_rank(int signal) {
  forwarded_signal = signal;
  if (guarded_pid > 0) ::kill(static_cast<pid_t>(guarded_pid), signal);
}

inline std::string signal_name(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  const char* text = ::strsignal(signal);
  return std::to_string(signal) + " (SIG" + (abbrev ? abbrev : "?") + ": " + (text ? text : "unknown") + ")";
}

}  // namespace detail

// command: the program and its arguments, followed in memory by a null pointer (the tail of
// main's argv). Returns the rank's exit status when it exits; dies of
// the rank's signal when a signal ended it.
inline int run_rank_guard(std::span<char*> command) {
  if (command.empty() || !command[0]) {
    log_line("ptrain_rank_guard: expected a program to run, as in `mpiexec -n 2 ptrain_rank_guard ./train ...`",
             stderr);
    return 2;
  }
  std::string who;
  try {
    const ProcessInfo info = detect_process_info();
    who = "rank " + std::to_string(info.rank) + " of " + std::to_string(info.world_size);
  } catch (const std::exception& e) {
    who = "a rank whose number the environment does not say (" + std::string(e.what()) + ")";
  }
  char host[256] = "unknown host";
  ::gethostname(host, sizeof host - 1);

  const pid_t guard = ::getpid();
  const pid_t rank = ::fork();
  if (rank < 0) {
    log_line("ptrain_rank_guard: fork failed: " + std::string(std::strerror(errno)), stderr);
    return 127;
  }
  if (rank == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != guard) std::_Exit(127);  // the guard died before prctl took effect
    ::execvp(command[0], command.data());
    log_line("ptrain_rank_guard: " + who + " on host " + host + ": cannot run '" + command[0] +
                 "': " + std::strerror(errno),
             stderr);
    std::_Exit(127);
  }
  detail::guarded_pid = rank;
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM}) std::signal(s, detail::forward_to_rank);

  int status = 0;
  while (::waitpid(rank, &status, 0) < 0) {
    if (errno != EINTR) {
      log_line("ptrain_rank_guard: waitpid failed: " + std::string(std::strerror(errno)), stderr);
      return 127;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int signal = WTERMSIG(status);
  const std::string place = who + " (pid " + std::to_string(rank) + " on host " + host + ")";
  if (detail::forwarded_signal == signal)
    log_line("ptrain_rank_guard: " + place + " ended by signal " + detail::signal_name(signal) +
                 ", which the launcher sent it",
             stderr);
  else
    log_line("ptrain_rank_guard: " + place + " was killed by signal " + detail::signal_name(signal) +
                 (signal == SIGKILL ? "; sent by a user, a scheduler, or the kernel's out-of-memory killer (see dmesg)"
                                    : ""),
             stderr);
  // The rank dumped its own core where it was asked to; the guard's would only mislead.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  std::signal(signal, SIG_DFL);
  ::kill(guard, signal);
  return 128 + signal;
}

}  // namespace ptrain
