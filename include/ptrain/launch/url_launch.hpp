#pragma once
// Launching by URL and rank, without mpiexec: every process is started on its own (by hand, by
// a script on each machine) with the same rendezvous address tcp://HOST:PORT, its rank and the
// world size. Rank 0 listens there; see url_rendezvous.hpp for what happens next. This header
// only describes the launch and checks the description.
#include <chrono>
#include <string>
#include <string_view>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

struct UrlLaunch {
  std::string host;  // rank 0's address as the other ranks reach it (a name or an IPv4 address)
  int port = 0;
  int rank = 0;
  int world_size = 1;
  // How long rank 0 waits for every other rank to arrive, and the others for rank 0 to listen.
  std::chrono::seconds timeout{120};

  std::string url() const { return "tcp://" + host + ":" + std::to_string(port); }
};

namespace detail {

inline int launch_number(std::string_view what, std::string_view text) {
  int value = 0;
  bool ok = !text.empty() && text.size() <= 9;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) value = value * 10 + (c - '0');
  }
  check(ok, "launch: ", what, "='", text, "' is not a non-negative integer");
  return value;
}

}  // namespace detail

// The port when a URL names none (torchrun's default MASTER_PORT).
inline constexpr int default_launch_port = 29500;

// url is "tcp://HOST:PORT" or "tcp://HOST" (port 29500); what names where the values came from
// in messages ("--init-url", "MASTER_ADDR:MASTER_PORT").
UrlLaunch url_launch(std::string_view url, int rank, int world_size, std::string_view what = "--init-url");

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE UrlLaunch url_launch(std::string_view url, int rank, int world_size, std::string_view what) {
  constexpr std::string_view scheme = "tcp://";
  check(url.substr(0, scheme.size()) == scheme, "launch: ", what, " '", url, "' must look like tcp://HOST:PORT");
  const std::string_view address = url.substr(scheme.size());
  const std::size_t colon = address.rfind(':');
  UrlLaunch launch;
  launch.host = std::string(address.substr(0, colon));
  check(!launch.host.empty(), "launch: ", what, " '", url, "' names no host (e.g. tcp://10.128.0.8:29500)");
  launch.port = default_launch_port;
  if (colon != std::string_view::npos)
    launch.port = detail::launch_number(std::string(what) + " port", address.substr(colon + 1));
  check(launch.port >= 1 && launch.port <= 65535, "launch: ", what, " '", url, "': port ", launch.port,
        " is not in 1..65535");
  check(world_size >= 1, "launch: the world size ", world_size, " must be at least 1");
  check(rank >= 0 && rank < world_size, "launch: rank ", rank, " is not in [0, world size ", world_size, ")");
  launch.rank = rank;
  launch.world_size = world_size;
  return launch;
}
#endif

}  // namespace ptrain
