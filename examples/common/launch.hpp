#pragma once
// The flags of a launch without mpiexec: start each process yourself with the same
// --init-url tcp://HOST:PORT (rank 0's machine), its --rank and the --world-size. The same
// launch from torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) needs no flag.
#include <cstdio>
#include <optional>
#include <string>

#include <ptrain/launch/url_launch.hpp>

#include "cli.hpp"

namespace examples {

inline void add_launch_options(Cli& cli) {
  cli.option("--init-url", "", "launch without mpiexec: rank 0's tcp://HOST:PORT where the processes meet")
      .integer_option("--rank", 0, "this process's rank, with --init-url", 0)
      .integer_option("--world-size", 1, "the number of processes, with --init-url");
}

// The launch the flags ask for (nullopt: none, mpiexec's or the environment's); false after
// printing when they are inconsistent.
inline bool url_launch_from(const Cli& cli, std::optional<ptrain::UrlLaunch>& launch) {
  const std::string url = cli.str("--init-url");
  if (url.empty()) {
    if (cli.str("--rank") == "0" && cli.str("--world-size") == "1") return true;
    std::fprintf(stderr, "%s: --rank and --world-size need --init-url\n", cli.program().c_str());
    return false;
  }
  try {
    launch = ptrain::url_launch(url, static_cast<int>(cli.integer("--rank")),
                                static_cast<int>(cli.integer("--world-size")));
  } catch (const ptrain::Error& e) {
    std::fprintf(stderr, "%s: %s\n", cli.program().c_str(), e.what());
    return false;
  }
  return true;
}

}  // namespace examples
