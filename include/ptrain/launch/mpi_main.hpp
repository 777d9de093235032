#pragma once
// run_main: the body of an MPI program, run inside an MpiSession, such that an exception on any
// rank ends every rank with that rank's message and a non-zero exit, instead of a hang:
//
//   int main(int argc, char** argv) {
//     return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
//       ptrain::MpiComm world(session);
//       ...
//     });
//   }
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "ptrain/launch/mpi_abort.hpp"
#include "ptrain/launch/mpi_session.hpp"

namespace ptrain {

// Runs body(session) and returns its result (0 when it returns void) after MPI_Finalize. An
// exception from the session's start or from body is printed as "rank R: what()" and the world
// is aborted with exit code 1 (abort_all) before any destructor could wait on another rank.
// url: a launch by URL and rank (MpiSession).
template <class Body>
int run_main(int& argc, char**& argv, Body&& body, MpiThreading threading = MpiThreading::funneled,
             std::optional<UrlLaunch> url = std::nullopt) {
  static_assert(std::is_invocable_v<Body&, MpiSession&>, "run_main: the body must be callable as body(MpiSession&)");
  std::optional<MpiSession> session;
  const std::optional<int> url_rank = url ? std::optional<int>(url->rank) : std::nullopt;
  try {
    session.emplace(argc, argv, threading, std::move(url));
    if constexpr (std::is_void_v<std::invoke_result_t<Body&, MpiSession&>>) {
      body(*session);
      return 0;
    } else {
      return static_cast<int>(body(*session));
    }
  } catch (const std::exception& e) {
    abort_all(e.what(), 1, url_rank);
  } catch (...) {
    abort_all("an exception not derived from std::exception", 1, url_rank);
  }
}

}  // namespace ptrain
