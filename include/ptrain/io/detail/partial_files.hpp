#pragma once
// The temporaries write_atomically is writing, kept where a signal handler can reach them: when
// SIGINT, SIGTERM or SIGHUP would end the process mid-write, the handler unlinks them and then lets
// the signal end the process as it would have. The paths sit in fixed slots of static storage,
// claimed and released with atomics, because a handler may not lock, allocate or throw; unlink()
// is async-signal-safe.
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>

#include <signal.h>
#include <unistd.h>

#include "ptrain/core/error.hpp"

namespace ptrain::io {

namespace detail {

inline constexpr std::size_t max_partial_files = 64;  // files being written at once, over all threads
inline constexpr std::size_t max_partial_path = 4096;
inline constexpr std::array<int, 3> ending_signals = {SIGINT, SIGTERM, SIGHUP};

struct PartialFileSlot {
  enum : int { free, claimed, live };
  std::atomic<int> state{free};
  char path[max_partial_path] = {};
};

// Constant-initialised: usable from a handler even while other statics are being built.
inline std::array<PartialFileSlot, max_partial_files> partial_file_slots;
inline std::array<struct sigaction, ending_signals.size()> actions_before_ours{};

inline void unlink_partial_files() noexcept {
  for (auto& slot : partial_file_slots)
    if (slot.state.load(std::memory_order_acquire) == PartialFileSlot::live) ::unlink(slot.path);
}

inline void on_ending_signal(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  std::size_t k = 0;
  while (ending_signals[k] != signal) ++k;
  const struct sigaction& before = actions_before_ours[k];
  if (!(before.sa_flags & SA_SIGINFO) && before.sa_handler == SIG_DFL) {
    unlink_partial_files();
    // Blocked while this handler runs, the re-raised signal is delivered on return and ends the
    // process with the status a parent (mpiexec, a shell, Slurm) expects from it.
    ::sigaction(signal, &before, nullptr);
    std::raise(signal);
  } else if (before.sa_flags & SA_SIGINFO) {
    // The program's own handler decides whether the process ends (and may call
    // io::remove_partial_files first); a handler that lets training go on must find its files intact.
    before.sa_sigaction(signal, info, context);
  } else {
    before.sa_handler(signal);
  }
  errno = saved_errno;
}

// Installed once, on the first write, over each ending signal that is not ignored.
inline void install_partial_file_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::size_t k = 0; k < ending_signals.size(); ++k) {
      struct sigaction before {};
      ::sigaction(ending_signals[k], nullptr, &before);
      actions_before_ours[k] = before;
      if (!(before.sa_flags & SA_SIGINFO) && before.sa_handler == SIG_IGN) continue;
      struct sigaction ours {};
      ours.sa_sigaction = on_ending_signal;
      sigfillset(&ours.sa_mask);
      ours.sa_flags = SA_RESTART | SA_SIGINFO;
      ::sigaction(ending_signals[k], &ours, nullptr);
    }
  });
}

// One temporary being written: removed from disk by a signal until release().
class PartialFileRecord {
 public:
  explicit PartialFileRecord(const std::string& path) {
    check(path.size() < max_partial_path, path, ": a path of ", path.size(), " bytes; expected fewer than ",
          max_partial_path);
    install_partial_file_handlers();
    for (auto& slot : partial_file_slots) {
      int expected = PartialFileSlot::free;
      if (!slot.state.compare_exchange_strong(expected, PartialFileSlot::claimed, std::memory_order_acquire)) continue;
      std::memcpy(slot.path, path.c_str(), path.size() + 1);
      slot.state.store(PartialFileSlot::live, std::memory_order_release);
      slot_ = &slot;
      return;
    }
    fail(path, ": more than ", max_partial_files, " files are being written at once");
  }
  PartialFileRecord(const PartialFileRecord&) = delete;
  PartialFileRecord& operator=(const PartialFileRecord&) = delete;
  ~PartialFileRecord() { release(); }

  void release() noexcept {
    if (slot_) slot_->state.store(PartialFileSlot::free, std::memory_order_release);
    slot_ = nullptr;
  }

 private:
  PartialFileSlot* slot_ = nullptr;
};

}  // namespace detail

// For a program with its own SIGINT/SIGTERM/SIGHUP handler that ends the process: removes the
// temporaries of the writes in progress. Async-signal-safe.
inline void remove_partial_files() noexcept { detail::unlink_partial_files(); }

}  // namespace ptrain::io
