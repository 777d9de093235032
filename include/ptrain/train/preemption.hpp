#pragma once
// Preemption as Slurm announces it: SIGTERM (scancel, the end of a time limit after --signal) or
// SIGUSR1 (sbatch --signal=USR1@60) to a rank. While a PreemptionWatch lives, those signals only
// raise a flag; the Trainer asks every rank after each optimizer step whether any rank saw one
// (so all ranks stop at the same step), saves a checkpoint and returns from fit, and the program
// exits 0. Under Slurm, requeue_slurm_job then puts the job back in the queue, as PyTorch
// Lightning's auto-requeue does; the requeued job resumes from the checkpoint.
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

#include <signal.h>

namespace ptrain {

namespace detail {
inline std::atomic<int> preemption_signal{0};
inline std::atomic<bool> preemption_watched{false};
// Once the watch is over, a handler installed after it (io's partial-file cleanup) may still
// chain here: the signal then does what it would have done without the watch, end the process.
inline void on_preemption_signal(int signal) {
  if (preemption_watched.load(std::memory_order_relaxed)) {
    preemption_signal.store(signal, std::memory_order_relaxed);
    return;
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}
}  // namespace detail

// Installs the flag-raising handler over SIGTERM and SIGUSR1; puts back what was there when it
// goes (unless a handler installed after it is there now, which then chains to it).
class PreemptionWatch {
 public:
  PreemptionWatch() {
    detail::preemption_signal.store(0);
    detail::preemption_watched.store(true);
    struct sigaction ours {};
    ours.sa_handler = detail::on_preemption_signal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    for (int k = 0; k < 2; ++k) ::sigaction(signals[k], &ours, &before_[k]);
  }
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;
  ~PreemptionWatch() {
    detail::preemption_watched.store(false);
    for (int k = 0; k < 2; ++k) {
      struct sigaction now {};
      ::sigaction(signals[k], nullptr, &now);
      if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == detail::on_preemption_signal)
        ::sigaction(signals[k], &before_[k], nullptr);
    }
  }

  // The signal this process received since the watch began; 0 for none.
  static int signal() { return detail::preemption_signal.load(std::memory_order_relaxed); }

 private:
  static constexpr int signals[2] = {SIGTERM, SIGUSR1};
  struct sigaction before_[2] {};
};

inline const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

// The id of the Slurm job this process runs in (SLURM_JOB_ID), or "" outside Slurm. Only digits
// pass: the id reaches a shell in requeue_slurm_job.
inline std::string slurm_job_id() {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) return "";
  for (const char* c = job; *c; ++c)
    if (*c < '0' || *c > '9') return "";
  return job;
}

// `scontrol requeue <job>`, so that the job runs again once this allocation ends. Returns
// whether scontrol succeeded. Slurm may stop this process before scontrol returns.
inline bool requeue_slurm_job(const std::string& job) {
  return std::system(("scontrol requeue " + job).c_str()) == 0;
}

}  // namespace ptrain
