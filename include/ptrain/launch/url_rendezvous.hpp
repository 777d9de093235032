#pragma once
// How processes started on their own become one MPI world (a launch by URL, url_launch.hpp).
//
// MPI's dynamic-process calls (MPI_Open_port, MPI_Comm_accept/connect) would be the textbook
// way, but Debian 12's MPICH 4.0.2 (ch4:ucx) does not implement them: MPI_Open_port fails with
// "MPIDI_UCX_get_local_upids: The function is currently not supported with ucx netmod". So ptrain
// plays the small part of mpiexec that a job needs once its processes exist: rank 0 serves
// MPICH's process-manager protocol (PMI-1, rendezvous_server.hpp) at the URL, and every rank,
// before MPI_Init, checks in there and points its MPI at it (PMI_PORT, PMI_ID). MPI_Init then
// builds MPI_COMM_WORLD with the given ranks, and all traffic (and NCCL's unique id) goes
// through MPI as under mpiexec.
//
// The other ranks keep their check-in connection as a watchdog: when rank 0 says the job ends
// (a rank did not arrive in time, or failed) or rank 0 goes away, they end too, in place of the
// launcher's kill.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/launch/rendezvous_server.hpp"
#include "ptrain/launch/tcp_socket.hpp"
#include "ptrain/launch/url_launch.hpp"

namespace ptrain {

class UrlRendezvous {
 public:
  // Before MPI_Init. Throws when rank 0 cannot be reached (or cannot listen) within the timeout,
  // or rank 0 refuses this process.
  explicit UrlRendezvous(UrlLaunch launch) : launch_(std::move(launch)) {
    // MPICH's PMI client reads these in MPI_Init (PMI_ID: it learns its rank and size from the
    // server). Set before this object starts a thread: setenv races with getenv elsewhere.
    ::setenv("PMI_PORT", (launch_.host + ":" + std::to_string(launch_.port)).c_str(), 1);
    ::setenv("PMI_ID", std::to_string(launch_.rank).c_str(), 1);
    const std::string host = host_name();
    if (launch_.rank == 0) {
      server_ = std::make_unique<detail::RendezvousServer>(detail::listen_on_port(launch_.port), launch_, host);
    } else {
      const auto deadline = detail::LaunchClock::now() + launch_.timeout;
      control_ = detail::connect_until(launch_.host, launch_.port, deadline,
                                       "rank 0 at " + launch_.url() + " within " +
                                           std::to_string(launch_.timeout.count()) + " s");
      control_.send_line("ptrain-hello rank=" + std::to_string(launch_.rank) +
                         " size=" + std::to_string(launch_.world_size) + " host=" + host);
      const auto answer = control_.read_line(deadline);
      check(answer.has_value(), "launch: rank 0 at ", launch_.url(), " did not answer the check-in of rank ",
            launch_.rank);
      if (answer->rfind("abort ", 0) == 0) fail("launch: rank 0 ended the job: ", without_code(*answer));
      check(*answer == "welcome", "launch: ", launch_.url(), " answered '", answer->substr(0, 80),
            "': is it a ptrain rank 0?");
      watchdog_ = std::thread([this] { watch(); });
    }
  }
  // Without finish() (MPI never started): stops at once; rank 0 then sees this rank leave.
  ~UrlRendezvous() {
    if (watchdog_.joinable()) {
      finished_ = true;
      control_.shut_down();
      watchdog_.join();
    }
  }
  UrlRendezvous(const UrlRendezvous&) = delete;
  UrlRendezvous& operator=(const UrlRendezvous&) = delete;

  const UrlLaunch& launch() const { return launch_; }

  // After MPI_Finalize: the other ranks tell rank 0 they are done; rank 0 waits for them.
  void finish() {
    if (server_) server_->finish();
    if (watchdog_.joinable()) {
      finished_ = true;
      control_.send_line("done");
      control_.shut_down();
      watchdog_.join();
    }
  }

 private:
  static std::string host_name() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
  }

  // "abort code=C why" -> "why"
  static std::string without_code(const std::string& line) {
    const std::size_t space = line.find(' ', 6);
    return space == std::string::npos ? line : line.substr(space + 1);
  }

  void watch() {
    auto line = control_.read_line();
    while (line && line->rfind("abort ", 0) != 0) line = control_.read_line();
    if (finished_) return;
    const std::string prefix = "rank " + std::to_string(launch_.rank) + ": ";
    if (line) {
      const int code = std::atoi(line->c_str() + line->find("code=") + 5);
      log_line(prefix + "ending: rank 0 ended the job: " + without_code(*line), stderr);
      std::_Exit(code == 0 ? 1 : code);
    }
    log_line(prefix + "ending: lost the connection to rank 0 at " + launch_.url() +
                 " before the end (rank 0 ended or was killed)",
             stderr);
    std::_Exit(1);
  }

  UrlLaunch launch_;
  std::unique_ptr<detail::RendezvousServer> server_;  // rank 0
  detail::LineSocket control_;                         // the other ranks
  std::thread watchdog_;
  std::atomic<bool> finished_{false};
};

}  // namespace ptrain
